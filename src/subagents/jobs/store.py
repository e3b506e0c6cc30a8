"""The job store: ``$SUBAGENTS_HOME/jobs/<job-id>/job.json`` per job, the truth, and its
index (``jobs.jobindex``), written beside each job file and rebuilt from them.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Unpack

from subagents.core import ids, paths, procs
from subagents.core.files import (
    fsync_dir,
    locked,
    make_private_dir,
    put_staged,
    read_json,
    reserve_space,
    stage_json,
    write_json_atomic,
)
from subagents.core.records import JOB_VERSION, RUN_STATUSES, is_job_state
from subagents.core.upgrade import read_meta, upgrade_job
from subagents.errors import DamagedRecord, JobIdError
from subagents.jobs.jobindex import JobIndex
from subagents.jobs.outcome import final_text, job_result, job_status
from subagents.jobs.tasks import beside
from subagents.lifecycle import sessionlog

if TYPE_CHECKING:
    from subagents.core.files import Durability
    from subagents.types import (
        AgentEvent,
        JobPlanRecord,
        JobResult,
        JobRow,
        JobRun,
        JobState,
        JobUpdate,
        RunStatus,
    )

JOB_FILE = "job.json"
# A job's directory while it is made (JobStore.make), before it takes the job's id as name.
MAKING_PREFIX = ".making-"
# Made (under a lock on the job directory) just before the job's lifecycle end entry is
# appended: whoever records the end — the driver, or whoever finds it dead — writes it once.
END_MARK = "end-logged"
# The end entry could not be written (a full disk): job.json keeps it as ``pendingEndEntry``
# and whoever looks at the job next writes it.
END_PENDING = "end-pending"
# What a job result adds to job.json (dropped when a map is resumed).
RESULT_KEYS = frozenset(
    {"completedAt", "durationMs", "usage", "runs", "finalText", "errorMessage", "map", "endEntry"}
)
# A job ends with one of a run's statuses, each of them final.
TERMINAL = frozenset(RUN_STATUSES)


def unknown_id(prefix: str) -> JobIdError:
    """The one wording for an id that names nothing (a job id or a run id, malformed or not),
    wherever an id is looked up: the CLI, the MCP tools and resources."""
    return JobIdError(f"no job or run with id {prefix!r}")


def damaged(path: Path, job_id: str, why: str) -> DamagedRecord:
    """The one wording for a job.json that is not a job's (every reader says it)."""
    return DamagedRecord(
        f"{path} is damaged ({why}); remove the job with: subagents rm {job_id}", str(path)
    )


def _not_a_job(data: object) -> str:
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if not isinstance(data.get("jobId"), str):
        return "no job id"
    return f"its status is {json.dumps(data.get('status'), default=str)[:60]}"


def matching(directory: Path, prefix: str) -> list[str]:
    try:
        return [e.name for e in os.scandir(directory) if e.name.startswith(prefix) and e.is_dir()]
    except FileNotFoundError:
        return []


def _derived_final_text(state: JobState) -> str | None:
    runs = state.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        return None
    return final_text(state["mode"], state["status"], runs)


def on_disk(state: JobState) -> Mapping[str, object]:
    """What ``job.json`` holds of ``state``: a finished job's ``finalText`` is its single
    run's or its chain's last step's (:func:`final_text`), so the file does not hold a big
    answer a second time; :meth:`JobStore.load` puts it back. Any other ``finalText`` (or
    one that does not follow from the runs) is kept as it is."""
    if "finalText" not in state or "runs" not in state:
        return state
    text = state["finalText"]
    # null (a parallel job, a chain that stopped) costs nothing: written as before.
    if text is None or text != _derived_final_text(state):
        return state
    return {k: v for k, v in state.items() if k != "finalText"}


def with_final_text(state: JobState) -> JobState:
    """``state`` as read from ``job.json``, with the ``finalText`` :func:`on_disk` left out
    back in its place (right after ``runs``: only the pending end entry's mark follows)."""
    if "finalText" in state or "runs" not in state:
        return state
    pending = state.pop("endEntry", None)
    state["finalText"] = _derived_final_text(state)
    if pending is not None:
        state["endEntry"] = pending
    return state


