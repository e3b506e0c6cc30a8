"""Builders for pi json-mode stream lines, shaped like the captured real streams."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any


def usage(inp: int = 10, out: int = 5, cost: float = 0.001) -> dict[str, Any]:
    return {
        "input": inp,
        "output": out,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": inp + out,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost},
    }


def assistant(content: list[dict[str, Any]], stop: str, **extra: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "mock",
        "model": "mock-model",
        "usage": usage(),
        "stopReason": stop,
        **extra,
    }


def start() -> list[dict[str, Any]]:
    return [{"emit": {"type": "agent_start"}}, {"emit": {"type": "turn_start"}}]


def text_end(text: str, stop: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "emit": {
            "type": "message_end",
            "message": assistant([{"type": "text", "text": text}], stop, **extra),
        }
    }


def partial(text: str) -> dict[str, Any]:
    msg = assistant([{"type": "text", "text": text}], "stop")
    return {
        "emit": {
            "type": "message_update",
            "assistantMessageEvent": {"type": "text_delta", "partial": msg},
            "message": msg,
        }
    }


def tool_use(call_id: str = "c1", command: str = "ls") -> list[dict[str, Any]]:
    call = {"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": command}}
    return [
        {"emit": {"type": "message_end", "message": assistant([call], "toolUse")}},
        {
            "emit": {
                "type": "tool_execution_start",
                "toolCallId": call_id,
                "toolName": "bash",
                "args": {"command": command},
            }
        },
    ]


def tool_end(
    call_id: str = "c1", output: str = "a.txt\n", is_error: bool = False
) -> list[dict[str, Any]]:
    return [
        {
            "emit": {
                "type": "tool_execution_end",
                "toolCallId": call_id,
                "toolName": "bash",
                "result": {"content": [{"type": "text", "text": output}]},
                "isError": is_error,
            }
        },
        {"emit": {"type": "turn_end"}},
        {"emit": {"type": "turn_start"}},
    ]


def end() -> list[dict[str, Any]]:
    return [{"emit": {"type": "turn_end"}}, {"emit": {"type": "agent_end", "messages": []}}]


def answer(text: str) -> list[dict[str, Any]]:
    """A whole successful run: one tool call, then the final text."""
    return [*start(), *tool_use(), *tool_end(), text_end(text), *end()]


def shell_pi(path: Path, text: str = "ok") -> dict[str, str]:
    """A pi stand-in at ``path``: a shell script that prints one final answer at once; the
    environment that makes it the CLI's pi."""
    line = json.dumps(text_end(text)["emit"])
    path.write_text(f"#!/bin/sh\necho {shlex.quote(line)}\n")
    path.chmod(0o755)
    return {"SUBAGENTS_PI_BIN": str(path)}
