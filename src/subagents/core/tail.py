"""Reading what is appended to a file, from an offset: the one reader behind every follower
(a run's events and transcript, a session log, the artifacts a Ray node relays).

:func:`read_at` is the byte-level read (a bounded chunk from an offset). :class:`LineTail`
hands out complete lines only: an unterminated last line (one still being written) is kept
until its newline lands, so no reader ever sees half a line or half a UTF-8 character.
Each read takes at most one chunk (plus the rest of a line longer than that), so a follower
far behind holds one chunk at a time, not the whole backlog. Standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

READ_CHUNK = 1 << 20


def read_at(path: Path | str, offset: int, limit: int = READ_CHUNK) -> bytes:
    """Up to ``limit`` bytes of ``path`` from ``offset`` (b"" when the file is not there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    try:
        return os.pread(fd, limit, offset)
    finally:
        os.close(fd)


class LineTail:
    """The complete lines appended to one file since the last read.

    ``offset`` is how far the file has been read; :attr:`consumed` is where the next
    complete line starts (the offset to save, to resume in another process). A file that is
    gone, shorter than what was read, or replaced by another is read again from its start.
    """

    def __init__(self, path: Path | str, offset: int = 0, chunk: int = READ_CHUNK) -> None:
        self.path = path
        self.offset = offset
        self.chunk = chunk
        # The unterminated last line, in the pieces it was read in: a long line growing over
        # many reads is joined once, when its newline comes, not once a read.
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._ident: tuple[int, int] | None = None

    @property
    def consumed(self) -> int:
        return self.offset - self._pending_len

    @property
    def partial(self) -> bytes:
        """The unterminated last line read so far (held back until its newline)."""
        return b"".join(self._pending)

    def skip_to_end(self) -> None:
        """Read from now on only what is appended after this call."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        self._restart((st.st_dev, st.st_ino), st.st_size)

    def read_block(self) -> bytes:
        """The next complete lines, with their newlines, as one block: about one chunk at
        the most (more for a longer line), at least one whole line when there is one; b""
        when there is none yet."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._restart(None, 0)
            return b""
        try:
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            if st.st_size < self.offset:  # cut short (or replaced by a shorter file)
                self._restart(ident, 0)
            elif ident != self._ident:
                # Another file by that name: from its start. The first look adopts the file
                # at the offset the tail was given.
                self._restart(ident, self.offset if self._ident is None else 0)
            pending = self._pending
            while True:
                data = os.pread(fd, self.chunk, self.offset)
                if not data:
                    return b""
                self.offset += len(data)
                cut = data.rfind(b"\n") + 1
                if not cut:  # only part of a (long) line so far: read on while there is more
                    pending.append(data)
                    self._pending_len += len(data)
                    continue
                pending.append(data[:cut])
                block = b"".join(pending)
                rest = data[cut:]
                self._pending, self._pending_len = ([rest] if rest else []), len(rest)
                return block
        finally:
            os.close(fd)

    def read(self) -> list[bytes]:
        """The lines (without their newlines) of the next :meth:`read_block`."""
        return self.read_block().split(b"\n")[:-1]

    def blocks(self) -> Iterator[bytes]:
        """Every block of complete lines there is now, one chunk at a time."""
        while block := self.read_block():
            yield block

    def lines(self) -> Iterator[bytes]:
        """Every complete line there is now (without its newline), one chunk at a time."""
        for block in self.blocks():
            yield from block.split(b"\n")[:-1]

    def _restart(self, ident: tuple[int, int] | None, offset: int) -> None:
        self._ident, self.offset, self._pending, self._pending_len = ident, offset, [], 0
