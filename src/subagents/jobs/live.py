"""What ``subagents top`` and the web view show, gathered cheaply enough to refresh every second: the newest
jobs from the index, each finished run from its ``result.json``, and each running run from
the events appended to its ``events.jsonl`` since the last refresh (never the whole file
again: a run's tail keeps its offset, tool count, latest usage and activity line).
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import paths
from subagents.core.clock import epoch
from subagents.core.events import add_cost, cost_of, count, empty_usage, number
from subagents.core.files import loads, read_json
from subagents.core.records import is_event, is_run_result, object_of
from subagents.core.tail import LineTail
from subagents.errors import DamagedRecord
from subagents.jobs.control import stop_job
from subagents.jobs.maplog import LogFollower, started
from subagents.jobs.store import TERMINAL, JobStore
from subagents.present.jobview import RunRow, Snapshot
from subagents.present.outcome import limit_text
from subagents.present.roles import budget_progress

if TYPE_CHECKING:
    from subagents.present.progress import ProgressFormatter
    from subagents.types import FleetJob, FleetRun, JobRow, JobState, JsonObject, RunResult, Usage

ACTIVITY_LEN = 200
MAPS_FOLLOWED = 8


class RunTail:
    """A running run's events, read incrementally: only bytes appended since the last poll."""

    def __init__(self, run_dir: Path) -> None:
        from subagents.present.progress import ProgressFormatter

        self.tail = LineTail(run_dir / "events.jsonl")
        self.tools = 0
        self.usage: Usage = empty_usage()
        self.started: float | None = None
        self.formatter = ProgressFormatter(max_len=ACTIVITY_LEN)

    def poll(self) -> None:
        for line in self.tail.lines():
            try:
                event = loads(line)
            except ValueError:
                continue
            if not is_event(event):
                continue
            if event["type"] == "tool_call":
                self.tools += 1
            elif event["type"] == "usage":
                self.usage = event
            elif event["type"] == "run_started":
                self.started = number(event.get("ts"))
            self.formatter.line(event)


def _read(path: Path) -> JsonObject:
    with contextlib.suppress(OSError, ValueError):
        return object_of(read_json(path))
    return {}


def _where(record: Mapping[str, object]) -> tuple[str, str, str | None]:
    """A run's task, cwd and (run in its own worktree) repository, from its ``meta.json``
    or ``result.json``."""
    worktree = record.get("worktree")
    repo = worktree.get("repo") if isinstance(worktree, dict) else None
    return (
        str(record.get("task") or ""),
        str(record.get("cwd") or ""),
        repo if isinstance(repo, str) else None,
    )


