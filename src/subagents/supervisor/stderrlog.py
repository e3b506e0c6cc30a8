"""``stderr.log``, capped: a child's stderr is kept whole up to ``HEAD + TAIL`` bytes; beyond
that the file keeps the first ``HEAD`` bytes, a marker line saying how many bytes were
dropped, and the last ``TAIL`` bytes. Disk use and memory stay bounded whatever the child
writes. Standard library only (the supervisor uses it).
"""

from __future__ import annotations

import contextlib
import os

HEAD = 1 << 20
TAIL = 1 << 20


class StderrLog:
    def __init__(self, fd: int, head: int = HEAD, tail: int = TAIL) -> None:
        self.fd = fd  # open for writing, at offset 0
        self.head = head
        self.tail = tail
        self.total = 0
        self._last = bytearray()  # at least the last ``tail`` bytes seen

    def write(self, data: bytes | memoryview) -> None:
        cap = self.head + self.tail
        if self.total < cap:
            with contextlib.suppress(OSError):
                os.write(self.fd, data[: cap - self.total])
        self.total += len(data)
        last = self._last
        last += data
        if len(last) > 2 * self.tail:
            del last[: len(last) - self.tail]

    def close(self) -> None:
        """Write the marker and the tail when something was dropped, then close."""
        dropped = self.total - self.head - self.tail
        with contextlib.suppress(OSError):
            if dropped > 0:
                os.ftruncate(self.fd, self.head)
                os.lseek(self.fd, self.head, os.SEEK_SET)
                marker = f"\n[subagents: {dropped} bytes of stderr dropped here; the first {self.head} and the last {self.tail} bytes are kept]\n"
                os.write(self.fd, marker.encode())
                os.write(self.fd, bytes(self._last[-self.tail :]))
        with contextlib.suppress(OSError):
            os.close(self.fd)
