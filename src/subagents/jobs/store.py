"""The job store: ``$SUBAGENTS_HOME/jobs/<job-id>/job.json`` per job, plus a SQLite index
that makes ``ps`` fast. The files are the truth: the index is rebuilt from them when
missing, and re-read for any job it does not hold as finished.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack

from subagents.core import ids, indexdb, paths, procs
from subagents.core.files import (
    locked,
    make_private_dir,
    read_json,
    reserve_space,
    write_json_atomic,
)
from subagents.core.records import JOB_VERSION, RUN_STATUSES, is_job_state
from subagents.core.upgrade import read_meta, upgrade_job
from subagents.errors import DamagedRecord, JobIdError
from subagents.jobs.outcome import final_text, job_result, job_status
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
_UNFINISHED = f"status not in ({', '.join(repr(s) for s in sorted(TERMINAL))})"
# The jobs directory's mtime is trusted to say "no job was made or removed since the index
# last looked" only once it is this old: a change within the same clock tick as that look
# could leave it unchanged (git's "racy" rule).
_RACY_S = 2.0
_MANY = 64  # job files read at once (a rebuild) past which orjson's parse pays its import
_DAMAGED = "damaged"  # the index's status for a job whose file is damaged (see _reindex_one)
_SCHEMA = f"""
create table if not exists jobs (
    job_id text primary key,
    mode text,
    agents text,
    status text,
    created real,
    started_at text,
    completed_at text,
    duration_ms integer,
    run_ids text,
    session text,
    task text,
    tokens integer,
    cost real
);
create index if not exists jobs_by_session on jobs (session, job_id);
create index if not exists jobs_unfinished on jobs (job_id) where {_UNFINISHED};
create table if not exists store_state (key text primary key, value)
"""
TASK_MAX = 200  # characters of the first task the index keeps (for ``ps``)


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
        # What the last list() passed over: a line for each damaged job.json; and how many
        # jobs there are in all (of the session asked for).
        self.damaged: builtins.list[str] = []
        self.total = 0

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
        job_id = ids.new_id()
        try:
            make_private_dir(self.dir / job_id)
            reserve_space(self.dir / job_id)
            if before is not None:
                before(self.dir / job_id)
            self._write(job_id, self._new_state(job_id, plan, agents, background))
        except OSError:
            shutil.rmtree(self.dir / job_id, ignore_errors=True)  # nothing half-made
            raise
        return job_id

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
        path = self.path(job_id)
        try:
            data = read_json(path, fast=many)
        except ValueError as exc:  # truncated, or not JSON (UnicodeDecodeError too)
            raise damaged(path, job_id, f"not JSON: {exc}") from None
        if isinstance(data, dict):
            upgrade_job(data)
        if not is_job_state(data):
            raise damaged(path, job_id, _not_a_job(data))
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
            self._write(job_id, updated, durable=durable)
            return updated

    def finish(
        self, job_id: str, result: JobResult, *, end_entry_pending: bool = False
    ) -> JobState:
        """Record the job result (``end_entry_pending``: its lifecycle end entry could not
        be written; whoever looks at the job writes it); the first one recorded wins."""
        with self._lock:
            state = self.load(job_id)
            if state.get("status") in TERMINAL and "runs" in state:
                return state
            finished: JobState = {**state, **result}
            if end_entry_pending:
                finished["endEntry"] = "pending"
            self._write(job_id, finished, last=True)
            return finished

    def _write(
        self, job_id: str, state: JobState, *, last: bool = False, durable: Durability = "this"
    ) -> None:
        write_json_atomic(self.path(job_id), on_disk(state), last=last, durable=durable)
        # The index is a cache: one that cannot be written (a full disk) is caught up later.
        with contextlib.suppress(sqlite3.Error, OSError):
            self._index_upsert(state)

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

    def index(self) -> sqlite3.Connection:
        return self._db()  # (the index, open: the caller closes it)

    def _db(self) -> sqlite3.Connection:
        return indexdb.connect(self.home, _SCHEMA)

    def _index_upsert(self, state: JobState, db: sqlite3.Connection | None = None) -> None:
        row = _index_row(state)
        own = db is None
        conn = db or self._db()
        try:
            marks = ",".join("?" * len(row))
            conn.execute(f"insert or replace into jobs values ({marks})", row)
        finally:
            if own:
                conn.close()

    def list(self, limit: int = 20, session: str | None = None) -> list[JobRow]:
        """The newest jobs (of one lifecycle *session*, if given), from the index, brought up
        to the files first (see :meth:`_catch_up`). A damaged index is made again; one that
        cannot be read or written (a full disk, a directory in its place) is passed by: the
        job files are read instead. A damaged job file is passed over and said in
        ``damaged``."""
        self.damaged = []
        for attempt in range(2):
            try:
                return self._list_indexed(limit, session)
            except sqlite3.OperationalError:
                break
            except sqlite3.DatabaseError:
                if attempt == 0:
                    with contextlib.suppress(OSError):
                        indexdb.discard(self.home)  # malformed: made again from the files
            except (sqlite3.Error, OSError):
                break
        return self._list_from_files(limit, session)

    def _list_from_files(self, limit: int, session: str | None) -> builtins.list[JobRow]:
        try:
            names = sorted(
                (e.name for e in os.scandir(self.dir) if e.is_dir() and e.name[:1] != "."),
                reverse=True,
            )
        except FileNotFoundError:
            names = []
        self.total = len(names)
        out: builtins.list[JobRow] = []
        for job_id in names:
            if len(out) >= limit:
                break
            try:
                state = self.load(job_id)
            except DamagedRecord as exc:
                self.damaged.append(str(exc))
                continue
            except (OSError, ValueError):
                continue
            if session is not None and state.get("session") != session:
                continue
            out.append(_job_row((job_id, *_index_row(state)[1:])))
        return out

    def _list_indexed(self, limit: int, session: str | None) -> builtins.list[JobRow]:
        db = self._db()
        try:
            with indexdb.transaction(db):
                self._catch_up(db)
            where = f"where status is not '{_DAMAGED}'"
            args: tuple[str, ...] = ()
            if session is not None:
                where, args = "where session = ?", (session,)
            self.total = db.execute(f"select count(*) from jobs {where}", args).fetchone()[0]
            rows = db.execute(
                f"select * from jobs {where} order by job_id desc limit ?", (*args, limit)
            ).fetchall()
        finally:
            db.close()
        return [_job_row(row) for row in rows]

    def reindex(self) -> int:
        """Make the index again from the job files (``doctor --reindex``): how many it holds."""
        db = self._db()
        try:
            with indexdb.transaction(db):
                db.execute("delete from jobs")
                db.execute("delete from store_state")
                self._catch_up(db)
            return int(db.execute("select count(*) from jobs").fetchone()[0])
        finally:
            db.close()

    def _catch_up(self, db: sqlite3.Connection) -> None:
        """Bring the index up to the files, in a transaction of the caller's. Jobs it holds as
        unfinished are read again (they change); the job directories are listed only when
        one may have been made or removed since the last look (the directory's mtime moved,
        or was too recent then to be trusted): a look at a settled store of 100,000 jobs
        reads no job file, lists no directory and writes nothing (watchers see no change)."""
        try:
            seen = os.stat(self.dir).st_mtime_ns
        except FileNotFoundError:
            db.execute("delete from jobs where 1")  # (not a truncation: none, no write)
            return
        looked = db.execute("select value from store_state where key = 'dirMtime'").fetchone()
        read: set[str] = set()
        if looked is None or looked[0] != seen:
            read = self._look_at_every_job(db)
            trusted = "" not in read and time.time_ns() - seen > _RACY_S * 1e9
            mark = ("dirMtime", seen if trusted else None)
            db.execute("insert or replace into store_state values (?, ?)", mark)
        for row in db.execute(f"select * from jobs where {_UNFINISHED}").fetchall():
            if row[0] not in read:
                self._reindex_one(db, row[0], was=row)

    def _look_at_every_job(self, db: sqlite3.Connection) -> set[str]:
        """Index the job directories the index lacks, forget those gone; the ids it read,
        with "" among them when one could not be read yet (a job being made): the next look
        lists them again."""
        known = {r[0] for r in db.execute("select job_id from jobs")}
        try:
            on_disk = {e.name for e in os.scandir(self.dir) if e.is_dir() and e.name[:1] != "."}
        except FileNotFoundError:
            on_disk = set()
        db.executemany("delete from jobs where job_id = ?", [(j,) for j in known - on_disk])
        read = on_disk - known
        for job_id in read.copy():
            if not self._reindex_one(db, job_id, many=len(read) >= _MANY):
                read.add("")
        return read

    def _reindex_one(
        self, db: sqlite3.Connection, job_id: str, *, many: bool = False, was: Any = None
    ) -> bool:
        """The job's row made again from its file (gone when the job is; not written when it
        is as it ``was``: a watcher sees no change); False when its file cannot be read now."""
        try:
            state = self.load(job_id, many=many)
            if was is None or tuple(was) != _index_row(state):
                self._index_upsert(state, db)
        except DamagedRecord as exc:
            # Kept as damaged (not listed, but read again and said at every look, until
            # mended or removed).
            self.damaged.append(str(exc))
            db.execute(
                "insert or replace into jobs (job_id, status) values (?, ?)", (job_id, _DAMAGED)
            )
        except FileNotFoundError:
            if not (self.dir / job_id).is_dir():
                db.execute("delete from jobs where job_id = ?", (job_id,))
                return True
            return False
        except (OSError, ValueError):
            return False
        return True


def _task(state: JobState) -> str:
    """The job's first task in one line (at most ``TASK_MAX`` characters), and how many more."""
    plan = state.get("plan")
    requests = (plan.get("requests") if isinstance(plan, dict) else None) or []
    if not requests:
        return ""
    # (a task may be 10 MiB: only its head is looked at)
    task = " ".join(str(requests[0].get("task") or "")[: TASK_MAX * 2].split())[:TASK_MAX]
    return task + (f" (+{len(requests) - 1} more)" if len(requests) > 1 else "")


def _index_row(state: JobState) -> tuple[Any, ...]:
    """A job's row in the index (its columns, in order: see _SCHEMA)."""
    usage = state.get("usage")
    return (
        state["jobId"],
        state.get("mode"),
        json.dumps(state.get("agents") or [], allow_nan=False),
        state.get("status"),
        state.get("createdAt"),
        state.get("startedAt"),
        state.get("completedAt"),
        state.get("durationMs"),
        json.dumps(state.get("runIds") or [], allow_nan=False),
        state.get("session"),
        _task(state),
        usage.get("totalTokens") if usage else None,
        usage.get("cost") if usage else None,
    )


def _job_row(row: tuple[Any, ...]) -> JobRow:
    """A row of the index as ``ps`` lists the job."""
    (job_id, mode, agents, status, created, started, completed, took, run_ids, session) = row[:10]
    task, tokens, cost = row[10:]
    return {
        "jobId": job_id,
        "mode": mode,
        "agents": json.loads(agents or "[]"),
        "status": status,
        "createdAt": created,
        "startedAt": started,
        "completedAt": completed,
        "durationMs": took,
        "runIds": json.loads(run_ids or "[]"),
        "session": session,
        "task": task or "",
        "totalTokens": tokens,
        "cost": cost,
    }