class JobStore:
    def __init__(self, home: Path | None = None) -> None:
        self.home = home or paths.state_home()
        self.dir = paths.jobs_dir(self.home)
        self._lock = threading.Lock()
        # Jobs made here whose directory is being fsynced (make's ``driving``): their waits.
        self._syncing: dict[str, Callable[[], BaseException | None]] = {}
        # Index rows held back (hold_rows) until put_held_rows: a row is the index's cache
        # of job.json, which every look reads for a job the index does not hold finished.
        self._held_rows: list[JobState] | None = None
        # (load looked up at each call: a test counts the reads by patching it)
        self._index = JobIndex(
            self.home, self.dir, lambda job_id, many: self.load(job_id, many=many)
        )

    # ---- files -----------------------------------------------------------

    def path(self, job_id: str) -> Path:
        return self.dir / job_id / JOB_FILE

    def create(
        self,
        plan: JobPlanRecord,
        *,
        agents: list[str],
        background: bool,
        before: Callable[[Path], None] | None = None,
    ) -> str:
        """Record a new job (``plan``: the checked job, JobPlan.to_record()); its id.
        ``before``: writes what the job needs beside its ``job.json`` (a map's rows), in
        its directory, before the job exists."""
        return self.make(plan, agents=agents, background=background, before=before)["jobId"]

    def make(
        self,
        plan: JobPlanRecord,
        *,
        agents: list[str],
        background: bool,
        before: Callable[[Path], None] | None = None,
        driving: str | None = None,
    ) -> JobState:
        """:meth:`create`, returning the state written. ``driving``: this process drives the
        job at once, recording its lifecycle in that session log: its first record says it
        runs (now, this process its driver), as the driver's first update would (``Job``
        takes it as that update: one write before its runs, not two)."""
        job_id = ids.new_id()
        state = self._new_state(job_id, plan, agents, background)
        if driving is not None:
            from subagents.core.clock import iso

            state["status"] = "running"
            state["startedAt"] = iso(time.time())
            state["sessionLog"] = driving
            with contextlib.suppress(Exception):  # as update records a driver
                state["driver"] = procs.identity(os.getpid())
        # Made under a name no look lists (MAKING_PREFIX), then renamed: a process killed
        # while making it leaves no job without its job.json (a look would wait for ever
        # for a job that can never end).
        making, made = self.dir / f"{MAKING_PREFIX}{job_id}", self.dir / job_id
        try:
            make_private_dir(making)
            reserve_space(making)
            if before is not None:
                before(making)
            # Not in the index: a look reads every job it does not hold as finished from its
            # file (and notices a new job's directory), so a row written now is read over.
            # A job driven here has its directories fsynced beside its first run's making,
            # waited for before its start entry (see :meth:`synced`).
            write_json_atomic(making / JOB_FILE, on_disk(state), durable="whole")
            os.rename(making, made)
            syncing = partial(_fsync_dirs, made, self.dir)
            if driving is None:
                syncing()
            else:
                self._syncing[job_id] = beside(syncing)
        except OSError:
            import shutil  # (only here: its import is ~3 ms of every run)

            for directory in (making, made):  # nothing half-made
                shutil.rmtree(directory, ignore_errors=True)
            raise
        return state

    def synced(self, job_id: str) -> None:
        """Wait until the job's ``job.json`` is on disk as :meth:`make` made it (at once for
        a job not made by this store to be driven here)."""
        wait = self._syncing.pop(job_id, None)
        if wait is not None:
            wait()

    @staticmethod
    def _new_state(
        job_id: str, plan: JobPlanRecord, agents: list[str], background: bool
    ) -> JobState:
        return {
            "jobId": job_id,
            "version": JOB_VERSION,
            "mode": plan["mode"],
            "status": "pending",
            "createdAt": time.time(),
            "agents": agents,
            "background": background,
            "session": plan.get("session"),
            "runIds": [],
            "plan": plan,
        }

    def load(self, job_id: str, *, many: bool = False) -> JobState:
        """The job's state: ``job.json`` as written (of any version, read as today's:
        ``core.upgrade``), with a finished job's ``finalText`` (the file keeps it only in
        ``runs``: see :func:`on_disk`). DamagedRecord (a ValueError) when the file is not a
        job's; OSError when it cannot be read. ``many``: one of many (orjson: a fifth less CPU)."""
        # (a string: a rebuild reads 100,000 of them, and pathlib's joins cost a tenth of it)
        path = os.path.join(self.dir, job_id, JOB_FILE)
        try:
            data = read_json(path, fast=many)
        except ValueError as exc:  # truncated, or not JSON (UnicodeDecodeError too)
            raise damaged(Path(path), job_id, f"not JSON: {exc}") from None
        if isinstance(data, dict):
            upgrade_job(data)
        if not is_job_state(data):
            raise damaged(Path(path), job_id, _not_a_job(data))
        return with_final_text(data)

    def update(
        self,
        job_id: str,
        *,
        driverPid: int | None = None,
        durable: Durability = "this",
        **fields: Unpack[JobUpdate],
    ) -> JobState:
        """Change the job's state (``driverPid``: the job's driver, recorded as its
        identity); a finished job's status stays. ``durable``: what a power loss keeps of
        the change (``core.files.Durability``)."""
        with self._lock:
            state = self.load(job_id)
            if state["status"] in TERMINAL:
                fields.pop("status", None)  # a finished job stays finished
            updated: JobState = {**state, **fields}
            if driverPid is not None:
                with contextlib.suppress(Exception):
                    updated["driver"] = procs.identity(driverPid)
            # An unfinished job's row is read again from its file at every look at the index
            # (JobIndex._catch_up): only its creation and its end are written there, off the
            # path from a job's start to its child's.
            self._write(job_id, updated, durable=durable, index=updated["status"] in TERMINAL)
            return updated

    def finish(
        self,
        job_id: str,
        result: JobResult,
        *,
        end_entry_pending: bool = False,
        log_end: Callable[[], object] | None = None,
    ) -> JobState:
        """Record the job result (``end_entry_pending``: its lifecycle end entry could not
        be written; whoever looks at the job writes it); the first one recorded wins.
        ``log_end``: writes that entry (raising when it cannot: then it is pending), on a
        thread of its own while the result goes to disk (two fsyncs waited for at once, not
        one after the other), the result put in place only once it returned: whoever
        sees the job over finds its entry written."""
        with self._lock:
            state = self.load(job_id)
            if state.get("status") in TERMINAL and "runs" in state:
                if log_end is not None:
                    with contextlib.suppress(Exception):  # as before a result recorded
                        log_end()
                return state
            finished: JobState = {**state, **result}
            if end_entry_pending:
                finished["endEntry"] = "pending"
            if log_end is None:
                self._write(job_id, finished, last=True)
                return finished
            path = self.path(job_id)
            logging = beside(log_end)
            try:
                tmp = stage_json(path, on_disk(finished), last=True)
            finally:
                failed = logging()
            if failed is not None:  # (the entry unwritten: the result says it is owed)
                os.unlink(tmp)
                finished["endEntry"] = "pending"
                tmp = stage_json(path, on_disk(finished), last=True)
            self._write(job_id, finished, last=True, staged=tmp)
            return finished

    def _write(
        self,
        job_id: str,
        state: JobState,
        *,
        last: bool = False,
        durable: Durability = "this",
        index: bool = True,
        staged: Path | None = None,
    ) -> None:
        """``state`` as the job's ``job.json`` (``staged``: already written to that temp
        file, by ``core.files.stage_json``), and in the index: its row written while the
        directory is fsynced (a wait on the disk, not the CPU)."""
        path = self.path(job_id)
        if index and self._held_rows is not None:
            self._held_rows.append(state)
            index = False
        if staged is None:
            staged = stage_json(path, on_disk(state), last=last, durable=durable)
        put_staged(staged, path, last=last, durable="whole" if durable == "this" else durable)
        if durable != "this":
            if index:
                self._put_row(state)
            return
        indexing = beside(partial(self._put_row, state)) if index else None
        try:
            fsync_dir(path.parent)
        finally:
            failed = indexing() if indexing is not None else None
        if failed is not None:
            raise failed

    def hold_rows(self) -> None:
        """Write no index row until :meth:`put_held_rows`: a foreground command's job's end
        goes to the index once its caller was told how it ended (~2 ms off a delegation)."""
        self._held_rows = []

    def put_held_rows(self) -> None:
        rows, self._held_rows = self._held_rows or [], None
        for state in rows:
            self._put_row(state)

    def _put_row(self, state: JobState) -> None:
        # The index is a cache: one that cannot be written (a full disk) is caught up later.
        with contextlib.suppress(sqlite3.Error, OSError):
            self._index.put(state)

    # ---- the lifecycle end entry -------------------------------------------

    def log_end_once(self, job_id: str, session_log: str | Path, entry: AgentEvent) -> bool:
        """Append the job's lifecycle end entry unless it was: one per job, whoever writes
        it. False when it cannot be written now (it stays pending: see END_PENDING)."""
        return self.append_end_once(job_id, session_log, entry) != "pending"

    def append_end_once(
        self, job_id: str, session_log: str | Path, entry: AgentEvent
    ) -> Literal["written", "was", "pending"]:
        """:meth:`log_end_once`, saying whether this call wrote the entry (then its hooks are
        this caller's to run), found it written, or could not write it."""
        job_dir = self.dir / job_id
        with locked(job_dir):
            mark = job_dir / END_MARK
            written: Literal["written", "was"] = "was"
            if not mark.exists():
                try:
                    mark.touch(mode=0o600)
                    sessionlog.append(Path(session_log), entry)
                except OSError:
                    with contextlib.suppress(OSError):
                        mark.unlink()
                    with contextlib.suppress(OSError):
                        (job_dir / END_PENDING).touch(mode=0o600)
                    return "pending"
                written = "written"
            with contextlib.suppress(OSError):
                (job_dir / END_PENDING).unlink()
            return written

    def _log_late_end(self, state: JobState, entry: AgentEvent) -> None:
        """An end entry written after the job's driver (gone, or out of disk then): the
        hooks it triggers run now, as the driver would have run them."""
        if self.append_end_once(str(state["jobId"]), str(state["sessionLog"]), entry) != "written":
            return
        from subagents.lifecycle.hooks import configured_hooks, fire

        requests = state["plan"].get("requests") or []
        cwd = requests[0].get("cwd") if requests and isinstance(requests[0], dict) else None
        fire(self.home, entry, *configured_hooks(Path(cwd or ".")))

    def end_entry(self, state: JobState, pid: int | None = None) -> AgentEvent:
        driver = state.get("driver")
        if pid is None and driver is not None:
            pid = driver["pid"]
        return sessionlog.entry_for_job(state, pid=pid)

    def settle_end_entry(self, job_id: str, state: JobState | None = None) -> None:
        """Write a finished job's end entry that could not be written when it ended (its
        job.json says ``endEntry: pending``, or the END_PENDING mark is there)."""
        marked = (self.dir / job_id / END_PENDING).exists()
        if state is None:
            if not marked:
                return
            try:
                state = self.load(job_id)
            except (OSError, ValueError):
                return
        if not (marked or state.get("endEntry") == "pending"):
            return
        if state.get("status") not in TERMINAL or not state.get("sessionLog"):
            return
        with contextlib.suppress(OSError, ValueError):
            self._log_late_end(state, self.end_entry(state))

    def reopen(self, job_id: str) -> JobState:
        """A finished (or orphaned) map made ready to run again (``map --resume``): its
        result dropped, its stop request and end entry marks cleared; its rows stay."""
        with self._lock:
            state = self.load(job_id)
            # Its driver too: the new one records itself.
            kept = {k: v for k, v in state.items() if k not in RESULT_KEYS and k != "driver"}
            reopened: JobState = {**kept, "status": "pending"}  # type: ignore[typeddict-item]
            for mark in (paths.cancel_file(self.home, job_id), self.dir / job_id / END_MARK):
                with contextlib.suppress(FileNotFoundError):
                    mark.unlink()
            self._write(job_id, reopened)
            return reopened

    def run_ids(self, state: JobState | JobRow) -> list[str]:
        """The runs of ``state``'s job that may still be going: a map's rows in flight (its
        row log), any other job's runs."""
        if state.get("mode") == "map":
            from subagents.jobs.maplog import in_flight

            return in_flight(self.dir / state["jobId"])
        return [r for r in state.get("runIds") or [] if r]

    def request_cancel(self, job_id: str) -> None:
        paths.cancel_file(self.home, job_id).touch()

    def cancel_requested(self, job_id: str) -> bool:
        return paths.cancel_file(self.home, job_id).exists()

    # ---- ids -------------------------------------------------------------

    def resolve(self, prefix: str) -> str:
        """A full job id from any unambiguous prefix of a job id, or of one of its run ids
        (the CLI prints run ids too)."""
        prefix = prefix.strip().lower()
        if not ids.is_valid_id_prefix(prefix):
            raise unknown_id(prefix)
        names = matching(self.dir, prefix)
        if not names:
            job_ids = set()
            for run_id in matching(paths.runs_dir(self.home), prefix):
                with contextlib.suppress(OSError, ValueError):
                    meta = read_meta(paths.runs_dir(self.home) / run_id)
                    job_ids.add(meta.get("jobId") if isinstance(meta, dict) else None)
            names = sorted(j for j in job_ids if isinstance(j, str) and (self.dir / j).is_dir())
        if not names:
            raise unknown_id(prefix)
        if len(names) > 1:
            shown = ", ".join(sorted(names)[:5]) + (", …" if len(names) > 5 else "")
            raise JobIdError(f"ambiguous job id {prefix!r}: matches {len(names)} jobs ({shown})")
        return names[0]

    # ---- liveness --------------------------------------------------------

    def driver_alive(self, state: JobState) -> bool:
        driver = state.get("driver")
        return driver is not None and procs.is_alive(driver)

    def recover_if_orphaned(
        self,
        job_id: str,
        *,
        status: RunStatus = "failed",
        message: str = "the job driver died before the job ended",
    ) -> JobState:
        """A job whose driver died before recording its end: once its runs are over, record
        its end now (``status``, ``message``)."""
        state = self.load(job_id)
        if state.get("status") in TERMINAL or self.driver_alive(state):
            return state
        if (
            state.get("status") == "pending"
            and time.time() - float(state.get("createdAt") or 0) < 10
        ):
            return state  # its driver may still be starting
        from subagents.jobs.orphans import ended_at, log_start_once, runs_of_dead_driver

        if (found := runs_of_dead_driver(self.home, job_id, self.run_ids(state))) is None:
            return state
        runs: list[JobRun] = found
        mode = state["mode"]
        planned = len(state["plan"].get("requests") or []) or len(runs)
        # The runs decide, as they would have for the driver: a driver that died after its
        # only run completed leaves a completed job with that run's answer. (A map's rows
        # are in its row log, each run's result in its run dir: `map --resume` goes on.)
        outcome = job_status(planned, runs, status == "aborted") if mode != "map" else status
        if outcome == "completed":
            message = f"{message}; its runs had all completed"
        else:
            outcome = status
        if mode == "map":
            runs = []
            message = f"{message}; continue it with: subagents map --resume {job_id}"
        started = float(state.get("createdAt") or time.time())
        ended = job_result(
            job_id,
            mode,
            outcome,
            runs,
            started,
            started_at=state.get("startedAt"),
            error=message,
            completed=ended_at(runs, started),  # (never when someone happened to look)
        )
        finished = self.finish(job_id, ended)
        session = finished.get("session")
        # Killed before it recorded its start: entered in its session all the same (a start
        # and an end), so history and cost count it.
        unstarted = not finished.get("sessionLog") and isinstance(session, str) and session
        if unstarted:
            log = str(sessionlog.session_path(self.home, str(session)))
            finished = self.update(job_id, sessionLog=log)
        if finished.get("sessionLog"):
            # The dead driver wrote no end entry (or it is pending): one is written now.
            with contextlib.suppress(OSError, ValueError):
                if unstarted:
                    log_start_once(self.dir / job_id, finished, END_MARK)
                self._log_late_end(finished, self.end_entry(finished, os.getpid()))
        return finished

    # ---- index -----------------------------------------------------------

    @property
    def damaged(self) -> builtins.list[str]:
        """A line for each damaged job file the last :meth:`list` passed over."""
        return self._index.damaged

    @property
    def total(self) -> int:
        """How many jobs there were in all at the last :meth:`list` (of its session)."""
        return self._index.total

    def index(self) -> sqlite3.Connection:
        """The index, open (the caller closes it)."""
        return self._index.connect()

    def list(self, limit: int = 20, session: str | None = None) -> builtins.list[JobRow]:
        """The newest jobs (of one lifecycle *session*, if given), from the index
        (:class:`JobIndex`): those a damaged job file is passed over for are in
        :attr:`damaged`."""
        return self._index.newest(limit, session)

    def reindex(self) -> int:
        """Make the index again from the job files (``doctor --reindex``); how many jobs it
        holds."""
        return self._index.rebuild()


def _fsync_dirs(*directories: Path) -> None:
    for directory in directories:
        fsync_dir(directory)
