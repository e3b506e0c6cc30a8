"""The run's control endpoint, the supervisor's side: ``RUN_DIR/control.sock``
(``core.controlsock``) served in the supervisor's one event loop. Each connection brings one
request line and gets one reply line; a request is handed to ``on_request`` with a
``Reply`` to answer it with, now or later (a message's receipt comes from the child's
stream); what it returns for the run to do is what ``on_ready`` returns. Nothing here blocks: a connection that does not send a whole request in time, or
whose reply is not given in time, is answered and closed by the loop's deadlines.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import time

from subagents.core import controlsock

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from pathlib import Path

    from _typeshed import FileDescriptorLike

    from subagents.supervisor.phase import Action
    from subagents.types import ControlReply, JsonObject

# How long a client may take to send its request, and how long a reply may wait for the
# child's first receipt before the supervisor answers with what it knows.
REQUEST_WITHIN = 10.0
RECEIPT_WITHIN = 3.0


class Reply:
    """The answer to one request, given once; ``fallback`` is what is answered when the
    deadline passes first."""

    def __init__(self, conn: socket.socket, server: ControlServer) -> None:
        self.conn = conn
        self.server = server
        self.done = False
        self.deadline = time.monotonic() + REQUEST_WITHIN
        self.fallback: ControlReply = {"receipt": "refused", "reason": "no request came"}
        self.buffer = b""

    def wait(self, fallback: ControlReply, within: float = RECEIPT_WITHIN) -> None:
        """No answer yet: give ``fallback`` if none comes within ``within`` seconds."""
        self.fallback = fallback
        self.deadline = time.monotonic() + within

    def send(self, answer: ControlReply) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError):
            # A small line on a fresh socket: it fits its buffer, the write cannot block.
            self.conn.send(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
        self.server.drop(self)


class ControlServer:
    def __init__(
        self, run_dir: Path, on_request: Callable[[JsonObject, Reply], Action | None]
    ) -> None:
        self.run_dir = run_dir
        self.on_request = on_request
        self.sock: socket.socket | None = None
        self.sel: selectors.BaseSelector | None = None
        self.open: dict[int, Reply] = {}

    def listen(self, sel: selectors.BaseSelector) -> str | None:
        """Start listening; a problem as one line (the run goes on without the endpoint)."""
        try:
            self.sock = controlsock.listen(self.run_dir)
        except OSError as exc:
            return f"no control endpoint ({controlsock.SOCKET_NAME}): {exc.strerror or exc}"
        self.sel = sel
        sel.register(self.sock, selectors.EVENT_READ, self)
        return None

    def on_ready(self, fileobj: FileDescriptorLike) -> Action | None:
        if fileobj is self.sock:
            self._accept()
            return None
        reply = self.open.get(fileobj if isinstance(fileobj, int) else fileobj.fileno())
        return self._read(reply) if reply is not None else None

    def _accept(self) -> None:
        assert self.sock is not None and self.sel is not None
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            conn.setblocking(False)
            reply = Reply(conn, self)
            self.open[conn.fileno()] = reply
            self.sel.register(conn, selectors.EVENT_READ, self)

    def _read(self, reply: Reply) -> Action | None:
        try:
            data = reply.conn.recv(1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            self.drop(reply)
            return None
        reply.buffer += data
        line, newline, _ = reply.buffer.partition(b"\n")
        if not newline:
            if len(reply.buffer) > controlsock.MAX_REQUEST_BYTES:
                reply.send({"receipt": "refused", "reason": "the request is too long"})
            return None
        self._stop_reading(reply)
        try:
            request = json.loads(line)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            reply.send({"receipt": "refused", "reason": "the request is not a JSON object"})
            return None
        return self.on_request(request, reply)

    def _stop_reading(self, reply: Reply) -> None:
        if self.sel is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(reply.conn)
        reply.buffer = b""

    def drop(self, reply: Reply) -> None:
        self.open.pop(reply.conn.fileno(), None)
        self._stop_reading(reply)
        with contextlib.suppress(OSError):
            reply.conn.close()
        reply.done = True

    def next_deadline(self) -> float | None:
        return min((r.deadline for r in self.open.values()), default=None)

    def on_deadlines(self, now: float) -> None:
        for reply in [r for r in self.open.values() if now >= r.deadline]:
            reply.send(reply.fallback)

    def close(self, reason: str) -> None:
        """The run is over: every open request is refused with ``reason``, the socket goes."""
        for reply in list(self.open.values()):
            reply.send({"receipt": "refused", "reason": reason})
        if self.sock is not None:
            if self.sel is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self.sel.unregister(self.sock)
            self.sock.close()
            self.sock = None
            with contextlib.suppress(OSError):
                controlsock.socket_path(self.run_dir).unlink()
