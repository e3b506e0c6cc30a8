"""Jobs of every mode — single, parallel (with a concurrency limit), chain (``{previous}``)
and council (one task on several members, then a judge: council.py) — from one code path
that serves the foreground CLI, the background job driver, the Python API and the MCP
server alike.

``plan()`` (planning.py) turns a ``JobSpec`` into resolved run requests, finding every
problem before anything starts. ``Job.run()`` then runs them and writes the job result.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from subagents.core import events as ev
from subagents.core import paths, procs
from subagents.core.clock import epoch, iso
from subagents.core.files import fsync_dir
from subagents.errors import UsageError
from subagents.jobs.budget import JobBudget, refused
from subagents.jobs.outcome import job_result, job_status
from subagents.jobs.planning import JobPlan
from subagents.jobs.spec import PREVIOUS
from subagents.jobs.store import JobStore
from subagents.jobs.tasks import Tasks, beside
from subagents.runs import (
    EXIT_CODES,
    RunHandle,
    RunRequest,
    keep_warm,
    prepare,
    resume,
    start_prepared,
    tell_limit,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

    from subagents.types import (
        Event,
        JobResult,
        JobRun,
        JobState,
        LimitKind,
        LimitRecord,
        RunNotStarted,
        RunResult,
        RunStatus,
    )

# (index of the run in the job, canonical event)
EventSink = Callable[[int, "Event"], None]


class LifecycleSink(Protocol):
    """What a job's life is told to as it runs (the session log, hooks): its start, with the
    job's state as it starts, and its end, with the job result. ``session_log``: where it
    writes, kept in job.json so that whoever finds the job's driver gone can write its end."""

    @property
    def session_log(self) -> Path | None: ...

    def started(self, state: JobState) -> None: ...

    def ended(self, result: JobResult) -> None: ...


def not_started(
    req: RunRequest, why: str, status: RunStatus = "aborted", run_id: str | None = None
) -> RunNotStarted:
    """The place of a run the job never started: stopped first (``aborted``), or refused at
    its start (``failed``; ``run_id`` when its directory was made)."""
    return {
        "runId": run_id,
        "agent": req.agent,
        "backend": req.backend,
        "task": req.task,
        "status": status,
        "errorMessage": why,
        "finalText": "",
        "usage": ev.empty_usage(),
        "toolCalls": 0,
    }


