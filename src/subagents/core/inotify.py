"""Linux's inotify through the C library (ctypes): the few calls the followers need.

Ours, not a package's: ``inotify_simple`` costs its import (enum, ctypes.util, tempfile,
random) and, on first use, ``ctypes.util.find_library`` running ``ldconfig -p`` in a
subprocess, on every command that waits for a run (bench/bench_delegation.py). Here the C
library is the one this interpreter already has loaded (``CDLL(None)``), and ctypes is
imported on first use. ``OSError`` where there is no inotify (not Linux, a C library
without it, no descriptors left).
"""

from __future__ import annotations

import os
import select
import struct

TYPE_CHECKING = False  # not typing's (this module's importers include light ones)
if TYPE_CHECKING:
    import ctypes

# From <sys/inotify.h>.
MODIFY = 0x00000002
ATTRIB = 0x00000004
CLOSE_WRITE = 0x00000008
MOVED_FROM = 0x00000040
MOVED_TO = 0x00000080
CREATE = 0x00000100
DELETE = 0x00000200
DELETE_SELF = 0x00000400
MOVE_SELF = 0x00000800
IGNORED = 0x00008000
_CLOEXEC = os.O_CLOEXEC
_NONBLOCK = os.O_NONBLOCK

# struct inotify_event: wd, mask, cookie, len, then len bytes of name.
_EVENT = struct.Struct("iIII")
_READ_SIZE = 64 * 1024

_libc: ctypes.CDLL | None = None


def _c_library() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _checked(rc: int) -> int:
    if rc < 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return rc


class Inotify:
    """One inotify descriptor (close-on-exec, non-blocking): watches added, events read."""

    def __init__(self) -> None:
        try:
            init = _c_library().inotify_init1
        except AttributeError as exc:  # a C library without inotify
            raise OSError(f"no inotify: {exc}") from None
        self._fd: int | None = _checked(init(_CLOEXEC | _NONBLOCK))

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("inotify descriptor closed")
        return self._fd

    def add_watch(self, path: str, mask: int) -> int:
        """Watch ``path`` for ``mask``: the watch descriptor its events carry."""
        import ctypes

        add = _c_library().inotify_add_watch
        return _checked(add(self.fileno(), os.fsencode(path), ctypes.c_uint32(mask)))

    def read(self, timeout_ms: int = 0) -> list[tuple[int, int]]:
        """The events there are, as ``(watch descriptor, mask)``, waiting up to
        ``timeout_ms`` for the first (0: none; an empty list when nothing came)."""
        fd = self.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout_ms):
            return []
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return []
        events = []
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, name_len = _EVENT.unpack_from(data, offset)
            events.append((wd, mask))
            offset += _EVENT.size + name_len
        return events

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
