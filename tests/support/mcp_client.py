"""Our MCP server through the official SDK client: in this process over the SDK's in-memory
transport (``connect``), or a spawned ``subagents mcp`` over stdio (``spawn``).

``connect`` is for what the server answers: its tools, results, progress, cancellation,
notifications. The server is built as ``subagents mcp`` builds it, in an environment that is
the test's with ``env`` over it, as the spawned server's would be; the runs it starts are
real processes all the same. ``spawn`` is for what the process itself is about: the stdio
transport, its exit, its children.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from support.environ import overlay

TIMEOUT = 60  # every test's bound, seconds


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **(extra or {})}


@asynccontextmanager
async def connect(
    env: dict[str, str], *, mode: str = "auto", args: tuple[str, ...] = (), **kw: Any
) -> AsyncIterator[Client]:
    """A client of a new server in this process (``args``: ``subagents mcp``'s, stdio's)."""
    from subagents.cli.serve import claude_session_of
    from subagents.lifecycle.notices import CLAUDE_SESSION_ENV
    from subagents.mcp import SubagentsMCP

    assert set(args) <= {"--claude-session"}, args
    with overlay(env):
        session = None
        if "--claude-session" in args:
            session = claude_session_of(os.environ.get(CLAUDE_SESSION_ENV, ""))
        server = SubagentsMCP(session=session)
        try:
            async with Client(server.mcp, mode=mode, **kw) as client:  # type: ignore[arg-type]
                yield client
        finally:
            server.close()


@asynccontextmanager
async def spawn(
    env: dict[str, str], *, mode: str = "auto", args: tuple[str, ...] = (), **kw: Any
) -> AsyncIterator[Client]:
    """A client of ``subagents mcp`` started as a process, over its stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "subagents.cli", "mcp", *args], env=server_env(env)
    )
    async with Client(params, mode=mode, **kw) as client:  # type: ignore[arg-type]
        yield client


def run(main: Callable[[], Any]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await main()

    anyio.run(bounded)


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
