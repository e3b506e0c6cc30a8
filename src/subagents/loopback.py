"""Serving an HTTP app on 127.0.0.1 to its user alone: what the MCP server's HTTP transport
and the web dashboard share. The access token (an environment variable, else a setting of
the user config, else a random one), the listening socket, the Host and Origin a request may
name, a bearer token's check, and uvicorn stopping cleanly on SIGTERM, SIGINT or SIGHUP.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import signal
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from subagents.core.procs import STOP_SIGNALS
from subagents.errors import TokenError

HOST = "127.0.0.1"
MIN_TOKEN_LENGTH = 16


def access_token(
    setting: str, env_var: str, env: Mapping[str, str] | None = None, *, noun: str = "token"
) -> tuple[str, bool]:
    """The token: ``$env_var``, else ``setting`` in the user config, else a new random one
    (second item True). A chosen token shorter than 16 characters is refused (TokenError): a
    guessable token on a local port is no protection."""
    from subagents.config import load_settings

    env = dict(os.environ) if env is None else env
    token = (getattr(load_settings(env=env), setting) or "").strip()  # the env var wins
    if token:
        if len(token) < MIN_TOKEN_LENGTH:
            where = f"${env_var}" if env.get(env_var, "").strip() else f"{setting} in the config"
            raise TokenError(
                f"the {noun} from {where} has {len(token)} characters; "
                f"use at least {MIN_TOKEN_LENGTH} (or none, for a random one)"
            )
        return token, False
    return secrets.token_urlsafe(32), True


def same_secret(given: str | bytes, expected: str | bytes) -> bool:
    """Whether two secrets are equal, in time that does not tell how much of them matched."""
    a = given.encode() if isinstance(given, str) else given
    b = expected.encode() if isinstance(expected, str) else expected
    return bool(b) and hmac.compare_digest(a, b)


def bearer(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The token of an ``Authorization: Bearer`` header among an ASGI scope's headers."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, given = value.partition(b" ")
            return given.strip() if scheme.lower() == b"bearer" else None
    return None


def allowed_hosts(port: int) -> frozenset[str]:
    """The Host headers a browser or client sends to this server: its own address by number
    or by name, with its port. Anything else (a DNS rebinding name) is refused."""
    return frozenset({f"{HOST}:{port}", f"localhost:{port}"})


def allowed_origins(port: int) -> frozenset[str]:
    return frozenset(f"http://{host}" for host in allowed_hosts(port))


def listen(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` (0: a free port). Listening before the address
    is printed: a client that connects as soon as it reads it is queued, never refused.
    Made as TCP by name: asyncio sets TCP_NODELAY only on a connection whose protocol says
    TCP, and without it a response written in two parts (head, then body) waits for the
    client's delayed ACK, ~40 ms a request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise SystemExit(
            f"subagents: cannot listen on {HOST}:{port}: {exc.strerror or exc}"
        ) from None
    return sock


def serve(app: Any, sock: socket.socket, *, on_stop: Callable[[], None] | None = None) -> None:
    """Serve ``app`` with uvicorn on ``sock`` until a stop signal, then return (exit 0): uvicorn
    would re-raise the signal, and click print "Aborted!". ``on_stop`` runs as shutdown begins
    (to end requests that would otherwise hold it up: streams, calls in flight)."""
    import anyio
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if on_stop is not None:
                on_stop()
            await super().shutdown(sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    try:
        anyio.run(lambda: Server(config).serve(sockets=[sock]))
    finally:
        sock.close()
