"""A pseudo-terminal for a process's output: what a user's terminal would receive."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
import threading
from types import TracebackType


class Terminal:
    """A ``cols`` x ``rows`` pty whose other side is read (drained) into ``output``.

    Give ``slave`` to the process as its stdout/stderr; after the ``with`` block (every
    writer gone) ``output`` holds all it wrote."""

    def __init__(self, cols: int = 100, rows: int = 30) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.cols, self.rows = cols, rows
        self._seen = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 1 << 16)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            self._seen.extend(chunk)

    def env(self) -> dict[str, str]:
        """Environment for a program on this terminal (rich reads the size from it too)."""
        return {"TERM": "xterm-256color", "COLUMNS": str(self.cols), "LINES": str(self.rows)}

    @property
    def output(self) -> bytes:
        return bytes(self._seen)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.close(self.slave)
        self._reader.join(timeout=30)
        os.close(self.master)