class Job:
    """One job's execution. Thread-safe ``cancel()``; ``run()`` blocks until the end."""

    # Whether a run's id is recorded (_record_run_id) before its child starts, not beside.
    runs_recorded_first = False

    def __init__(
        self,
        store: JobStore,
        job_id: str,
        job_plan: JobPlan,
        env: Mapping[str, str] | None = None,
        state: JobState | None = None,
    ) -> None:
        """``state``: the job's record as this process just made it (``JobStore.make``), not
        read again; one made running by this process stands for the driver's first update."""
        self.store = store
        self.job_id = job_id
        self.plan = job_plan
        self.env = dict(os.environ if env is None else env)
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        # Cleared while the job's start entry is written: no run's child starts before it
        # (a driver killed before then leaves no start entry and no child), while the first
        # run is prepared meanwhile.
        self._start_logged = threading.Event()
        self._start_logged.set()
        # Every thread the job starts but its runs' pool: joined at its end.
        self._tasks = Tasks("subagents-job")
        self._stop_signal: int = signal.SIGTERM
        self._sink_failed = False  # the caller's progress sink raised: it is shown no more
        self._handles: dict[int, RunHandle] = {}
        self._run_ids: list[str | None] = [None] * len(job_plan.requests)
        # Runs not yet started (or passed over): what warm supervisors are kept for.
        self._to_start = len(job_plan.requests)
        # The job's start when whoever started it recorded one (a background launch, a
        # caller that announced it): the job's one clock, kept in its result.
        self._started: float | None = None
        # What the job's runs may use together (a job spec's max_turns …).
        self.budget = JobBudget(job_plan.budget, len(job_plan.requests))
        self.refused: LimitRecord | None = None  # the budget, when it kept a run from starting
        self._made_running = state if _running_here(state) else None
        # A restarted driver finds the runs its predecessor started, and follows them.
        with contextlib.suppress(OSError, ValueError, KeyError):
            state = state if state is not None else store.load(job_id)
            for i, run_id in enumerate(state.get("runIds") or []):
                if i < len(self._run_ids) and isinstance(run_id, str):
                    self._run_ids[i] = run_id
            self._started = epoch(state.get("startedAt"))

    # ---- control ---------------------------------------------------------

    def cancel(self, sig: int | None = None) -> None:
        """Stop the job: no new runs start; running ones are aborted. ``sig``: the signal
        that asked for it, passed on to the runs' supervisors so their results name it."""
        if sig is not None:
            self._stop_signal = sig
        self._cancelled.set()
        with self._lock:
            handles = list(self._handles.values())
        stoppers = [self._tasks.submit(h.stop, sig=self._stop_signal) for h in handles]
        for t in stoppers:
            t.join(timeout=30)

    def cancel_soon(self, sig: int | None = None) -> None:
        """``cancel()`` without waiting for it: safe in a signal handler."""
        if sig is not None:
            self._stop_signal = sig
        self._cancelled.set()
        self._tasks.submit(self.cancel)

    def stop_on_signals(self, signals: tuple[int, ...]) -> Callable[[], None]:
        """Make ``signals`` cancel this job instead of raising wherever the main thread is,
        so the job always goes on to record its end. Returns a function restoring the
        previous handlers. Main thread only."""
        previous = {sig: signal.getsignal(sig) for sig in signals}
        for sig in signals:
            signal.signal(sig, lambda signum, _frame: self.cancel_soon(signum))

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    @property
    def cancelled(self) -> bool:
        # Another process (`subagents stop`) asks through the job directory.
        if not self._cancelled.is_set() and self.store.cancel_requested(self.job_id):
            self._cancelled.set()
        return self._cancelled.is_set()

    # ---- running ---------------------------------------------------------

    def _warm(self) -> None:
        """One run fewer to start: keep as many supervisors warm as the runs that may start
        next (a slot each), none once no run is left to start (runs.keep_warm)."""
        with self._lock:
            self._to_start -= 1
        self._keep_warm()

    def _keep_warm(self) -> None:
        with self._lock:
            left = 0 if self._cancelled.is_set() else self._to_start
        width = self.plan.concurrency if self.plan.mode in ("parallel", "council", "map") else 1
        keep_warm(self, min(width, left), self.plan.placement)

    def _run_one(self, index: int, req: RunRequest, on_event: EventSink | None) -> JobRun:
        try:
            handle = self._start_one(index, req)
            if not isinstance(handle, RunHandle):
                return handle
            with self._lock:
                self._handles[index] = handle
        finally:
            # After the launch, so warming the next runs' supervisors never delays this one.
            self._warm()
        result = self._follow(index, handle, on_event)
        if req.gate is not None and result.get("status") == "completed":
            from subagents.jobs.gates import Gate, verified

            gate = Gate.from_record(req.gate)
            if gate is not None:
                return verified(_Repairs(self, index, on_event), req, gate, result)
        return result

    def _start_one(self, index: int, req: RunRequest) -> RunHandle | RunNotStarted:
        """Start (or find again) run ``index``: its handle, or its result if it never started."""
        if self.cancelled:
            return not_started(req, "not started: the job was stopped")
        started = self._started_run(index)
        if started is not None:
            return resume(paths.runs_dir(self.store.home) / started)
        return self._launch(index, req)

    def _launch(self, index: int, req: RunRequest) -> RunHandle | RunNotStarted:
        """Start a new run as run ``index`` of the job (under what its budget has left)."""
        spent = self.budget.spent() if self.budget else None
        if spent is not None:
            self.refused = self.refused or spent
            return {**not_started(req, refused(spent)), "status": "failed", "limit": spent}
        req = replace(self.budget.for_run(req) if self.budget else req, job_id=self.job_id)
        placement = self.plan.placement
        try:
            spec, run_dir = prepare(
                req,
                self.plan.settings,
                self.env,
                self.store.home,
                placement=placement,
                durable="whole",  # its directory fsynced below
            )
        except UsageError as exc:
            return not_started(req, str(exc), "failed")
        except OSError as exc:  # a full disk: the run never started, and says why
            return not_started(req, f"the run could not start: {_why(exc)}", "failed")
        # The run's meta.json, which names the job, is on disk (its rename made durable)
        # before its child starts: a driver killed from here on leaves a run that whoever
        # finds the driver dead finds by it (runs_naming) and finishes, its worktree too;
        # `stop` finds it so as well. The job's list of its runs is written while the child
        # starts, not before (a write of job.json off a delegation's path), where the start
        # is a hand-over (the process launcher). A map records its rows first
        # (runs_recorded_first): its resume follows its row log alone; so does a launch that
        # may wait (tmux, Ray: for a unit): the job's views list the run meanwhile.
        if self.runs_recorded_first or placement.launcher != "process":
            syncing = beside(partial(fsync_dir, run_dir))
            try:
                self._record_run_id(index, spec.runId)
            finally:
                syncing()
        else:
            fsync_dir(run_dir)
        self._start_logged.wait()
        try:
            handle = start_prepared(spec, run_dir, placement, stopped=lambda: self.cancelled)
        except UsageError as exc:
            status: RunStatus = "aborted" if self.cancelled else "failed"
            return not_started(req, str(exc), status, spec.runId)
        self._record_run_id(index, spec.runId)
        return handle

    def _started_run(self, index: int) -> str | None:
        """The run a predecessor driver started for ``index``, to be followed again."""
        return self._run_ids[index]

    def _record_run_id(self, index: int, run_id: str) -> None:
        with self._lock:
            if self._run_ids[index] == run_id:
                return
            self._run_ids[index] = run_id
            # Under the lock: runs starting side by side write their lists in the order
            # they made them, so an older list never lands last.
            # A power loss may lose the list (never the file): a job whose driver died
            # finds its runs by their durable meta.json (runs_naming).
            with contextlib.suppress(OSError):  # job.json lags on a full disk
                self.store.update(self.job_id, runIds=list(self._run_ids), durable="whole")

    def _follow(self, index: int, handle: RunHandle, on_event: EventSink | None) -> RunResult:
        if self.cancelled:  # stopped while this run was starting
            handle.stop(sig=self._stop_signal)
        sink = self._shown(index, on_event) if on_event is not None else None
        if self.budget:
            sink = self._counting(index, sink)
        result = handle.wait(on_event=sink)
        if result is None:  # cannot happen without a timeout, but never hang on it
            result = handle.stop()
        with self._lock:
            self._handles.pop(index, None)
        return result

    def _shown(self, index: int, on_event: EventSink) -> Callable[[Event], None]:
        """The caller's progress sink for run ``index``. One that fails (its stderr gone with
        a closed terminal or a dead parent) is not called again: what it shows may be lost,
        the job's own record may not."""

        def show(event: Event) -> None:
            if self._sink_failed:
                return
            try:
                on_event(index, event)
            except Exception:
                self._sink_failed = True

        return show

    def _counting(
        self, index: int, sink: Callable[[Event], None] | None
    ) -> Callable[[Event], None]:
        """``sink``, with each event counted against the job's budget first."""

        def count(event: Event) -> None:
            reached = self.budget.observe(self._budget_key(index), event)
            if reached is not None:
                self._limit_reached(*reached)
            if sink is not None:
                sink(event)

        return count

    def _budget_key(self, index: int) -> int:
        """Where run ``index``'s usage is counted in the job's budget."""
        return index

    def _limit_reached(self, kind: LimitKind, limit: float, used: float) -> None:
        """The runs' sum reached the job's limit: every running run wraps up (or stops) as
        at its own limit; one that cannot be told (on a Ray node) is stopped."""
        with self._lock:
            handles = list(self._handles.values())
        for handle in handles:
            if handle.result() is None and not tell_limit(handle.run_dir, kind, limit, used):
                self._tasks.submit(handle.stop)

    def _council(self, on_event: EventSink | None) -> list[JobRun]:
        """The members side by side; then the judge, given every answer, when enough of
        them answered."""
        judged = bool(self.plan.extra.get("judge"))
        n = len(self.plan.requests) - judged
        runs = self._parallel(on_event, self.plan.requests[:n])
        answered = sum(r.get("status") == "completed" for r in runs)
        if judged and not self.cancelled and answered >= self._quorum():
            from subagents.jobs.council import judge_task

            req = self.plan.requests[n]
            task = judge_task(self.plan.requests[0].task, runs)
            runs.append(self._run_one(n, replace(req, task=task), on_event))
        return runs

    def _quorum(self) -> int:
        quorum = self.plan.extra.get("quorum")
        return quorum if isinstance(quorum, int) and quorum > 0 else 1

    def _parallel(
        self, on_event: EventSink | None, reqs: list[RunRequest] | None = None
    ) -> list[JobRun]:
        reqs = self.plan.requests if reqs is None else reqs
        if len(reqs) == 1:  # a single run: this thread is the job's own already
            return [self._run_one(0, reqs[0], on_event)]
        # Here, not at the top: concurrent.futures (and the logging it imports) is ~4 ms of
        # a run's start, and only several runs at once need it.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(
            max_workers=self.plan.concurrency, thread_name_prefix="subagents-run"
        ) as pool:
            futures: list[Future[JobRun]] = [
                pool.submit(self._run_one, i, r, on_event) for i, r in enumerate(reqs)
            ]
            return [f.result() for f in futures]

    def _chain(self, on_event: EventSink | None) -> list[JobRun]:
        results: list[JobRun] = []
        previous = ""
        for i, req in enumerate(self.plan.requests):
            if self.cancelled:
                break
            step = replace(req, task=req.task.replace(PREVIOUS, previous))
            result = self._run_one(i, step, on_event)
            results.append(result)
            if result.get("status") != "completed":
                break  # the chain stops at the first step that does not complete
            previous = result.get("finalText") or ""
            value = result.get("structured") if "paths" in result else None
            if value is not None:  # the value as JSON text, not the prose
                previous = json.dumps(value, ensure_ascii=False)
        return results

    def run(
        self, on_event: EventSink | None = None, lifecycle: LifecycleSink | None = None
    ) -> JobResult:
        # The first runs' supervisors start up while the job records its start.
        self._keep_warm()
        try:
            return self._run(on_event, lifecycle)
        finally:
            # Spares never handed a run (a chain that stopped early, a stopped job) exit.
            keep_warm(self, 0, self.plan.placement)
            self._tasks.join()

    def _run(self, on_event: EventSink | None, lifecycle: LifecycleSink | None) -> JobResult:
        started = self._started or time.time()
        session_log = lifecycle.session_log if lifecycle is not None else None
        log = str(session_log) if session_log else None
        made = self._made_running
        try:
            if made is not None and made.get("sessionLog") == log:
                state = made  # made so by this process: already what the update would write
            else:
                state = self.store.update(
                    self.job_id,
                    status="running",
                    startedAt=iso(started),
                    driverPid=os.getpid(),
                    sessionLog=log,
                )
        except OSError as exc:  # a full disk: the job cannot start, and says why
            why = f"the job could not start: {_why(exc)}"
            result = job_result(self.job_id, self.plan.mode, "failed", [], started, error=why)
            with contextlib.suppress(OSError):
                self.store.finish(self.job_id, result)
            return result
        done = threading.Event()
        runs: list[JobRun] = []
        failure: list[BaseException] = []

        def work() -> None:
            try:
                runs.extend(self._work(on_event))
            except BaseException as exc:  # surfaced below, in the caller's thread
                failure.append(exc)
            finally:
                done.set()

        if lifecycle is not None:
            self._start_logged.clear()
        else:
            self.store.synced(self.job_id)  # the job on disk before any child starts
        self._tasks.submit(work)
        try:
            # The start entry (an fsync, the hooks) while the first run is prepared, after
            # the job's record is on disk (made just before, its directory fsynced
            # meanwhile); its end entry is written by this thread too, so after it.
            if lifecycle is not None:
                try:
                    self.store.synced(self.job_id)
                    with contextlib.suppress(Exception):
                        lifecycle.started(state)
                finally:
                    self._start_logged.set()
            # Waiting in slices keeps the caller's thread free to take Ctrl-C.
            while not done.wait(0.5):
                pass
        except KeyboardInterrupt:
            self.cancel(signal.SIGINT)
            done.wait(60)
        if failure:
            raise failure[0]
        result = self._result(runs, started)
        # The lifecycle entry first, the job result last: whoever sees the job over
        # (`wait`, `stop`) finds its record already written (the store writes the two side
        # by side and puts the result in place after the entry). An entry that cannot be
        # written now (a full disk) is marked pending; whoever looks at the job writes it.
        log_end = None if lifecycle is None else partial(lifecycle.ended, result)
        try:
            self.store.finish(self.job_id, result, log_end=log_end)
        except OSError as exc:
            result["errorMessage"] = f"the job result could not be recorded: {_why(exc)}"
        return result

    def _work(self, on_event: EventSink | None) -> list[JobRun]:
        """Run the job's runs as its mode says; their results in order."""
        mode = self.plan.mode
        if mode == "chain":
            return self._chain(on_event)
        if mode == "council":
            return self._council(on_event)
        return self._parallel(on_event)

    def _result(self, runs: list[JobRun], started: float) -> JobResult:
        if self.plan.mode == "council":
            return self._council_result(runs, started)
        status = job_status(len(self.plan.requests), runs, self.cancelled)
        result = job_result(self.job_id, self.plan.mode, status, runs, started)
        return self._with_limit(result)

    def _with_limit(self, result: JobResult) -> JobResult:
        """``result`` with the job's budget, when its runs' sum reached it or it kept a run
        from starting (a map resumed with it spent): the limit, what they used by the end,
        and (a job that did not complete) why, as errorMessage."""
        reached = self.budget.reached or (
            None if self.refused is None else (self.refused["kind"], self.refused["limit"], 0)
        )
        if reached is None:
            return result
        kind, limit, _ = reached
        used = round(self.budget.total(kind), 10)
        stopped = any(
            isinstance(record := r.get("limit"), dict) and record.get("action") == "abort"
            for r in result["runs"]
        )
        result["limit"] = {
            "kind": kind,
            "limit": limit,
            "used": used,
            "action": "abort" if stopped else "refuse" if self.refused else "wrap-up",
            "scope": "job",
        }
        if result["status"] != "completed" and "errorMessage" not in result:
            from subagents.jobs.budget import describe

            result["errorMessage"] = (
                f"the job's {kind} limit of {describe(kind, limit)} was reached:"
                f" {describe(kind, used)} used by its runs"
            )
        return result

    def _council_result(self, runs: list[JobRun], started: float) -> JobResult:
        from subagents.jobs import council

        judged = bool(self.plan.extra.get("judge"))
        n = len(self.plan.requests) - judged
        members, judge = runs[:n], (runs[n] if judged and len(runs) > n else None)
        schema = self.plan.requests[0].output_schema is not None
        record = council.record(members, self._quorum(), schema, judge)
        if judged and judge is None and record["answered"] >= self._quorum():
            record["judgeError"] = "the judge did not start"  # the job was stopped first
        status = council.status(record["answered"], self._quorum(), self.cancelled)
        # Also for a council that completed without its verdict: the note says it is missing.
        error = council.why(record, judged, self.cancelled)
        result = job_result(self.job_id, "council", status, runs, started, error=error)
        result["council"] = record
        verdict = record.get("verdict")
        if isinstance(verdict, dict):  # the judge's merged answer is the job's
            merged = verdict.get("merged")
            result["finalText"] = merged if isinstance(merged, str) else None
        return result


