"""Serving the MCP server: stdio, or streamable HTTP on 127.0.0.1 behind a bearer token."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from subagents.core.procs import STOP_SIGNALS
from subagents.loopback import access_token, bearer, listen, same_secret, serve
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

    async def run_stdio() -> None:
        # The SDK's run_stdio_async, with requests it cannot parse answered (unreadable.py).
        from mcp.server.stdio import stdio_server

        from subagents.mcp.unreadable import AnswerUnreadable

        low = server.mcp._lowlevel_server
        async with stdio_server() as (read_stream, write_stream):
            reads = AnswerUnreadable(read_stream, write_stream)
            await low.run(reads, write_stream, low.create_initialization_options())

    try:
        anyio.run(_until_signalled, run_stdio)
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
        given = bearer(scope.get("headers") or [])
        if given is not None and same_secret(given, self.token):
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


def http_token(env: dict[str, str] | None = None) -> tuple[str, bool]:
    """The bearer token: ``$SUBAGENTS_MCP_TOKEN``, else ``mcp_token`` in the user config, else a
    new random one (second item True). A chosen token shorter than 16 characters is refused
    (TokenError): a guessable token on a local port is no protection."""
    return access_token("mcp_token", TOKEN_ENV, env, noun="bearer token")


def serve_http(port: int = DEFAULT_PORT) -> None:
    """Streamable HTTP on 127.0.0.1:``port`` (0: any free port) at ``/mcp``, behind a bearer token."""
    token, generated = http_token()  # a TokenError is bad input: one line, exit 2
    server = SubagentsMCP()
    guard = RequestGuard(server.mcp.streamable_http_app(host="127.0.0.1"))
    app = BearerAuth(guard, token)
    sock = listen(port)
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

    def stopping() -> None:
        # Answers the SDK cannot deliver to clients being left are expected now: no warnings.
        logging.getLogger("mcp").setLevel(logging.ERROR)
        guard.stop()

    try:
        serve(app, sock, on_stop=stopping)
    finally:
        server.close()
