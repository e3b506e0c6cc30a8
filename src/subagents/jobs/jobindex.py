"""The job store's index: a row per job in ``index.sqlite`` (``core.indexdb``), what ``ps``,
``top`` and the web fleet list, newest first, without reading the job files. The files are
the truth: the index is rebuilt from them when missing or damaged, and re-read for any job it
does not hold as finished.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.core import indexdb
from subagents.core.records import RUN_STATUSES
from subagents.errors import DamagedRecord

if TYPE_CHECKING:
    from subagents.types import JobRow, JobState

# A job's file read as a job (``JobStore.load``): its id, and whether it is one of many.
Load = Callable[[str, bool], "JobState"]

_UNFINISHED = f"status not in ({', '.join(repr(s) for s in sorted(RUN_STATUSES))})"
# The jobs directory's mtime is trusted to say "no job was made or removed since the index
# last looked" only once it is this old: a change within the same clock tick as that look
# could leave it unchanged (git's "racy" rule).
_RACY_S = 2.0
_MANY = 64  # job files read at once (a rebuild) past which orjson's parse pays its import
_BATCH = 1000  # rows written to the index at once by a rebuild
_DAMAGED = "damaged"  # the index's status for a job whose file is damaged (see _read_one)
# The numbers (created ... cost) have no declared type: SQLite keeps what it is given, so
# an integer past 64 bits, kept as its digits (see _number), is not made a float.
_SCHEMA = f"""
create table if not exists jobs (
    job_id text primary key,
    mode text,
    agents text,
    status text,
    created,
    started_at text,
    completed_at text,
    duration_ms,
    run_ids text,
    session text,
    task text,
    tokens,
    cost
);
create index if not exists jobs_by_session on jobs (session, job_id);
create index if not exists jobs_unfinished on jobs (job_id) where {_UNFINISHED};
create table if not exists store_state (key text primary key, value)
"""
_INSERT = "insert or replace into jobs values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INT64 = 2**63
TASK_MAX = 200  # characters of the first task the index keeps (for ``ps``)


class JobIndex:
    """The index of the jobs in ``directory`` (``load`` reads one's file). What the last
    :meth:`newest` passed over: ``damaged``, a line for each damaged job file; ``total``, how
    many jobs there are in all (of the session asked for)."""

    def __init__(self, home: Path, directory: Path, load: Load) -> None:
        self.home = home
        self.dir = directory
        self._load = load
        self.damaged: list[str] = []
        self.total = 0

    def connect(self) -> sqlite3.Connection:
        """The index, open (the caller closes it)."""
        return indexdb.connect(self.home, _SCHEMA)

    def put(self, state: JobState) -> None:
        """The job's row made from ``state`` (sqlite3.Error or OSError when the index cannot
        be written)."""
        db = self.connect()
        try:
            db.execute(_INSERT, index_row(state))
        finally:
            db.close()

    def newest(self, limit: int, session: str | None) -> list[JobRow]:
        """The newest jobs (of one lifecycle *session*, if given), from the index, brought up
        to the files first (see :meth:`_catch_up`). A damaged index is made again; one that
        cannot be read or written (a full disk, a directory in its place) is passed by: the
        job files are read instead. A damaged job file is passed over and said in
        ``damaged``."""
        self.damaged = []
        try:
            return indexdb.retried(self.home, lambda: self._list_indexed(limit, session))
        except (sqlite3.Error, OSError):
            return self._list_from_files(limit, session)

    def rebuild(self) -> int:
        """Make the index again from the job files (``doctor --reindex``); how many jobs it
        holds."""
        db = self.connect()
        try:
            with indexdb.transaction(db):
                db.execute("delete from jobs")
                db.execute("delete from store_state")
                self._catch_up(db)
            return int(db.execute("select count(*) from jobs").fetchone()[0])
        finally:
            db.close()

    def _job_dirs(self) -> list[str]:
        try:
            return [e.name for e in os.scandir(self.dir) if e.is_dir() and e.name[:1] != "."]
        except FileNotFoundError:
            return []

    def _list_from_files(self, limit: int, session: str | None) -> list[JobRow]:
        names = sorted(self._job_dirs(), reverse=True)
        self.total = len(names)
        out: list[JobRow] = []
        for job_id in names:
            if len(out) >= limit:
                break
            try:
                state = self._load(job_id, False)
            except DamagedRecord as exc:
                self.damaged.append(str(exc))
                continue
            except (OSError, ValueError):
                continue
            if session is not None and state.get("session") != session:
                continue
            out.append(job_row((job_id, *index_row(state)[1:])))
        return out

    def _list_indexed(self, limit: int, session: str | None) -> list[JobRow]:
        db = self.connect()
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
        return [job_row(row) for row in rows]

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
            db.execute(
                "insert or replace into store_state values ('dirMtime', ?)",
                (seen if trusted else None,),
            )
        unfinished = db.execute(f"select * from jobs where {_UNFINISHED}").fetchall()
        was = {row[0]: tuple(row) for row in unfinished if row[0] not in read}
        self._reindex(db, list(was), was=was)

    def _look_at_every_job(self, db: sqlite3.Connection) -> set[str]:
        """Index the job directories the index lacks, forget those gone; the ids it read,
        with "" among them when one could not be read yet (a job being made): the next look
        lists them again."""
        known = {r[0] for r in db.execute("select job_id from jobs")}
        on_disk = set(self._job_dirs())
        db.executemany("delete from jobs where job_id = ?", [(j,) for j in known - on_disk])
        read = on_disk - known
        if not self._reindex(db, sorted(read)):
            read.add("")
        return read

    def _reindex(
        self,
        db: sqlite3.Connection,
        job_ids: Iterable[str],
        was: Mapping[str, tuple[Any, ...]] | None = None,
    ) -> bool:
        """The jobs' rows made again from their files, a batch at a time (gone when the job
        is; not written when a row is as it ``was``: a watcher sees no change); False when a
        file could not be read now."""
        job_ids = list(job_ids)
        many = len(job_ids) >= _MANY
        rows: list[tuple[Any, ...]] = []
        gone: list[tuple[str]] = []
        every = True
        for n, job_id in enumerate(job_ids, 1):
            found = self._read_one(job_id, many)
            if found is None:
                every = False
            elif isinstance(found, str):
                gone.append((found,))
            elif was is None or was.get(job_id) != found:
                rows.append(found)
            if len(rows) >= _BATCH or n == len(job_ids):
                db.executemany(_INSERT, rows)
                rows.clear()
        db.executemany("delete from jobs where job_id = ?", gone)
        return every

    def _read_one(self, job_id: str, many: bool) -> tuple[Any, ...] | str | None:
        """The job's row from its file; its id when the job is gone; None when its file could
        not be read now."""
        try:
            return index_row(self._load(job_id, many))
        except DamagedRecord as exc:
            # Kept as damaged (not listed, but read again and said at every look, until
            # mended or removed).
            self.damaged.append(str(exc))
            return (job_id, None, None, _DAMAGED, *(None,) * 9)
        except FileNotFoundError:
            return None if os.path.isdir(os.path.join(self.dir, job_id)) else job_id
        except (OSError, ValueError):
            return None


def _task(state: JobState) -> str:
    """The job's first task in one line (at most ``TASK_MAX`` characters), and how many more."""
    plan = state.get("plan")
    requests = (plan.get("requests") if isinstance(plan, dict) else None) or []
    if not isinstance(requests, list) or not requests or not isinstance(requests[0], dict):
        return ""
    # (a task may be 10 MiB: only its head is looked at)
    task = " ".join(str(requests[0].get("task") or "")[: TASK_MAX * 2].split())[:TASK_MAX]
    return task + (f" (+{len(requests) - 1} more)" if len(requests) > 1 else "")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> int | float | str | None:
    """A number as the index keeps it: an integer past 64 bits as its digits (SQLite's
    integers are 64-bit; nothing is rounded), anything but a number as None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return str(value)
    return value


def _strings(value: object) -> str:
    """A list's strings as a JSON array (a job's agents, its run ids)."""
    items = value if isinstance(value, list) else []
    return json.dumps([v for v in items if isinstance(v, str)])


def index_row(state: JobState) -> tuple[Any, ...]:
    """A job's row in the index (its columns, in order: see _SCHEMA), whatever its fields
    hold (a job file is read as a job when its id, status, mode and plan are)."""
    found = state.get("usage")
    usage: Mapping[str, object] = found if isinstance(found, dict) else {}
    return (
        state["jobId"],
        _text(state.get("mode")),
        _strings(state.get("agents")),
        _text(state.get("status")),
        _number(state.get("createdAt")),
        _text(state.get("startedAt")),
        _text(state.get("completedAt")),
        _number(state.get("durationMs")),
        _strings(state.get("runIds")),
        _text(state.get("session")),
        _task(state),
        _number(usage.get("totalTokens")),
        _number(usage.get("cost")),
    )


def _read_number(value: Any) -> Any:
    return int(value) if isinstance(value, str) else value


def job_row(row: tuple[Any, ...]) -> JobRow:
    """A row of the index as ``ps`` lists the job."""
    (job_id, mode, agents, status, created, started, completed, took, run_ids, session) = row[:10]
    task, tokens, cost = row[10:]
    return {
        "jobId": job_id,
        "mode": mode,
        "agents": json.loads(agents or "[]"),
        "status": status,
        "createdAt": _read_number(created),
        "startedAt": started,
        "completedAt": completed,
        "durationMs": _read_number(took),
        "runIds": json.loads(run_ids or "[]"),
        "session": session,
        "task": task or "",
        "totalTokens": _read_number(tokens),
        "cost": _read_number(cost),
    }
