"""Issue 39, item 5: the MCP server answers a request holding a lone surrogate with an error
naming the field, as the command line and the web refuse the same text, and goes on serving.
(The SDK's stdio transport cannot parse such a line and used to drop it unanswered.)"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
# A JSON escape the standard library reads (a lone surrogate), written as the raw line.
CALL = (
    '{"jsonrpc":"2.0","id":"call-7","method":"tools/call",'
    '"params":{"name":"subagent","arguments":{"task":"hi \\ud800 there"}}}'
)
NOTIFY = '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"\\udc80"}}'

pytestmark = pytest.mark.process


class Stdio:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "subagents.cli", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no reply within {timeout} s"
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def server() -> Any:
    stdio = Stdio()
    try:
        stdio.send(INIT)
        assert stdio.reply()["id"] == 1
        stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield stdio
    finally:
        stdio.close()


def test_a_request_with_a_lone_surrogate_is_answered_with_an_error(
    server: Stdio, isolated_state: Path
) -> None:
    server.send(NOTIFY)  # a notification gets no answer, and breaks nothing
    server.send(CALL)
    reply = server.reply()
    assert reply["id"] == "call-7"
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == (
        "params.arguments.task: not valid UTF-8 text at character 3"
    )
    # the server goes on, and nothing was started
    server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
    listed = server.reply()
    assert listed["id"] == 8 and any(t["name"] == "subagent" for t in listed["result"]["tools"])
    assert not (isolated_state / "jobs").exists()


def test_the_command_line_refuses_the_same_text_in_its_words() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "subagents.cli", "run", "hi \udc80 there"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"not valid UTF-8 text" in done.stderr
