"""A spawned ``subagents mcp`` over stdio, through the official MCP SDK client."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

TIMEOUT = 60  # every test's bound, seconds


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **(extra or {})}


@asynccontextmanager
async def connect(
    env: dict[str, str], *, mode: str = "auto", args: tuple[str, ...] = (), **kw: Any
) -> AsyncIterator[Client]:
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
