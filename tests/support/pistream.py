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


MOCK_500 = '500: {"message":"mock server error","type":"server_error","code":null}'
"""pi's words for the mock's failed request (``Script(error_status=500)``)."""


def error_end(message: str = MOCK_500) -> dict[str, Any]:
    """A failed model request, as pi ends a run with it once its retries are over."""
    msg = assistant([], "error", errorMessage=message, usage=usage(0, 0, 0))
    return {"emit": {"type": "message_end", "message": msg}}


Played = dict[str, Any] | list[str]
"""A stand-in's step: an event (an ``{"emit": ...}`` of the builders above) or a command."""


def replies(text: str, command: list[str] | None = None, output: str = "") -> list[Played]:
    """A child's whole run as the mock model scripts it: ``text`` at once; or first
    ``command`` as its bash tool call (run for real, where the child works, and waited for;
    it printed ``output``), then ``text``."""
    if command is None:
        return [*start(), text_end(text), *end()]
    shown = shlex.join(command)
    tool = [*tool_use(command=shown), command, *tool_end(output=output)]
    return [*start(), *tool, text_end(text), *end()]


def fails(message: str = MOCK_500) -> list[Played]:
    """A child's run whose every model request fails."""
    return [*start(), error_end(message), *end()]


def stand_in(path: Path, **providers: list[Played]) -> dict[str, str]:
    """A pi stand-in at ``path`` for children that are not a test's subject (a real pi's
    start is ~0.9 CPU-s): a shell script that plays the steps of the provider its
    ``--provider`` names, its messages from that provider and free (the mock has no
    prices). ``--version`` alone is answered with no version, so the engine runs it as a pi
    without live input (json mode). The environment that makes it the CLI's pi."""
    cases = []
    for provider, steps in providers.items():
        lines = []
        for step in steps:
            if isinstance(step, list):
                lines.append(f"  {shlex.join(step)} >/dev/null")
                continue
            event = json.loads(json.dumps(step["emit"]))
            message = event.get("message", {})
            if message.get("role") == "assistant":  # from its provider, priced as the mock is
                message["provider"] = provider
                message["usage"]["cost"]["total"] = 0
            lines.append(f"  echo {shlex.quote(json.dumps(event))}")
        cases.append(f"{shlex.quote(provider)})\n" + "\n".join(lines) + "\n  ;;")
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$#" = 1 ] && [ "$1" = "--version" ]; then echo "pi stand-in"; exit 0; fi\n'
        'provider=""; last=""\n'
        'for arg in "$@"; do [ "$last" = "--provider" ] && provider=$arg; last=$arg; done\n'
        'case "$provider" in\n' + "\n".join(cases) + "\n"
        '*) echo "pi stand-in: no steps for provider $provider" >&2; exit 2 ;;\n'
        "esac\n"
    )
    path.chmod(0o755)
    return {"SUBAGENTS_PI_BIN": str(path)}
