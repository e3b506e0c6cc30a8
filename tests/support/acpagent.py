"""A scripted ACP agent, for what no real agent does on demand: answer initialize with
another protocol version, never answer it, or ask its client for files and permissions
outside the run's tree. Run as ``python acpagent.py MODE [ARG]``:

* ``normal``: answers the prompt with its text;
* ``version2``: speaks ACP protocol version 2;
* ``silent``: reads its input and never answers (nor exits);
* ``client PATH_INSIDE PATH_OUTSIDE``: on the prompt, writes and reads both paths through
  the client (``fs/*``) and asks permission to edit each (``session/request_permission``),
  then answers with what each request got, as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODE = sys.argv[1]
ARGS = sys.argv[2:]


def send(obj: dict[str, Any]) -> None:
    obj["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def ask(rid: int, method: str, params: dict[str, Any]) -> Any:
    """A request of the client, and its response (read from stdin)."""
    send({"id": rid, "method": method, "params": params})
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("id") == rid and "method" not in msg:
            return msg.get("result", {"error": msg.get("error")})
    return None


def client_calls(sid: str) -> dict[str, Any]:
    inside, outside = ARGS
    got: dict[str, Any] = {}
    n = 1000
    for name, path in (("inside", inside), ("outside", outside)):
        n += 1
        got[f"write_{name}"] = ask(
            n, "fs/write_text_file", {"sessionId": sid, "path": path, "content": "x\n"}
        )
        n += 1
        got[f"read_{name}"] = ask(n, "fs/read_text_file", {"sessionId": sid, "path": path})
        n += 1
        got[f"permission_{name}"] = ask(
            n,
            "session/request_permission",
            {
                "sessionId": sid,
                "toolCall": {
                    "toolCallId": f"t{n}",
                    "title": f"Edit {path}",
                    "kind": "edit",
                    "locations": [{"path": path}],
                },
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
    n += 1
    got["terminal"] = ask(n, "terminal/create", {"sessionId": sid, "command": "ls"})
    return got


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if MODE == "silent":
            continue
        if method == "initialize":
            version = 2 if MODE == "version2" else 1
            send({"id": rid, "result": {"protocolVersion": version, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"id": rid, "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            params = msg["params"]
            text = params["prompt"][0]["text"]
            if MODE == "client":
                text = json.dumps(client_calls(params["sessionId"]), sort_keys=True)
            update = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            }
            send({"method": "session/update", "params": {"sessionId": "s1", "update": update}})
            send({"id": rid, "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
