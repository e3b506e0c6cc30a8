"""The MCP permission server a claude child asks before it acts (``--permission-prompt-tool
mcp__subagents__approve``, started by claude from ``--mcp-config``): a stdio MCP server with
one tool, ``approve``, whose call waits for the run's decision (docs/approvals.md).

Each call goes to the run's supervisor over its control endpoint (``op: approval``) and
waits there; the supervisor lets it through by a rule, or writes it to the run's inbox and
answers once it is decided (or denied at its timeout). The answer is what claude's
permission prompt tool returns: ``{"behavior": "allow", "updatedInput": …}`` or
``{"behavior": "deny", "message": …}``. A supervisor that cannot be reached is a denial.
claude's own question tool (``AskUserQuestion``) asks here too: its questions wait in the
inbox as a question, and the answers go back in ``updatedInput`` (``answers``, keyed by
each question's text), which claude hands the model as the user's.

Run as ``python -m subagents.backends.claudeprompt RUN_DIR TIMEOUT``. Standard library only
(it starts with every tool call claude may ask about); JSON-RPC lines on stdin and stdout,
each call answered on a thread of its own, so one waiting call holds up no other.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from subagents.core import controlsock, questions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from subagents.types import JsonObject, JsonValue

SERVER = "subagents"
TOOL = "approve"
# The name claude is given for it (``mcp__<server>__<tool>``).
PROMPT_TOOL = f"mcp__{SERVER}__{TOOL}"
PROTOCOL = "2025-06-18"
# Beyond the item's own timeout (the supervisor denies it then): the endpoint's slack.
SLACK = 30.0

_TOOL_SPEC: JsonObject = {
    "name": TOOL,
    "description": "Asks the run's policy, or a person, whether a tool call may go ahead.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string"},
            "input": {"type": "object"},
            "tool_use_id": {"type": "string"},
        },
        "required": ["tool_name", "input"],
    },
}


def decide(run_dir: Path, timeout: float, tool: str, tool_input: JsonValue) -> JsonObject:
    """claude's permission answer for one request, from the run's supervisor."""
    try:
        reply = controlsock.request(
            run_dir, {"v": 1, "op": "approval", "tool": tool, "input": tool_input}, timeout + SLACK
        )
    except (OSError, ValueError) as exc:
        return {"behavior": "deny", "message": f"the run's supervisor did not answer: {exc}"}
    if reply.get("choice") in ("allow", "always"):
        return {"behavior": "allow", "updatedInput": tool_input}
    answers, asked = reply.get("answers"), questions.questions_of(tool, tool_input)
    if reply.get("choice") == "answer" and isinstance(answers, list) and asked is not None:
        # (claude's AskUserQuestion reads the user's answers from its input)
        given = [str(a) for a in answers]
        return {
            "behavior": "allow",
            "updatedInput": questions.claude_input(tool_input, asked, given),
        }
    reason = reply.get("reason")
    return {"behavior": "deny", "message": str(reason) if reason else "denied"}


class Server:
    def __init__(self, run_dir: Path, timeout: float, out: TextIO) -> None:
        self.run_dir = run_dir
        self.timeout = timeout
        self.out = out
        self.lock = threading.Lock()

    def send(self, message: JsonObject) -> None:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def handle(self, message: JsonValue) -> None:
        if not isinstance(message, dict) or "id" not in message:
            return  # a notification (initialized, cancelled): nothing to answer
        mid, method = message["id"], message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            version = params.get("protocolVersion")
            self.result(
                mid,
                {
                    "protocolVersion": version if isinstance(version, str) else PROTOCOL,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": SERVER, "version": "1"},
                },
            )
        elif method == "ping":
            self.result(mid, {})
        elif method == "tools/list":
            self.result(mid, {"tools": [_TOOL_SPEC]})
        elif method == "tools/call" and params.get("name") == TOOL:
            args = params.get("arguments")
            args = args if isinstance(args, dict) else {}
            threading.Thread(target=self.call, args=(mid, args), daemon=True).start()
        else:
            error: JsonObject = {"code": -32601, "message": f"no such method here: {method}"}
            self.send({"jsonrpc": "2.0", "id": mid, "error": error})

    def call(self, mid: JsonValue, args: JsonObject) -> None:
        tool = args.get("tool_name")
        answer = decide(self.run_dir, self.timeout, str(tool or "?"), args.get("input"))
        text = json.dumps(answer, ensure_ascii=False)
        self.result(mid, {"content": [{"type": "text", "text": text}]})

    def result(self, mid: JsonValue, result: JsonObject) -> None:
        self.send({"jsonrpc": "2.0", "id": mid, "result": result})


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m subagents.backends.claudeprompt RUN_DIR TIMEOUT", file=sys.stderr)
        return 2
    server = Server(Path(argv[0]), float(argv[1]), sys.stdout)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        server.handle(message)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
