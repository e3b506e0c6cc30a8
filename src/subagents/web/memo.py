"""What the pages made of a run's files, kept while the files stay as they were.

Rendering a transcript's last 64 KiB costs most of a job page (markdown-it in Python), and
every client of a job asks for the same part: five people looking at one finished run need
it made once. An entry is keyed by what was made and by the files' identity (inode, size,
modification time), so a file that grew or was replaced is read again; a few entries are
kept, the least recently used dropped, so the memory this takes is bounded. The fleet's
live streams share the same way the drawing of each change (:func:`latest`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
# Entries kept: each is at most a page's part of a file (64 KiB of source, its HTML).
SIZE = 16

# How long a thread waits for another making the same part before it makes it too.
PATIENCE = 30.0

_lock = threading.Lock()
_kept: OrderedDict[tuple[Hashable, Hashable], object] = OrderedDict()
_newest: OrderedDict[tuple[Hashable, Hashable], object] = OrderedDict()  # (see latest())
_making: dict[Hashable, threading.Event] = {}  # being made now, set when done


def identity(path: Path) -> tuple[int, int, int] | None:
    """The file as it is now (None: not there)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def made(key: Hashable, files: tuple[Path, ...], make: Callable[[], T]) -> T:
    """``make()``, or what it gave for ``key`` while ``files`` were as they are now. While
    one thread makes it, another asking for the same waits for it (five clients opening a
    run at once render it once), at most :data:`PATIENCE` seconds."""
    return _once(_kept, (key, tuple(identity(f) for f in files)), make)


def latest(key: Hashable, version: Hashable, make: Callable[[], T]) -> T:
    """``make()`` once for ``key`` at ``version`` (the store watcher's count of changes):
    every live stream of one view, woken by one change, shares one drawing of it. Only the
    newest version of a key is kept, of at most :data:`SIZE` keys."""
    return _once(_newest, (key, version), make, newest_only=True)


def _once(
    kept: OrderedDict[tuple[Hashable, Hashable], object],
    full: tuple[Hashable, Hashable],
    make: Callable[[], T],
    newest_only: bool = False,
) -> T:
    """What ``make()`` gave for ``full`` (a key and what it is now), kept in ``kept``, made by
    one thread while the others asking wait; ``newest_only``: other versions of the key
    dropped."""
    while True:
        with _lock:
            if full in kept:
                kept.move_to_end(full)
                return kept[full]  # type: ignore[return-value]  # (made by make(): a T)
            busy = _making.get(full)
            if busy is None:
                _making[full] = threading.Event()
                break
        if not busy.wait(PATIENCE):
            return make()  # (its maker is stuck: not kept)
    try:
        value = make()
        with _lock:
            for old in [k for k in kept if newest_only and k[0] == full[0]]:
                del kept[old]
            kept[full] = value
            while len(kept) > SIZE:
                kept.popitem(last=False)
    finally:
        with _lock:
            _making.pop(full).set()
    return value