class LiveJobs:
    """The live views' data: call :meth:`snapshot` as often as you like."""

    def __init__(
        self, home: Path | None = None, session: str | None = None, limit: int = 50
    ) -> None:
        self.store = JobStore(home or paths.state_home())
        self.session = session
        self.limit = limit
        self._tails: dict[str, RunTail] = {}
        self._meta: dict[str, JsonObject] = {}
        self._results: dict[str, RunResult] = {}
        # The maps' row logs looked at lately, each followed from look to look (not read
        # whole each time): the most recent, as many as a look lists jobs (MAPS_FOLLOWED
        # at least).
        self._maps: OrderedDict[str, LogFollower] = OrderedDict()
        # What the last look passed over: a line for each damaged job.json.
        self.damaged: list[str] = []

    def run_dir(self, run_id: str) -> Path:
        return paths.runs_dir(self.store.home) / run_id

    def _run_row(self, job: JobRow | JobState, run_id: str | None, first: bool) -> RunRow:
        row = partial(
            RunRow,
            job_id=job["jobId"],
            run_id=run_id,
            mode=job.get("mode") or "",
            first_of_job=first,
            session=job.get("session"),
        )
        if run_id is None:  # not started yet: waiting, or never to start (the job ended)
            status = job.get("status")
            return row(
                agent="-",
                backend="-",
                status=str(status) if status in TERMINAL else "pending",
                elapsed=None,
                tools=0,
                tokens=0,
                cost=None,
                activity="",
            )
        result = self._results.get(run_id)
        if result is None:
            on_disk = _read(self.run_dir(run_id) / "result.json")
            if is_run_result(on_disk):
                result = self._results[run_id] = on_disk  # written once: never read again
                self._tails.pop(run_id, None)
        if result is not None:
            usage = result.get("usage") or empty_usage()
            duration = number(result.get("durationMs"))
            answer = (result.get("finalText") or result.get("errorMessage") or "").strip()
            task, cwd, repo = _where(result)
            return row(
                task=task,
                cwd=cwd,
                worktree_repo=repo,
                started=epoch(result.get("startedAt")),
                agent=str(result.get("agent") or result.get("backend") or "-"),
                agent_name=result.get("agent"),
                backend=str(result.get("backend") or "-"),
                status=str(result.get("status")),
                elapsed=None if duration is None else duration / 1000,
                tools=count(result.get("toolCalls")),
                tokens=count(usage.get("totalTokens")),
                cost=number(usage.get("cost")),
                activity=answer.splitlines()[0][:ACTIVITY_LEN] if answer else "",
                limit=result.get("limit") or None,
                budget=limit_text(result),
            )
        meta = self._meta.get(run_id)
        if meta is None:
            meta = self._meta[run_id] = _read(self.run_dir(run_id) / "meta.json")
        tail = self._tails.get(run_id)
        if tail is None:
            tail = self._tails[run_id] = RunTail(self.run_dir(run_id))
        tail.poll()
        started = tail.started or number(meta.get("createdAt"))
        agent = meta.get("agent")
        task, cwd, repo = _where(meta)
        return row(
            task=task,
            cwd=cwd,
            worktree_repo=repo,
            started=started,
            agent=str(agent or meta.get("backend") or "-"),
            agent_name=agent if isinstance(agent, str) else None,
            backend=str(meta.get("backend") or "-"),
            # The watchdog's stall notice (the same formatter as ps's "stalled for N s").
            status=_status(tail.formatter, job),
            elapsed=None if started is None else max(0.0, time.time() - started),
            tools=tail.tools,
            tokens=count(tail.usage.get("totalTokens")),
            cost=number(tail.usage.get("cost")),
            activity=tail.formatter.activity() or "starting",
            budget=budget_progress(meta.get("limits"), tail.usage.get("turns"), tail.usage),
        )

    def jobs(self) -> list[tuple[JobRow, list[RunRow]]]:
        """The newest jobs (their index rows; a job whose driver died is ended first), each
        with its rows."""
        out = []
        listed = self.store.list(self.limit, self.session)
        self.damaged = self.store.damaged
        for job in listed:
            if job.get("status") not in TERMINAL:
                try:
                    job["status"] = self.store.recover_if_orphaned(job["jobId"]).get("status")
                except DamagedRecord as exc:
                    self.damaged.append(str(exc))
                except (OSError, ValueError):
                    pass
            out.append((job, self.rows(job)))
        return out

    def snapshot(self) -> Snapshot:
        snap = Snapshot()
        jobs = self.jobs()
        snap.total, snap.damaged = self.store.total, self.damaged
        for job, rows in jobs:
            snap.jobs += 1
            snap.running += job.get("status") not in TERMINAL
            for row in rows:
                snap.rows.append(row)
                snap.tokens += row.tokens
                snap.cost = add_cost(snap.cost, row.cost)
        snap.cost = cost_of(snap.cost)
        return snap

    def fleet(self) -> list[FleetJob]:
        """What ``top --json`` prints: each job (status, elapsed, tokens, cost summed over
        its runs) with its runs as ``top`` shows them (the task's first line) and where each
        run's transcript is."""
        from subagents.present.feed import first_line

        out: list[FleetJob] = []
        for job, rows in self.jobs():
            costs = [r.cost for r in rows if r.cost is not None]
            duration = number(job.get("durationMs"))
            started = epoch(job.get("startedAt")) or number(job.get("createdAt"))
            if duration is not None:
                elapsed: float | None = duration / 1000
            else:
                elapsed = None if started is None else max(0.0, time.time() - started)
            runs: list[FleetRun] = [
                {
                    "runId": row.run_id,
                    "task": first_line(row.task),
                    "agent": row.agent_name,
                    "backend": row.backend,
                    "status": row.status,
                    "elapsed": row.elapsed,
                    "tools": row.tools,
                    "tokens": row.tokens,
                    "cost": row.cost,
                    "activity": row.activity,
                    "budget": row.budget,
                    "transcript": str(self.run_dir(row.run_id) / "transcript.md")
                    if row.run_id
                    else None,
                }
                for row in rows
            ]
            out.append(
                {
                    "jobId": job["jobId"],
                    "mode": job.get("mode"),
                    "status": job.get("status"),
                    "startedAt": job.get("startedAt"),
                    "elapsed": elapsed,
                    "tokens": sum(r.tokens for r in rows),
                    "cost": cost_of(sum(costs)) if costs else None,
                    "runs": runs,
                }
            )
        return out

    def rows(self, job: JobRow | JobState, shown: str | None = None) -> list[RunRow]:
        """One row per run of ``job`` (an index row or its ``job.json``); one for a job
        whose runs have not started. ``shown``: a run of a map's to show besides its rows
        in flight (checked as the map's by the caller)."""
        run_ids: list[str | None] = list(job.get("runIds") or [])
        if job.get("mode") == "map":
            run_ids = list(self._map_in_flight(job))
            if shown and shown not in run_ids:
                run_ids.append(shown)
        run_ids = run_ids or [None]
        return [self._run_row(job, run_id, i == 0) for i, run_id in enumerate(run_ids)]

    def _map_in_flight(self, job: JobRow | JobState) -> list[str]:
        """A running map's rows in flight (its row log, followed); none once it ended."""
        if job.get("status") in TERMINAL:
            return []
        return started(self.map_entries(job))

    def map_entries(self, job: JobRow | JobState) -> dict[int, JsonObject]:
        """Each row's last entry in a map's row log as of now (rows not started are
        absent), read from where this view's last look stopped."""
        job_id = job["jobId"]
        log = self._maps.pop(job_id, None) or LogFollower(self.store.dir / job_id)
        self._maps[job_id] = log
        while len(self._maps) > max(MAPS_FOLLOWED, self.limit):
            self._maps.popitem(last=False)
        return dict(log.poll())

    def transcript(self, run_id: str, offset: int) -> tuple[str, int]:
        """The run's transcript from *offset* on, and the offset after it."""
        tail = LineTail(self.run_dir(run_id) / "transcript.md", offset)
        text = b"".join(tail.blocks()).decode("utf-8", "replace")
        return text, tail.consumed

    def stop(self, job_id: str) -> str:
        return str(stop_job(self.store, job_id).get("status"))


def _status(formatter: ProgressFormatter, job: JobRow | JobState) -> str:
    """A running run's status: waiting for a decision, stalled (the watchdog's notice, the
    same formatter as ps's "stalled for N s"), else its job's."""
    if formatter.waiting():
        return "waiting"
    if formatter.stalled_for() is not None:
        return "stalled"
    return str(job.get("status") or "running")
