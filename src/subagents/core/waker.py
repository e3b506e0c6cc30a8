"""Waiting for a directory to change: inotify where there is one, else a short sleep.

Used by everything that follows files another process writes (run events, results,
job state, session logs), so none of them busy-loops.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import inotify

if TYPE_CHECKING:
    from subagents.core.inotify import Inotify

POLL_FALLBACK = 0.05  # seconds between looks where there is no inotify
# Past this many descriptors waiting to be closed, a waker closes its own (see _close_later).
CLOSE_BACKLOG = 64

_to_close: list[Inotify] = []
_close_cond = threading.Condition()
_closer: threading.Thread | None = None


def _close_pending() -> None:
    while True:
        with _close_cond:
            while not _to_close:
                _close_cond.wait()
            ino = _to_close.pop()
        ino.close()


def _close_later(ino: Inotify) -> None:
    """Close an inotify descriptor off the caller's path: the kernel waits out an RCU grace
    period on each close (5-20 ms here, at times over 100 ms), which a follower that has just
    seen its result (a job's slot, about to start its next run) should not wait for."""
    global _closer
    with _close_cond:
        if len(_to_close) < CLOSE_BACKLOG:
            if _closer is None or not _closer.is_alive():  # (a forked child has no thread)
                _closer = threading.Thread(
                    target=_close_pending, name="subagents-inotify-close", daemon=True
                )
                _closer.start()
            _to_close.append(ino)
            _close_cond.notify()
            return
    ino.close()


class DirWaker:
    """Sleeps until the directory holding the log changes, or a timeout.

    Uses inotify on the directory (which also sees the file being created); where there is
    none, or the directory does not exist yet, a short sleep."""

    def __init__(self, directory: Path, writes: bool = True) -> None:
        """``writes=False``: wake for files appearing only, not for every write to one (a
        follower waiting for a result, not reading the log, sleeps through a chatty run)."""
        self._dir = directory
        self._writes = writes
        self._ino: Inotify | None = None
        self._watching = False

    def _watch(self) -> None:
        if self._watching:
            return
        try:
            if self._ino is None:
                self._ino = inotify.Inotify()
            mask = inotify.CREATE | inotify.MOVED_TO | inotify.DELETE_SELF | inotify.MOVE_SELF
            if self._writes:
                mask |= inotify.MODIFY | inotify.CLOSE_WRITE
            self._ino.add_watch(str(self._dir), mask)
            self._watching = True
        except OSError:
            self._watching = False

    def arm(self) -> None:
        """Watch before looking, so no write between a look and a wait is missed."""
        self._watch()

    def wait(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self._watch()
        if not self._watching:
            time.sleep(min(seconds, POLL_FALLBACK))
            return
        assert self._ino is not None  # watching
        for _wd, mask in self._ino.read(max(1, int(seconds * 1000))):
            if mask & (inotify.IGNORED | inotify.DELETE_SELF | inotify.MOVE_SELF):
                self._watching = False  # directory went away; look again next time

    def close(self) -> None:
        if self._ino is not None:
            _close_later(self._ino)
            self._ino = None
            self._watching = False
