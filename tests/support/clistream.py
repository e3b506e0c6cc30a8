"""The real CLIs' own output streams (what a CLI prints, before any normalizing), checked
the same way whether a test ran the CLI itself (tests/test_mock_clis.py) or the supervisor
did and kept the stream verbatim in ``raw.jsonl`` (tests/test_e2e_backends.py)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

FINAL = "Listed: {tool_output}."
FINAL_TEXT = "Listed: a.txt, b.py."


@dataclass
class Ran:
    rc: int | None
    events: list[dict[str, Any]]
    stderr: str
    requests: int


def parse_stream(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.split("\n"):
        if line.strip():
            with contextlib.suppress(ValueError):  # a non-JSON line is noise
                events.append(json.loads(line))
    return events


def claude_blocks(events: list[dict[str, Any]], role: str, kind: str) -> list[dict[str, Any]]:
    """The content blocks of one kind in claude's messages of one role (a message whose
    content is plain text, as a task given on stdin is echoed, has none)."""
    return [
        b
        for e in events
        if e["type"] == role and isinstance(e["message"]["content"], list)
        for b in e["message"]["content"]
        if b.get("type") == kind
    ]


def check_success(name: str, ran: Ran) -> None:
    """A shell tool call ran `ls` (its output shows a.txt), then the scripted final text."""
    ev = ran.events
    assert ran.rc == 0, ran.stderr[-2000:]
    if name == "claude":
        (call,) = claude_blocks(ev, "assistant", "tool_use")
        assert call["name"] == "Bash" and call["input"]["command"] == "ls"
        (res,) = claude_blocks(ev, "user", "tool_result")
        assert res["tool_use_id"] == call["id"] and res["is_error"] is False
        assert "a.txt" in str(res["content"]) and "b.py" in str(res["content"])
        last = ev[-1]
        assert last["type"] == "result" and last["is_error"] is False
        assert last["subtype"] == "success" and last["result"] == FINAL_TEXT
        assert last["usage"]["output_tokens"] > 0
    elif name == "codex":
        (cmd,) = [
            e["item"]
            for e in ev
            if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
        ]
        assert cmd["command"].endswith("ls") and cmd["exit_code"] == 0
        assert cmd["aggregated_output"].split() == ["a.txt", "b.py"]
        (msg,) = [
            e["item"]
            for e in ev
            if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
        ]
        assert msg["text"] == FINAL_TEXT
        assert ev[-1]["type"] == "turn.completed"
        assert ev[-1]["usage"]["input_tokens"] == 20  # two requests of 10
    elif name == "gemini":
        (use,) = [e for e in ev if e["type"] == "tool_use"]
        assert use["tool_name"] == "run_shell_command" and use["parameters"]["command"] == "ls"
        (res,) = [e for e in ev if e["type"] == "tool_result"]
        assert res["tool_id"] == use["tool_id"] and res["status"] == "success"
        assert res["output"].split() == ["a.txt", "b.py"]
        text = "".join(
            e["content"] for e in ev if e["type"] == "message" and e["role"] == "assistant"
        )
        assert text == FINAL_TEXT
        assert ev[-1]["type"] == "result" and ev[-1]["status"] == "success"
        assert ev[-1]["stats"]["tool_calls"] == 1
    else:
        (tool,) = [e["part"] for e in ev if e["type"] == "tool_use"]
        assert tool["tool"] == "bash" and tool["state"]["input"] == {"command": "ls"}
        assert tool["state"]["status"] == "completed"
        assert tool["state"]["output"].split() == ["a.txt", "b.py"]
        (text,) = [e["part"]["text"] for e in ev if e["type"] == "text"]
        assert text == FINAL_TEXT
        finishes = [e["part"]["reason"] for e in ev if e["type"] == "step_finish"]
        assert finishes == ["tool-calls", "stop"]
    # the turn with the tool call and the final one (opencode adds a title request)
    assert ran.requests == (3 if name == "opencode" else 2)


def check_server_error(name: str, ran: Ran, message: str) -> None:
    """Every model request answered HTTP 500 with ``message``: the CLI's stream says so and
    it exits non-zero (claude, codex and gemini configured not to retry)."""
    ev = ran.events
    if name == "claude":
        last = ev[-1]
        assert last["type"] == "result" and last["is_error"] is True
        assert "500" in last["result"] and message in last["result"]
        assert ran.rc == 1 and ran.requests == 1
    elif name == "codex":
        assert ev[-1]["type"] == "turn.failed" and ev[-1]["error"]["message"]
        assert any(e["type"] == "error" for e in ev)
        assert ran.rc == 1 and ran.requests == 1
    elif name == "gemini":
        last = ev[-1]
        assert last["type"] == "result" and last["status"] == "error"
        assert message in last["error"]["message"]
        assert ran.rc == 500 % 256  # gemini exits with the HTTP status (mod 256)
        assert ran.requests == 1
    else:
        (err,) = [e for e in ev if e["type"] == "error"]
        assert err["error"]["name"] == "APIError"
        assert err["error"]["data"]["message"] == message
        assert err["error"]["data"]["statusCode"] == 500
        assert not [e for e in ev if e["type"] == "step_finish"]
        assert ran.rc == 1
