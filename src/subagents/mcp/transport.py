"""Serving the MCP server: stdio, or streamable HTTP on 127.0.0.1 behind a bearer token."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from subagents.core.procs import STOP_SIGNALS
from subagents.errors import TokenError
from subagents.mcp.foreground import CLIENT_GONE
from subagents.mcp.server import SubagentsMCP

DEFAULT_PORT = 8765


TOKEN_ENV = "SUBAGENTS_MCP_TOKEN"


async def _until_signalled(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main``; SIGTERM/SIGINT cancel it cleanly, so foreground jobs are aborted, not orphaned."""
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch_signals)
        await main()
        tg.cancel_scope.cancel()


def serve_stdio(session: str | None = None) -> None:
    server = SubagentsMCP(session=session)
    try:
        anyio.run(_until_signalled, server.mcp.run_stdio_async)
    finally:
        server.close()


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, else 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        auth = b""
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                auth = value
                break
        scheme, _, given = auth.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "invalid_token",
                "error_description": "missing or wrong bearer token (see SUBAGENTS_MCP_TOKEN)",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="subagents", error="invalid_token"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """ASGI middleware around the SDK's app: what its streamable HTTP transport leaves undone.

    - A client gone: each request's ``CLIENT_GONE`` event is set on its ``http.disconnect``, so
      a foreground call whose client went away aborts its job (the 2025-era transport leaves
      the tool running; the 2026 one cancels it, and the abort follows from that too).
    - Shutdown: ``stop()`` ends the requests in flight at once (their foreground jobs are
      aborted) instead of uvicorn cancelling them after its grace period, with a traceback.
    - An open stream: sse-starlette stops its streams on shutdown without the final body
      ("ASGI callable returned without completing response"); the empty last chunk is sent.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._in_flight: set[anyio.CancelScope] = set()
        self._stopping = False

    def stop(self) -> None:
        self._stopping = True
        for cancel in list(self._in_flight):
            cancel.cancel()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        gone = anyio.Event()
        sent = {"started": False, "complete": False}

        async def watching_receive() -> Any:
            message = await receive()
            if message.get("type") == "http.disconnect":
                gone.set()
            return message

        async def tracking_send(message: Any) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                sent["started"] = True
            elif kind == "http.response.body" and not message.get("more_body", False):
                sent["complete"] = True
            await send(message)

        with anyio.CancelScope() as cancel:
            self._in_flight.add(cancel)
            if self._stopping:
                cancel.cancel()
            try:
                await self.app({**scope, CLIENT_GONE: gone}, watching_receive, tracking_send)
            finally:
                self._in_flight.discard(cancel)
        if gone.is_set() or sent["complete"]:
            return
        with contextlib.suppress(Exception):  # the connection is already gone
            if sent["started"]:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            elif cancel.cancelled_caught:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 503,
                        "headers": [(b"content-length", b"0"), (b"connection", b"close")],
                    }
                )
                await send({"type": "http.response.body", "body": b""})


MIN_TOKEN_LENGTH = 16


def http_token(env: dict[str, str] | None = None) -> tuple[str, bool]:
    """The bearer token: ``$SUBAGENTS_MCP_TOKEN``, else ``mcp_token`` in the user config, else a
    new random one (second item True). A chosen token shorter than 16 characters is refused
    (TokenError): a guessable token on a local port is no protection."""
    from subagents.config import load_settings

    env = dict(os.environ) if env is None else env
    token = (load_settings(env=env).mcp_token or "").strip()  # the env var overrides the file
    if token:
        if len(token) < MIN_TOKEN_LENGTH:
            where = f"${TOKEN_ENV}" if env.get(TOKEN_ENV, "").strip() else "mcp_token in the config"
            raise TokenError(
                f"the bearer token from {where} has {len(token)} characters; "
                f"use at least {MIN_TOKEN_LENGTH} (or none, for a random one)"
            )
        return token, False
    return secrets.token_urlsafe(32), True


def serve_http(port: int = DEFAULT_PORT) -> None:
    """Streamable HTTP on 127.0.0.1:``port`` (0: any free port) at ``/mcp``, behind a bearer token."""
    import uvicorn

    token, generated = http_token()  # a TokenError is bad input: one line, exit 2
    server = SubagentsMCP()
    guard = RequestGuard(server.mcp.streamable_http_app(host="127.0.0.1"))
    app = BearerAuth(guard, token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        # Listening before the address is printed: a client that connects as soon as it reads
        # it is queued until uvicorn accepts, never refused.
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise SystemExit(
            f"subagents: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"
        ) from None
    actual = sock.getsockname()[1]
    print(
        f"subagents mcp: serving streamable HTTP at http://127.0.0.1:{actual}/mcp",
        file=sys.stderr,
        flush=True,
    )
    if generated:
        print(
            f"subagents mcp: bearer token (set {TOKEN_ENV} to choose one): {token}",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(f"subagents mcp: bearer token from {TOKEN_ENV}", file=sys.stderr, flush=True)

    class Server(uvicorn.Server):
        """uvicorn's graceful shutdown on SIGTERM/SIGINT/SIGHUP, then a plain return (exit 0),
        as over stdio: uvicorn would re-raise the signal, and click print "Aborted!"."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Answers the SDK cannot deliver to clients being left are expected now: no warnings.
            logging.getLogger("mcp").setLevel(logging.ERROR)
            guard.stop()
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
        server.close()
        sock.close()
