"""A child's stdout as the supervisor reads it: the pipe's size, the read size, and the
stream cut into lines. Standard library only.

Each read lands in one reused buffer; the lines in it are handed on where they lie (one
slice each, and only for a line the normalizer wants). Only a line still open at the end
of a read is copied aside, and not even that once its first bytes show a line the
normalizer skips (pi's ``agent_end``: every message of the run, 17 MB on a long one):
then only its end is looked for.
"""

from __future__ import annotations

import fcntl

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


# The most read from the child's stdout at once, and the pipe's size where it can be had.
READ_SIZE = 1 << 20
# Linux's default pipe buffer: 16 pages.
PIPE_DEFAULT = 1 << 16


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
    as a bytearray nothing else refers to (so it is freed once parsed)."""

    def __init__(
        self, wants: Callable[[bytearray, int], bool], on_line: Callable[[bytearray], None]
    ) -> None:
        self.wants = wants
        self.on_line = on_line
        # The start of a line whose end is still to come; or, while `skipping`, nothing:
        # that line's first bytes showed it is not wanted.
        self.held = bytearray()
        self.skipping = False

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
        elif self.held:
            with memoryview(chunk) as view, view[:nl] as head:
                self.held += head
            if wants(self.held, 0):
                on_line(self.take_held())
            # Not the old buffer: it keeps its capacity (after a 17 MB line, 17 MB).
            self.held = bytearray()
        elif nl and wants(chunk, 0):
            on_line(chunk[:nl])
        start = nl + 1
        nl = find(b"\n", start, n)
        while nl >= 0:
            if nl > start and wants(chunk, start):
                on_line(chunk[start:nl])
            start = nl + 1
            nl = find(b"\n", start, n)
        if start < n:
            self.hold(chunk, start, n)

    def end(self) -> None:
        """The stream ended: hand on a last line that had no newline."""
        if self.held and not self.skipping and self.wants(self.held, 0):
            self.on_line(self.take_held())
        self.held = bytearray()
        self.skipping = False

    def hold(self, chunk: bytearray, start: int, end: int) -> None:
        """Keep the start of a line whose end is still to come, unless it is skipped."""
        if self.skipping:
            return
        held = self.held
        with memoryview(chunk) as view, view[start:end] as part:
            held += part
        if not self.wants(held, 0):
            self.skipping = True
            self.held = bytearray()

    def take_held(self) -> bytearray:
        line, self.held = self.held, bytearray()
        return line
