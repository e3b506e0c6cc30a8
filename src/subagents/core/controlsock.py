"""A run's control endpoint, both ends: ``RUN_DIR/control.sock``, a Unix stream socket the
run's supervisor listens on (0600, in a 0700 run directory) and ``send`` talks to. One
request per connection, one JSON line each way, then close:

    {"v": 1, "op": "send", "id": ID, "mode": "steer" | "follow-up", "text": TEXT}
    {"v": 1, "op": "limit", "kind": KIND, "limit": L, "used": U}   (a job's budget reached)
    → {"id": ID, "receipt": "queued" | "delivered" | "refused", "reason"?: WHY}

A socket's path holds at most 107 bytes; a longer run directory is reached through
``/proc/self/fd/N`` of an open descriptor of it (Linux), by both ends. Standard library
only: the supervisor imports it (``socket`` itself only once the child is spawned).
"""

from __future__ import annotations

import contextlib
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from subagents.types import ControlRequest, JsonObject

SOCKET_NAME = "control.sock"
VERSION = 1
# The longest request line: a message of at most 1 MiB (core.inputs.MAX_MESSAGE_BYTES),
# JSON-escaped (a control character becomes six bytes).
MAX_REQUEST_BYTES = 8 << 20
# A path sun_path takes (108 bytes with its NUL).
_MAX_PATH = 107


def socket_path(run_dir: Path) -> Path:
    return run_dir / SOCKET_NAME


@contextlib.contextmanager
def _address(run_dir: Path) -> Iterator[str]:
    """The address of the run's socket: its path, or for a long one the same file through
    an open descriptor of the run directory (held while the address is used)."""
    path = str(socket_path(run_dir))
    if len(path.encode()) <= _MAX_PATH:
        yield path
        return
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{SOCKET_NAME}"
    finally:
        os.close(fd)


def listen(run_dir: Path) -> socket.socket:
    """Bind and listen on the run's socket, readable and writable by its owner only (the
    umask is narrowed while it is made, so it never exists with wider modes)."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path(run_dir))  # a stale one (a supervisor that died)
        old = os.umask(0o177)
        try:
            with _address(run_dir) as address:
                sock.bind(address)
        finally:
            os.umask(old)
        os.chmod(socket_path(run_dir), 0o600)
        # Many senders at once (a job's runs, a fan-out of `send`) queue here rather than
        # being turned away; the kernel caps it at net.core.somaxconn.
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def request(run_dir: Path, payload: ControlRequest, timeout: float) -> JsonObject:
    """Send one request, return the reply. OSError when no supervisor listens (or it does
    not answer within ``timeout``), ValueError when the reply is not a JSON object."""
    import json
    import socket

    line = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        with _address(run_dir) as address:
            _connect(sock, address, timeout)
        sock.sendall(line)
        reply = _read_line(sock.recv)
    obj = json.loads(reply)
    if not isinstance(obj, dict):
        raise ValueError("the reply is not a JSON object")
    return obj


def _connect(sock: socket.socket, address: str, timeout: float) -> None:
    """Connect, retrying while the listener's backlog is full (a Unix socket says EAGAIN at
    once rather than waiting): the supervisor is busy, not gone. Bounded by ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            sock.connect(address)
            return
        except BlockingIOError:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _read_line(recv: Callable[[int], bytes], limit: int = 1 << 16) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("the reply is too long")
    if b"\n" not in data:
        raise ConnectionResetError("the supervisor closed the connection without a reply")
    return data.split(b"\n", 1)[0]
