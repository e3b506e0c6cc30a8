"""The child's stdin, held by the supervisor, its only writer: what is written goes out at
once as far as the pipe takes it, the rest waits in a buffer written when the pipe has
room (the event loop's ``EVENT_WRITE``), so a long message never stalls the reading of
the child's output. Closed after what is buffered (the child sees EOF: pi, claude and codex
end then). A child that is gone (EPIPE) drops what is left. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import selectors


class InputWriter:
    def __init__(self, fd: int, sel: selectors.BaseSelector) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.sel = sel
        self.buffer = bytearray()
        self.closing = False  # no more writes taken; closed once the buffer is out
        self.closed = False
        self.broken = False  # the child stopped reading (EPIPE)
        self._watched = False

    @property
    def open(self) -> bool:
        """Whether a write is still taken."""
        return not (self.closing or self.closed)

    def write(self, data: bytes) -> bool:
        """Queue ``data`` and write what the pipe takes now; False when no longer open."""
        if not self.open:
            return False
        self.buffer += data
        self._flush()
        return True

    def close(self) -> None:
        """Close once what is buffered is written (at once when nothing is)."""
        self.closing = True
        if not self.buffer:
            self._close()

    def on_writable(self) -> None:
        self._flush()
        if self.closing and not self.buffer:
            self._close()

    def _flush(self) -> None:
        buffer = self.buffer
        while buffer and not self.closed:
            try:
                n = os.write(self.fd, buffer)
            except BlockingIOError:
                break
            except OSError:  # EPIPE: the child is gone or closed its stdin
                self.broken = True
                buffer.clear()
                self._close()
                return
            del buffer[:n]
        self._watch(bool(buffer) and not self.closed)

    def _watch(self, on: bool) -> None:
        if on and not self._watched:
            self.sel.register(self.fd, selectors.EVENT_WRITE, self)
        elif self._watched and not on:
            self.sel.unregister(self.fd)
        self._watched = on

    def _close(self) -> None:
        if self.closed:
            return
        self._watch(False)
        self.closed = self.closing = True
        with contextlib.suppress(OSError):
            os.close(self.fd)
