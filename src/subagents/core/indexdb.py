"""The local index (``$SUBAGENTS_HOME/index.sqlite``): a cache of the job files and the session
logs that lets ``ps``, ``history``, ``cost`` and the web fleet answer without reading every
record. The files stay the truth: each table is rebuilt from them when it is missing, of
another version, or cannot be read (callers then read the files themselves).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from subagents.core.files import make_private_dir

T = TypeVar("T")

FILE = "index.sqlite"
# Bumped whenever a table changes: an index of another version is dropped and made again.
VERSION = 5


def path(home: Path) -> Path:
    return Path(home) / FILE


def connect(home: Path, schema: str) -> sqlite3.Connection:
    """The index, open, with ``schema`` (``create … if not exists`` statements) in it; the
    caller closes it. One that is damaged (not a database, malformed) is thrown away and made
    anew. sqlite3.Error or OSError when it cannot be opened."""
    try:
        return _connect(home, schema)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise  # locked, or cannot be opened: not a damaged file
        discard(home)
        return _connect(home, schema)


def retried(home: Path, work: Callable[[], T]) -> T:
    """``work()`` on the index, run again once after a damaged index (malformed: found so
    only once read) is thrown away, to be made anew from the files. sqlite3.Error or OSError
    when it cannot be used all the same (its caller reads the files)."""
    try:
        return work()
    except sqlite3.OperationalError:
        raise  # locked, or cannot be written: not a damaged file
    except sqlite3.DatabaseError:
        discard(home)
        return work()


def discard(home: Path) -> None:
    """Remove the index (and its write-ahead log: a log left beside a new database would be
    read into it): it is made again from the files."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            Path(str(path(home)) + suffix).unlink()


def _connect(home: Path, schema: str) -> sqlite3.Connection:
    make_private_dir(Path(home))
    db = sqlite3.connect(path(home), timeout=10, isolation_level=None)
    try:
        # WAL: readers (ps, the web fleet) never wait for a writer (a job's update). A cache of
        # the files, rebuilt when lost: no fsync on each commit.
        db.execute("pragma journal_mode = wal")
        db.execute("pragma synchronous = off")
        if db.execute("pragma user_version").fetchone()[0] != VERSION:
            with transaction(db):
                if db.execute("pragma user_version").fetchone()[0] != VERSION:
                    tables = db.execute("select name from sqlite_master where type = 'table'")
                    for (name,) in tables.fetchall():
                        db.execute(f'drop table if exists "{name}"')
                    db.execute(f"pragma user_version = {VERSION}")
        db.executescript(schema)
    except BaseException:
        db.close()
        raise
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (``begin immediate``): two processes bringing the
    index up to date never both read the same stale state and both write it."""
    db.execute("begin immediate")
    try:
        yield db
    except BaseException:
        db.execute("rollback")
        raise
    db.execute("commit")
