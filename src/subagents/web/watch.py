"""One look at the store for every live stream: a watcher polls what changes when a job does
(the job index, each running run's files) and wakes the streams waiting on it. A stream then
draws its own view, only when something changed; with nothing running and nothing written,
no stream does any work. The watcher polls only while a stream listens: when the last client
goes, its task ends too (the next stream starts it again).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread

from subagents.core import paths
from subagents.core.indexdb import FILE as INDEX_FILE
from subagents.service import TERMINAL, JobStore

# Files whose size and time say a run or the store moved.
RUN_FILES = ("events.jsonl", "transcript.md", "result.json")
# The running jobs are looked up again this often at least (the index also says so).
ACTIVE_LIMIT = 200


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _log_stat(path: Path) -> tuple[int, int] | None:
    """The index's write-ahead log as a change sees it: only one holding something. Every
    reader's open makes an empty log and its close removes it; counted, each stream's own
    look at the index would wake every stream again, for ever."""
    st = _stat(path)
    return st if st is not None and st[1] else None


class StoreWatcher:
    """``changes()`` yields each time the store changed (and at once). One poller task a
    server, started by the first stream, ending when ``stopping`` is set or no stream is
    left (``listeners``)."""

    def __init__(self, home: Path, stopping: threading.Event, tick: float = 0.5) -> None:
        self.store = JobStore(home)
        self.home = home
        self.tick = tick
        self.stopping = stopping
        self.version = 0
        self._changed: anyio.Event
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._index: tuple[object, ...] = ()
        self._active: list[str] = []
        self.listeners = 0  # the streams in changes() now

    def signature(self) -> tuple[object, ...]:
        """What says something changed: the index's files, the running runs' files, and,
        while a job runs, the second (its elapsed time is shown)."""
        # The index and its write-ahead log (a job recorded, changed or ended), the jobs
        # directory (a job made or removed).
        index = (
            _stat(self.home / INDEX_FILE),
            _log_stat(self.home / f"{INDEX_FILE}-wal"),
            _stat(self.store.dir),
        )
        if index != self._index:
            self._index = index
            rows = self.store.list(ACTIVE_LIMIT)
            self._active = [
                r for row in rows if row.get("status") not in TERMINAL for r in row["runIds"] if r
            ]
            self._running = any(row.get("status") not in TERMINAL for row in rows)
        runs = paths.runs_dir(self.home)
        files = tuple(_stat(runs / r / name) for r in self._active for name in RUN_FILES)
        return index, files, int(time.time()) if self._running else 0

    def _start(self) -> None:
        if self._task is None:
            # (made here, in the server's event loop: an Event belongs to one)
            self._changed = anyio.Event()
            self._task = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        last: tuple[object, ...] | None = None
        try:
            while not self.stopping.is_set() and self.listeners:
                now = await anyio.to_thread.run_sync(self.signature)
                if now != last:
                    last = now
                    self.version += 1
                    self._changed.set()
                    self._changed = anyio.Event()
                await anyio.sleep(self.tick)
        finally:
            self._task = None
            self._changed.set()  # the streams waiting see the server stop

    async def changes(self, keepalive: float) -> AsyncIterator[bool]:
        """Yields True when the store changed (at once the first time), False after
        ``keepalive`` seconds of nothing (a stream says something, so a client gone is
        noticed); ends when the server stops."""
        self.listeners += 1
        try:
            self._start()
            seen, quiet_since = -1, time.monotonic()
            while not self.stopping.is_set():
                if self.version != seen:
                    seen, quiet_since = self.version, time.monotonic()
                    yield True
                    continue
                with anyio.move_on_after(1.0):  # the stop is looked at every second
                    await self._changed.wait()
                if self.version == seen and time.monotonic() - quiet_since >= keepalive:
                    quiet_since = time.monotonic()
                    yield False
        finally:
            self.listeners -= 1
