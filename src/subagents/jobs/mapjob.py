"""A map's execution: one run per input row, ``concurrency`` at once, under the job's
budget, each failed row retried (its failure's reason appended to its task), every row's
state in the row log (maplog.py) as it changes, so a driver killed at any point is
resumed by another that runs only the rows not completed: a row whose run was in flight
is followed again (adopted) if its run goes on, and run again if it ended without
completing. A row is never run twice at once: its run id is logged before its
supervisor starts, and a resumed driver follows that run before starting another.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import events as ev
from subagents.jobs.mapinput import Row, render
from subagents.jobs.maplog import RowLog, as_int, done_entry, read_input, replay
from subagents.jobs.mapplan import map_options
from subagents.jobs.mapprogress import MapProgress
from subagents.jobs.mapresults import ResultsFile, out_format, summarize
from subagents.jobs.orchestrator import EventSink, Job
from subagents.jobs.outcome import job_result

if TYPE_CHECKING:
    from subagents.jobs.planning import JobPlan
    from subagents.jobs.store import JobStore
    from subagents.runs import RunRequest
    from subagents.types import JobResult, JobRun, JsonObject, LimitKind, RunStatus, Usage

# Told each time a row ends: the row and its last log entry.
RowSink = Callable[[Row, "JsonObject"], None]

RETRY_NOTE = "\n\nA previous attempt at this task failed: {reason}\nTry again, avoiding that."


class MapJob(Job):
    # A row is in the row log as started before its child starts: a resumed map follows
    # it again instead of starting it twice.
    runs_recorded_first = True

    def __init__(
        self,
        store: JobStore,
        job_id: str,
        job_plan: JobPlan,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(store, job_id, job_plan, env)
        self.job_dir = store.dir / job_id
        self.rows, self.variants = read_input(self.job_dir)
        self.options = map_options(job_plan.extra)
        self.retries = as_int(self.options.get("retries"))
        self.state = replay(self.job_dir)
        # Runs a predecessor started and did not see end: followed again first.
        self._adopt: dict[int, str] = {
            i: str(e["runId"]) for i, e in self.state.items() if e.get("s") == "started"
        }
        self._logged: set[str] = set(self._adopt.values())
        self._attempt: dict[int, int] = {
            i: as_int(e.get("attempt")) for i, e in self.state.items() if e.get("s") == "started"
        }
        self._slots: dict[int, int] = {}
        self._next_slot = itertools.count(len(self.rows))
        self.todo = [
            r.index for r in self.rows if self.state.get(r.index, {}).get("status") != "completed"
        ]
        self._to_start = len(self.todo)
        done = [e for e in self.state.values() if e.get("s") != "started"]
        self.progress = MapProgress(
            job_id,
            len(self.rows),
            completed=sum(e.get("status") == "completed" for e in done),
            max_cost=job_plan.budget.get("max_cost"),
        )
        # What rows completed before used counts against the budget (their slot: the row's).
        for i, entry in self.state.items():
            if entry.get("s") == "done":
                self.progress.add_cost(entry.get("cost"))
                self.budget.add(i, _spent(entry))
        self.log = RowLog(self.job_dir)
        self.on_row: RowSink | None = None
        self._out: ResultsFile | None = None

    # ---- hooks of Job ------------------------------------------------------------

    def _started_run(self, index: int) -> str | None:
        return self._adopt.pop(index, None)

    def _record_run_id(self, index: int, run_id: str) -> None:
        with self._lock:
            if run_id in self._logged:
                return
            self._logged.add(run_id)
        self.log.started(index, run_id, self._attempt.get(index, 0))

    def _budget_key(self, index: int) -> int:
        return self._slots.get(index, index)

    def _work(self, on_event: EventSink | None) -> list[JobRun]:
        out = self.options.get("out")
        if isinstance(out, str):
            fields = self.options.get("answerFields")
            self._out = ResultsFile(
                Path(out),
                out_format(out),
                self.rows,
                self.state,
                fields if isinstance(fields, list) else None,  # type: ignore[arg-type]
            )
        try:
            self._rows(on_event)
        finally:
            if self._out is not None:
                self._out.close()
        return []

    # ---- rows ------------------------------------------------------------------

    def _rows(self, on_event: EventSink | None) -> None:
        todo = iter(self.todo)
        lock = threading.Lock()
        failure: list[BaseException] = []

        def worker() -> None:
            while not failure:
                with lock:
                    index = next(todo, None)
                if index is None or self.cancelled:
                    return
                try:
                    self._row(index, on_event)
                except BaseException as exc:  # surfaced below; the other workers stop
                    failure.append(exc)
                    self.cancel_soon()

        width = max(1, min(self.plan.concurrency, len(self.todo)))
        threads = [
            threading.Thread(target=worker, name=f"subagents-map-{n}", daemon=True)
            for n in range(width)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failure:
            raise failure[0]

    def _request(self, index: int, reason: str | None) -> RunRequest:
        row = self.rows[index]
        req = self.plan.requests[self.variants[index]]
        task = render(req.task, row.fields)
        if reason:
            task += RETRY_NOTE.format(reason=reason)
        gate = req.gate
        if gate is not None and isinstance(gate.get("verify"), str):  # the row's command
            gate = {**gate, "verify": render(str(gate["verify"]), row.fields)}
        return replace(req, task=task, gate=gate)

    def _row(self, index: int, on_event: EventSink | None) -> None:
        """Run row ``index`` to its end (retrying it as allowed) and record that."""
        reason: str | None = None
        self.progress.row_started()
        while True:
            adopted = index in self._adopt
            attempt = self._attempt.get(index, 0)
            self._slots[index] = next(self._next_slot)
            result = self._run_one(index, self._request(index, reason), on_event)
            if result.get("runId") is None or "paths" not in result:
                # Never started: stopped first (the row stays to do), or the budget is spent.
                if self.cancelled:
                    self.progress.row_left()
                else:
                    why = result.get("errorMessage") or "not started"
                    self._ended(index, {"status": "skipped", "error": why}, "skipped")
                return
            status = result.get("status")
            if status == "completed" or self.cancelled:
                break
            if adopted:  # ended without its driver: run again, as if never started
                reason = None
                continue
            if attempt >= self.retries:
                break
            reason = (result.get("errorMessage") or str(status)).strip().splitlines()[0]
            self._attempt[index] = attempt + 1
        self._ended(index, done_entry(result, attempt), "done")

    def _ended(self, index: int, entry: JsonObject, kind: str) -> None:
        entry = {"i": index, "s": kind, **entry}
        self.log.append(entry)
        with self._lock:
            self.state[index] = entry
        self.progress.row_ended(entry)
        self.progress.add_cost(entry.get("cost"))
        row = self.rows[index]
        if self._out is not None:
            self._out.write(row, entry)
        if self.on_row is not None:
            with contextlib.suppress(Exception):
                self.on_row(row, entry)

    # ---- the end ---------------------------------------------------------------

    def _result(self, runs: list[JobRun], started: float) -> JobResult:
        with self._lock:
            state = dict(self.state)
        with contextlib.suppress(OSError):
            self.log.compact(state)
        self.log.close()
        record = summarize(len(self.rows), state)
        record["out"] = self.options.get("out")  # type: ignore[typeddict-item]
        status: RunStatus = "completed"
        if record["completed"] != len(self.rows):
            status = "aborted" if self.cancelled else "failed"
        error = None if status == "completed" else record["summary"]
        result = job_result(self.job_id, "map", status, [], started, error=error)
        result["usage"] = _usage(state.values())
        result["map"] = record
        return self._with_limit(result)


def _spent(entry: Mapping[str, object]) -> dict[LimitKind, float]:
    usage = entry.get("usage")
    used: dict[LimitKind, float] = {}
    if isinstance(usage, dict):
        for kind, name in (("turns", "turns"), ("tokens", "totalTokens"), ("cost", "cost")):
            value = usage.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                used[kind] = float(value)  # type: ignore[index]
    return used


def _usage(entries: Iterable[Mapping[str, object]]) -> Usage:
    total = ev.empty_usage()
    for entry in entries:
        usage = entry.get("usage")
        if isinstance(usage, dict):
            ev.add_usage(total, usage)  # type: ignore[arg-type]
    return ev.priced(total)
