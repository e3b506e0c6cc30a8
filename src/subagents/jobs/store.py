"""The job store: ``$SUBAGENTS_HOME/jobs/<job-id>/job.json`` per job, plus a SQLite index
that makes ``ps`` fast. The files are the truth: the index is rebuilt from them when
missing, and re-read for any job it does not hold as finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from subagents.core import ids, paths, procs
from subagents.core.files import make_private_dir, read_json, write_json_atomic

JOB_FILE = "job.json"
TERMINAL = frozenset({"completed", "failed", "aborted", "timeout"})
_SCHEMA = """
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
    session text
)
"""


class JobIdError(Exception):
    """An unknown, ambiguous or malformed id, as one line."""


def _matching(directory: Path, prefix: str) -> list[str]:
    try:
        return [e.name for e in os.scandir(directory) if e.name.startswith(prefix) and e.is_dir()]
    except FileNotFoundError:
        return []


class JobStore:
    def __init__(self, home: Path | None = None) -> None:
        self.home = home or paths.state_home()
        self.dir = paths.jobs_dir(self.home)
        self._lock = threading.Lock()

    # ---- files -----------------------------------------------------------

    def path(self, job_id: str) -> Path:
        return self.dir / job_id / JOB_FILE

    def create(self, plan: dict[str, Any], *, agents: list[str], background: bool) -> str:
        job_id = ids.new_id()
        make_private_dir(self.dir / job_id)
        state = {
            "jobId": job_id,
            "mode": plan["mode"],
            "status": "pending",
            "createdAt": time.time(),
            "agents": agents,
            "background": background,
            "session": plan.get("session"),
            "runIds": [],
            "plan": plan,
        }
        self._write(job_id, state)
        return job_id

    def load(self, job_id: str) -> dict[str, Any]:
        data = read_json(self.path(job_id))
        if not isinstance(data, dict):
            raise ValueError(f"{self.path(job_id)}: not a job")
        return data

    def update(self, job_id: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            state = self.load(job_id)
            if state.get("status") in TERMINAL and "status" in fields:
                fields.pop("status")  # a finished job stays finished
            state.update(fields)
            if "driverPid" in fields:
                with contextlib.suppress(Exception):
                    state["driver"] = procs.identity(int(fields.pop("driverPid")))
                state.pop("driverPid", None)
            self._write(job_id, state)
            return state

    def finish(self, job_id: str, result: dict[str, Any]) -> dict[str, Any]:
        """Record the job result; the first one recorded wins."""
        with self._lock:
            state = self.load(job_id)
            if state.get("status") in TERMINAL and "runs" in state:
                return state
            state.update(result)
            self._write(job_id, state)
            return state

    def _write(self, job_id: str, state: dict[str, Any]) -> None:
        write_json_atomic(self.path(job_id), state)
        with contextlib.suppress(sqlite3.Error):
            self._index_upsert(state)

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
            raise JobIdError(f"not a job id: {prefix!r}")
        names = _matching(self.dir, prefix)
        if not names:
            job_ids = set()
            for run_id in _matching(paths.runs_dir(self.home), prefix):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    job_ids.add(
                        read_json(paths.runs_dir(self.home) / run_id / "meta.json").get("jobId")
                    )
            names = sorted(j for j in job_ids if isinstance(j, str) and (self.dir / j).is_dir())
        if not names:
            raise JobIdError(f"no job with id {prefix!r}")
        if len(names) > 1:
            shown = ", ".join(sorted(names)[:5]) + (", …" if len(names) > 5 else "")
            raise JobIdError(f"ambiguous job id {prefix!r}: matches {len(names)} jobs ({shown})")
        return names[0]

    # ---- liveness --------------------------------------------------------

    def driver_alive(self, state: dict[str, Any]) -> bool:
        driver = state.get("driver")
        return isinstance(driver, dict) and procs.is_alive(driver)

    def recover_if_orphaned(
        self,
        job_id: str,
        *,
        status: str = "failed",
        message: str = "the job driver died before the job ended",
    ) -> dict[str, Any]:
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
        from subagents.runs import RunMonitor

        runs = []
        for run_id in state.get("runIds") or []:
            if not run_id:
                continue
            monitor = RunMonitor(paths.runs_dir(self.home) / run_id)
            result = monitor.result()
            if result is None:
                if monitor.supervisor_alive():
                    return state  # a run goes on without its driver: the job ends when it does
                result = monitor.recover_dead_supervisor()
            runs.append(result)
        now = time.time()
        from subagents.runs import iso, sum_usage

        return self.finish(
            job_id,
            {
                "status": status,
                "errorMessage": message,
                "completedAt": iso(now),
                "durationMs": round((now - float(state.get("createdAt") or now)) * 1000),
                "usage": sum_usage(runs),
                "runs": runs,
                "finalText": None,
            },
        )

    # ---- index -----------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        make_private_dir(self.home)
        db = sqlite3.connect(self.home / "index.sqlite", timeout=5)
        # The index is a cache of the job files, rebuilt from them when lost: no fsyncs for it.
        db.execute("pragma synchronous = off")
        db.execute(_SCHEMA)
        return db

    def _index_upsert(self, state: dict[str, Any], db: sqlite3.Connection | None = None) -> None:
        row = (
            state["jobId"],
            state.get("mode"),
            json.dumps(state.get("agents") or []),
            state.get("status"),
            state.get("createdAt"),
            state.get("startedAt"),
            state.get("completedAt"),
            state.get("durationMs"),
            json.dumps(state.get("runIds") or []),
            state.get("session"),
        )
        own = db is None
        conn = db or self._db()
        try:
            conn.execute("insert or replace into jobs values (?,?,?,?,?,?,?,?,?,?)", row)
            conn.commit()
        finally:
            if own:
                conn.close()

    def list(self, limit: int = 20, session: str | None = None) -> list[dict[str, Any]]:
        """The newest jobs (of one lifecycle *session*, if given), from the index, refreshed
        from the files where it may be stale."""
        db = self._db()
        try:
            known = {r[0]: r[1] for r in db.execute("select job_id, status from jobs")}
            try:
                on_disk = {e.name for e in os.scandir(self.dir) if e.is_dir()}
            except FileNotFoundError:
                on_disk = set()
            for gone in set(known) - on_disk:
                db.execute("delete from jobs where job_id = ?", (gone,))
            for job_id in on_disk:
                if known.get(job_id) in TERMINAL:
                    continue  # finished jobs never change
                with contextlib.suppress(OSError, ValueError):
                    self._index_upsert(self.load(job_id), db)
            db.commit()
            cols = (
                "jobId",
                "mode",
                "agents",
                "status",
                "createdAt",
                "startedAt",
                "completedAt",
                "durationMs",
                "runIds",
                "session",
            )
            where, args = ("where session = ?", (session,)) if session is not None else ("", ())
            rows = db.execute(
                f"select * from jobs {where} order by job_id desc limit ?", (*args, limit)
            ).fetchall()
        finally:
            db.close()
        out = []
        for row in rows:
            item = dict(zip(cols, row, strict=True))
            item["agents"] = json.loads(item["agents"] or "[]")
            item["runIds"] = json.loads(item["runIds"] or "[]")
            out.append(item)
        return out
