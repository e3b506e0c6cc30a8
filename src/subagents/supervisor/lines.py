"""A child's stdout as the supervisor reads it: the pipe's size, the read size, and the
stream cut into lines. Standard library only.

Each read lands in one reused buffer; the lines in it are handed on where they lie (one
slice each, and only for a line the normalizer wants). Only a line still open at the end
of a read is copied aside, and not even that once its first bytes show a line the
normalizer skips (pi's ``agent_end``: every message of the run, 17 MB on a long one):
then only its end is looked for, and its last bytes (``TAIL``) are handed to ``on_skipped``:
pi 0.87 ends ``agent_end`` with ``"willRetry":true}`` when an auto-retry follows.
"""

from __future__ import annotations

import fcntl
import os

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


# The most read from the child's stdout at once, and the pipe's size where it can be had.
READ_SIZE = 1 << 20
# Linux's default pipe buffer: 16 pages.
PIPE_DEFAULT = 1 << 16
# How much of a skipped line's end is kept for ``on_skipped``.
TAIL = 32


def read_ready(fd: int, chunk: bytearray, take: Callable[[int], None]) -> bool:
    """Read what ``fd`` (non-blocking) has now into ``chunk``, one reused buffer (a fresh
    megabyte per read would cost page faults), handing each read's size to ``take``; True at
    its end (EOF, or an error reading it), False once nothing more is there for now."""
    while True:
        try:
            n = os.readv(fd, [chunk])
        except (BlockingIOError, ValueError):  # (ValueError: the fd is closed already)
            return False
        except OSError:
            n = 0
        if not n:
            return True
        take(n)
        if n < READ_SIZE:
            return False


def grow_pipe(fd: int) -> int | None:
    """Best effort: give the pipe of ``fd`` the largest buffer allowed up to READ_SIZE (Linux
    only), so a chatty child's output comes in reads of up to READ_SIZE, not 64 KiB: fewer
    system calls and wake-ups for both sides. A size refused (over pipe-max-size, or an
    unprivileged user over the pipe-user-pages limit) is halved until one is granted; the
    granted size, or None when the pipe keeps its default."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    size = READ_SIZE
    while set_size is not None and size > PIPE_DEFAULT:
        try:
            return int(fcntl.fcntl(fd, set_size, size))
        except OSError:
            size //= 2
    return None


class Lines:
    """``wants(data, start)`` says from a line's start whether it is handled (a normalizer's
    skip prefixes: a line's start that says no says it for the whole line, and one too short
    to tell says yes); ``on_line(line)`` gets each wanted, non-empty line without its newline,
    as a bytearray nothing else refers to (so it is freed once parsed); ``on_skipped(tail)``
    gets the last TAIL bytes (or fewer) of each non-empty line not wanted."""

    def __init__(
        self,
        wants: Callable[[bytearray, int], bool],
        on_line: Callable[[bytearray], None],
        on_skipped: Callable[[bytes], None] = lambda tail: None,
    ) -> None:
        self.wants = wants
        self.on_line = on_line
        self.on_skipped = on_skipped
        # The start of a line whose end is still to come; or, while `skipping`, nothing:
        # that line's first bytes showed it is not wanted (and `tail` keeps its last bytes).
        self.held = bytearray()
        self.skipping = False
        self.tail = b""

    def feed(self, chunk: bytearray, n: int) -> None:
        """The first ``n`` bytes of ``chunk`` were just read."""
        wants, on_line = self.wants, self.on_line
        find = chunk.find
        nl = find(b"\n", 0, n)
        if nl < 0:
            self.hold(chunk, 0, n)
            return
        if self.skipping:
            self.skipping = False
            self.on_skipped((self.tail + bytes(chunk[max(0, nl - TAIL) : nl]))[-TAIL:])
            self.tail = b""
        elif self.held:
            with memoryview(chunk) as view, view[:nl] as head:
                self.held += head
            if wants(self.held, 0):
                on_line(self.take_held())
            else:
                self.on_skipped(bytes(self.held[-TAIL:]))
            # Not the old buffer: it keeps its capacity (after a 17 MB line, 17 MB).
            self.held = bytearray()
        elif nl:
            if wants(chunk, 0):
                on_line(chunk[:nl])
            else:
                self.on_skipped(bytes(chunk[max(0, nl - TAIL) : nl]))
        start = nl + 1
        nl = find(b"\n", start, n)
        while nl >= 0:
            if nl > start:
                if wants(chunk, start):
                    on_line(chunk[start:nl])
                else:
                    self.on_skipped(bytes(chunk[max(start, nl - TAIL) : nl]))
            start = nl + 1
            nl = find(b"\n", start, n)
        if start < n:
            self.hold(chunk, start, n)

    def end(self) -> None:
        """The stream ended: hand on a last line that had no newline."""
        if self.skipping:
            self.on_skipped(self.tail)
        elif self.held:
            if self.wants(self.held, 0):
                self.on_line(self.take_held())
            else:
                self.on_skipped(bytes(self.held[-TAIL:]))
        self.held = bytearray()
        self.skipping = False
        self.tail = b""

    def hold(self, chunk: bytearray, start: int, end: int) -> None:
        """Keep the start of a line whose end is still to come, unless it is skipped."""
        if self.skipping:
            self.tail = (self.tail + bytes(chunk[max(start, end - TAIL) : end]))[-TAIL:]
            return
        held = self.held
        with memoryview(chunk) as view, view[start:end] as part:
            held += part
        if not self.wants(held, 0):
            self.skipping = True
            self.tail = bytes(held[-TAIL:])
            self.held = bytearray()

    def take_held(self) -> bytearray:
        line, self.held = self.held, bytearray()
        return line
