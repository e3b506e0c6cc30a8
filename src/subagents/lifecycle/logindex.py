"""Where each entry of the session logs is, by time and kind: ``history`` reads only the
entries it shows (the newest), ``history --since`` and ``cost --since`` only those of their
window, whatever the logs hold (a user with months of history has hundreds of thousands of
entries).

The logs stay the truth and are append-only: the index keeps, per log, how far it has read
(its inode and offset) and, per complete line, its offset, length and times. Bringing it up
to date reads only what was appended since; a log replaced or cut shorter is read again
whole. A line is read back from the log itself, so the index holds no entry's content.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from subagents.core import indexdb
from subagents.core.clock import epoch
from subagents.lifecycle.sessionlog import parse_line
from subagents.types import JsonObject

_SCHEMA = """
create table if not exists log_files (path text primary key, inode integer, indexed integer);
create table if not exists log_lines (
    path text,
    offset integer,
    length integer,
    at real,
    ended real,
    event text,
    status text,
    primary key (path, offset)
);
create index if not exists log_lines_at on log_lines (at);
create index if not exists log_lines_ended on log_lines (ended)
"""

# ``at``: the entry's ``timestamp`` (history's --since); ``ended``: its ``completedAt``, else
# its ``timestamp`` (cost's --since: when a job ended). ``event`` and ``status``: its
# ``eventType`` and ``status`` where they are text.
Column = Literal["at", "ended"]


def since(
    home: Path,
    logs: Iterable[Path],
    when: float,
    column: Column,
    events: Iterable[str] | None = None,
) -> Iterator[JsonObject]:
    """The entries of ``logs`` (in order: log by log, line by line) whose ``column`` time is
    at or after ``when`` (and, given ``events``, whose ``eventType`` is one of them); every
    other line of the logs is not read. sqlite3.Error or OSError when the index cannot be
    used (the caller reads the logs instead), raised before the first entry is given."""
    files = [str(p) for p in logs]
    kinds = sorted(events) if events is not None else None
    marks = ",".join("?" * len(files))
    which = f"and event in ({','.join('?' * len(kinds))})" if kinds is not None else ""
    # (by the time's index: left to itself, SQLite walks every line of the logs in order)
    query = (
        f"select path, offset, length from log_lines indexed by log_lines_{column} "
        f"where path in ({marks}) and {column} >= ? {which} order by path, offset"
    )
    args = (*files, when, *(kinds or ()))
    return _read(indexdb.retried(home, lambda: _found(home, files, query, args)))


def newest(
    home: Path,
    log: Path,
    *,
    limit: int | None = None,
    since: float | None = None,
    events: Iterable[str] | None = None,
    statuses: Iterable[str] | None = None,
) -> Iterator[JsonObject]:
    """The entries of ``log``, newest (last appended) first: at most ``limit``, those whose
    ``timestamp`` is at or after ``since``, whose ``eventType`` is one of ``events`` and whose
    ``status`` one of ``statuses`` (each where given). Only those are read from the log.
    sqlite3.Error or OSError when the index cannot be used (the caller reads the log:
    :func:`backwards`), raised before the first entry is given."""
    path = str(log)
    where: list[str] = ["path = ?"]
    args: list[object] = [path]
    if since is not None:
        where.append("at >= ?")
        args.append(since)
    for column, values in (("event", events), ("status", statuses)):
        if values is not None:
            kinds = sorted(values)
            where.append(f"{column} in ({','.join('?' * len(kinds))})")
            args.extend(kinds)
    # With a time, its window is found by the time's index (O(window)), not by walking every
    # line of the log back from its end until the window's first.
    lines = "log_lines indexed by log_lines_at" if since is not None else "log_lines"
    query = (
        f"select path, offset, length from {lines} where {' and '.join(where)} "
        "order by offset desc limit ?"
    )
    args.append(-1 if limit is None else limit)  # (-1: no limit)
    return _read(indexdb.retried(home, lambda: _found(home, [path], query, args)))


def _found(
    home: Path, logs: list[str], query: str, args: Iterable[object]
) -> list[tuple[str, int, int]]:
    """Where the entries ``query`` selects are, once the index is up to ``logs``."""
    db = indexdb.connect(home, _SCHEMA)
    try:
        with indexdb.transaction(db):
            for path in logs:
                _catch_up(db, path)
        return db.execute(query, tuple(args)).fetchall()
    finally:
        db.close()


def backwards(log: Path) -> Iterator[JsonObject]:
    """The entries of ``log``, newest first, without the index: the log is scanned once for
    where its lines are (their places kept, not their text), then read from its end."""
    path = str(log)
    try:
        with open(path, "rb") as f:
            found = [(path, offset, len(line)) for offset, line in _lines(f, 0)]
    except FileNotFoundError:
        return iter(())
    found.reverse()
    return _read(found)


def _read(found: list[tuple[str, int, int]]) -> Iterator[JsonObject]:
    handle: tuple[str, int] | None = None
    try:
        for path, offset, length in found:
            if handle is None or handle[0] != path:
                if handle is not None:
                    os.close(handle[1])
                handle = None
                try:
                    handle = (path, os.open(path, os.O_RDONLY))
                except FileNotFoundError:
                    continue
            line = os.pread(handle[1], length, offset)
            # (a log replaced since it was indexed: a line that is not what was there is not
            # an entry)
            obj = parse_line(line) if line.endswith(b"\n") else None
            if obj is not None:
                yield obj
    finally:
        if handle is not None:
            os.close(handle[1])


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _lines(f: BinaryIO, start: int) -> Iterator[tuple[int, bytes]]:
    """The complete lines of the log open as ``f`` from ``start``, each with its offset; the
    file is left at the end of the last one (a torn last line is read again once whole)."""
    f.seek(start)
    offset = start
    for line in f:
        if not line.endswith(b"\n"):
            f.seek(offset)
            return
        yield offset, line
        offset += len(line)


def _catch_up(db: sqlite3.Connection, path: str) -> None:
    """Index what ``path`` gained since the index last read it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        db.execute("delete from log_lines where path = ?", (path,))
        db.execute("delete from log_files where path = ?", (path,))
        return
    known = db.execute("select inode, indexed from log_files where path = ?", (path,)).fetchone()
    start = 0
    if known is not None and known[0] == st.st_ino and st.st_size >= known[1]:
        start = int(known[1])
    elif known is not None:
        db.execute("delete from log_lines where path = ?", (path,))  # replaced or cut: anew
    if known is not None and start == st.st_size:
        return
    rows = []
    with open(path, "rb") as f:
        for offset, line in _lines(f, start):
            obj = parse_line(line) if line.strip() else None
            if obj is not None:
                at = epoch(obj.get("timestamp"))
                ended = epoch(obj.get("completedAt")) or at
                event, status = obj.get("eventType"), obj.get("status")
                rows.append((path, offset, len(line), at, ended, _text(event), _text(status)))
        indexed = f.tell()
    db.executemany("insert or replace into log_lines values (?, ?, ?, ?, ?, ?, ?)", rows)
    db.execute("insert or replace into log_files values (?, ?, ?)", (path, st.st_ino, indexed))


def reindex(home: Path, logs: Iterable[Path]) -> int:
    """Index ``logs`` anew, whole (``doctor --reindex``); how many entries they hold."""
    db = indexdb.connect(home, _SCHEMA)
    try:
        with indexdb.transaction(db):
            db.execute("delete from log_lines")
            db.execute("delete from log_files")
            for path in logs:
                _catch_up(db, str(path))
        return int(db.execute("select count(*) from log_lines").fetchone()[0])
    finally:
        db.close()