class _Repairs:
    """A gate's view of run ``index`` of ``job`` (jobs/gates.py ``Repairs``)."""

    def __init__(self, job: Job, index: int, on_event: EventSink | None) -> None:
        self.job, self.index, self.on_event = job, index, on_event
        self.env = job.env

    @property
    def cancelled(self) -> bool:
        return self.job.cancelled

    def launch(self, req: RunRequest) -> RunHandle | RunNotStarted:
        return self.job._launch(self.index, req)

    def follow(self, handle: RunHandle) -> JobRun:
        return self.job._follow(self.index, handle, self.on_event)

    def review(self, req: RunRequest) -> JobRun:
        job = self.job
        req = replace(req, job_id=job.job_id)
        try:
            spec, run_dir = prepare(
                req, job.plan.settings, job.env, job.store.home, placement=job.plan.placement
            )
            handle = start_prepared(
                spec, run_dir, job.plan.placement, stopped=lambda: job.cancelled
            )
            with job._lock:  # stopped with the job, as the run it reviews would be
                job._handles[self.index] = handle
            if job.cancelled:
                handle.stop()
            result = handle.wait()
            with job._lock:
                job._handles.pop(self.index, None)
        except UsageError as exc:
            return not_started(req, str(exc), "failed")
        return result if result is not None else not_started(req, "the reviewer did not end")


def _why(exc: OSError) -> str:
    from subagents.core.files import describe_os_error

    return describe_os_error(exc)


def _running_here(state: JobState | None) -> bool:
    """Whether ``state`` says its job runs with this process as its driver."""
    if state is None or state.get("status") != "running" or "driver" not in state:
        return False
    with contextlib.suppress(Exception):
        return state["driver"] == procs.identity(os.getpid())
    return False


def exit_code(job_result: JobResult | JobState) -> int:
    """The CLI's exit code for a job result (or a finished job's state): by its status."""
    return EXIT_CODES.get(job_result["status"], 1)
