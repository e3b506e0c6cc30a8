"""Claude Code's stream-json and requests as tests build and read them: a fake claude's
steps, the content blocks of its lines, the text of a request's last user message; the
environment a real claude runs the plugin's MCP server with."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from subagents.config import Settings
from subagents.runs import RunHandle, RunRequest, start
from support.fake import Fake

# A real claude with the plugin (its MCP server, `subagents mcp`): the tool offered at once (a
# mock model cannot search for it), the server up before the first prompt, however long its
# start takes on a loaded machine (claude waits 5 s by default, then lists it as pending).
PLUGIN_SERVER_ENV = {
    "ENABLE_TOOL_SEARCH": "false",
    "MCP_CONNECTION_NONBLOCKING": "false",
    "MCP_CONNECT_TIMEOUT_MS": "120000",
}


def claude_steps(gate: Path, echo: str | None = None) -> list[dict[str, Any]]:
    """A fake claude: a tool call, then it waits on ``gate``; echoes ``echo`` as claude
    echoes a message it takes (``--replay-user-messages``), then its result."""
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    usage = {"input_tokens": 1, "output_tokens": 1}
    steps: list[dict[str, Any]] = [
        {"emit": {"type": "system", "subtype": "init", "session_id": "s1", "model": "m"}},
        {"emit": {"type": "assistant", "message": {"id": "a1", "model": "m", "content": [call], "usage": usage}}},
        {"wait_for": str(gate)},
    ]  # fmt: skip
    if echo is not None:
        message = {"role": "user", "content": echo}
        steps.append({"emit": {"type": "user", "isReplay": True, "message": message}})
    result = {"type": "result", "subtype": "success", "result": "ok", "usage": usage}
    return [*steps, {"emit": result}]


# What claude's permission server does, run by a fake claude: ask the run's supervisor
# (`claudeprompt.decide`, the server's own call) and write the answer to ./asked.
ASK = (
    "import json, os, sys; from subagents.backends.claudeprompt import decide;"
    " from subagents.core.paths import runs_dir, state_home;"
    " run_dir = runs_dir(state_home()) / os.environ['SUBAGENTS_RUN_ID'];"
    " print(decide(run_dir, 60, sys.argv[1], json.loads(sys.argv[2])), file=open('asked', 'w'))"
)


def asking_steps(
    tool: str = "Bash", tool_input: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A fake claude that asks to run its tool (ASK; ``Bash`` with ``git push`` unless
    told), waits for the answer, then ends."""
    import sys

    tool_input = tool_input or {"command": "git push"}
    call = {"type": "tool_use", "id": "t1", "name": tool, "input": tool_input}
    usage = {"input_tokens": 1, "output_tokens": 1}
    return [
        {"emit": {"type": "system", "subtype": "init", "session_id": "s1", "model": "m"}},
        {"emit": {"type": "assistant", "message": {"id": "a1", "model": "m", "content": [call], "usage": usage}}},
        {"run": [sys.executable, "-c", ASK, tool, json.dumps(tool_input)]},
        {"emit": {"type": "result", "subtype": "success", "result": "ok", "usage": usage}},
    ]  # fmt: skip


def blocks(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The content blocks of type ``kind`` in claude's assistant and user lines."""
    out: list[dict[str, Any]] = []
    for e in events:
        msg = e.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") == kind:
                out.append(b)
    return out


def block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(b) for b in content)
    if isinstance(content, dict):
        return str(content.get("text", ""))
    return ""


def strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def last_user_text(req: dict[str, Any]) -> str:
    """Every text of the request's last user message: Claude Code merges the hook's context
    into it, also into the content of a tool result it ends with."""
    users = [m for m in req.get("messages") or [] if m.get("role") == "user"]
    return "\n".join(strings(users[-1].get("content")))


def start_claude(fake: Fake, steps: list[dict[str, Any]], home: Path | None = None) -> RunHandle:
    env = {**os.environ, "SUBAGENTS_CLAUDE_BIN": str(fake.launcher)}
    req = RunRequest(task="do it", backend="claude", cwd=str(fake.dir), env=fake.env(steps))
    settings = Settings(grace=fake.grace, kill_grace=fake.kill_grace)
    return start(req, settings, env=env, home=home)


def events(handle: RunHandle) -> list[dict[str, Any]]:
    path = handle.run_dir / "events.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]
