"""Soak: a long-lived MCP server runs 200 jobs one after another and 50 at once, and is left
as it started — no process of any run alive, no file descriptor gained, no temp file."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client, StdioServerParameters
from support.checks import live_descendants

pytestmark = pytest.mark.process

SEQUENTIAL = int(os.environ.get("SOAK_N", "200"))
CONCURRENT = 50
ANSWER = {
    "type": "message_end",
    "message": {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "stopReason": "stop",
        "model": "m",
    },
}


def _tiny_pi(directory: Path) -> Path:
    # A shell child, not a Python one: the soak measures subagents, not interpreter starts.
    path = directory / "pi"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{json.dumps(ANSWER)}'\n")
    path.chmod(0o755)
    return path


def _server(client_pid: int) -> psutil.Process:
    for child, _, cmdline in live_descendants(client_pid):
        if "subagents.cli" in " ".join(cmdline) and "mcp" in cmdline:
            return child
    raise AssertionError("no MCP server process found")


def test_soak_leaves_nothing_behind(tmp_path: Path, isolated_state: Path) -> None:
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(_tiny_pi(tmp_path))}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "subagents.cli", "mcp"], env=env
    )
    figures: dict[str, float] = {}

    async def call(client: Client, i: int) -> None:
        result = await client.call_tool("subagent", {"task": f"task {i}"})
        assert not result.is_error, result.content
        assert result.structured_content and result.structured_content["status"] == "completed"

    async def main() -> None:
        with anyio.fail_after(280):
            await soak()

    async def soak() -> None:
        async with Client(params) as client:  # type: ignore[arg-type]
            server = _server(os.getpid())
            for i in range(5):  # warm up: imports, the index, the session log
                await call(client, i)
            fds_before = server.num_fds()
            t0 = time.monotonic()
            for i in range(SEQUENTIAL):
                await call(client, i)
            figures["sequential_s"] = time.monotonic() - t0
            t0 = time.monotonic()
            async with anyio.create_task_group() as tg:
                for i in range(CONCURRENT):
                    tg.start_soon(call, client, i)
            figures["concurrent_s"] = time.monotonic() - t0
            # Every run's supervisor and child are gone (bounded wait: reaping is async).
            deadline = time.monotonic() + 30
            while server.children(recursive=True) and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            left = [(c.pid, c.status(), c.cmdline()[:4]) for c in server.children(recursive=True)]
            assert left == []
            # Its descriptors back to what they were (bounded wait: the followers' inotify
            # descriptors are closed by a thread of their own, a few ms each, after the runs).
            deadline = time.monotonic() + 30
            while server.num_fds() > fds_before + 2 and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            fds_after = server.num_fds()
            figures["fds_before"], figures["fds_after"] = fds_before, fds_after
            assert fds_after <= fds_before + 2, (fds_before, fds_after)

    anyio.run(main)
    runs = list((isolated_state / "runs").iterdir())
    assert len(runs) == 5 + SEQUENTIAL + CONCURRENT
    leftovers = [
        p for p in isolated_state.rglob("*") if p.name.endswith(".tmp") or p.name == ".reserve"
    ]
    assert leftovers == []
    print(f"soak figures: {figures}")
