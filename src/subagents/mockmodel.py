"""A loopback mock model server speaking the APIs of the agent CLIs.

Used to run real agent CLIs end to end without a real model::

    with MockModelServer(Script(command="ls")) as srv:
        env = {**os.environ, **write_pi_config(tmp / "pi-agent", srv.url)}
        subprocess.run(["pi", "--mode", "json", "-p", "--no-session",
                        "--provider", "mock", "--model", "mock-model", "list files"],
                       stdin=subprocess.DEVNULL, env=env, timeout=60)

One server answers every API on the same port (``srv.url`` = ``http://HOST:PORT``):

=================  ==========================================================  ============
API                endpoints                                                   used by
=================  ==========================================================  ============
OpenAI Chat        ``POST /v1/chat/completions`` (SSE and plain),              pi, opencode
                   ``GET /v1/models``
Anthropic          ``POST /v1/messages`` (SSE and plain),                      claude
                   ``POST /v1/messages/count_tokens``, ``GET /v1/models``
OpenAI Responses   ``POST /v1/responses`` (SSE and plain)                      codex
Gemini             ``POST /v1beta/models/M:streamGenerateContent[?alt=sse]``,  gemini
                   ``:generateContent``, ``:countTokens``,
                   ``GET /v1beta/models``
=================  ==========================================================  ============

The answer is decided *statelessly* from the request's conversation (see
:class:`Script`), so concurrent runs against one server do not interfere; only the
error budget (``error_times``) is a server-wide counter.  The tool call is, unless the
script names one, the calling CLI's own shell tool (:data:`SHELL_TOOLS`), so the CLI
really runs ``Script.command``; ``Script.per_api`` gives an API a script of its own.  ``write_*_config`` point each CLI at the server.

Run ``python -m subagents.mockmodel --help`` for a foreground server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "CLAUDE_MODEL",
    "CODEX_MODEL",
    "GEMINI",
    "GEMINI_MODEL",
    "MODEL_ID",
    "OPENCODE_MODEL",
    "PROVIDER",
    "RESPONSES",
    "SHELL_TOOLS",
    "MockModelServer",
    "Script",
    "pi_argv",
    "write_claude_config",
    "write_codex_config",
    "write_gemini_config",
    "write_opencode_config",
    "write_pi_config",
]

PROVIDER = "mock"
MODEL_ID = "mock-model"
CLAUDE_MODEL = "claude-sonnet-4-5"
"""The model to pass to claude (``--model``); any name works, the mock echoes it."""
CODEX_MODEL = MODEL_ID
"""The model to pass to codex (``-m``); it is also the config's default."""
GEMINI_MODEL = "gemini-2.5-flash"
"""The model to pass to gemini (``-m``): a name gemini knows, so it needs no routing."""
OPENCODE_MODEL = f"{PROVIDER}/{MODEL_ID}"
"""The model to pass to opencode (``-m``): ``provider/model`` from its config."""

CHAT = "chat"
ANTHROPIC = "anthropic"
RESPONSES = "responses"
GEMINI = "gemini"

SHELL_TOOLS: dict[str, str] = {
    CHAT: "bash",  # pi and opencode
    ANTHROPIC: "Bash",  # claude
    RESPONSES: "exec_command",  # codex 0.169 (older codex: shell / shell_command)
    GEMINI: "run_shell_command",  # gemini
}
"""The shell tool each API's CLI offers; the default tool call of :class:`Script`."""

_CODEX_SHELLS = ("exec_command", "shell_command", "shell", "local_shell")
_RESPONSE_ID = "chatcmpl-mock"
_TOOL_CALL_ID = "call_mock_1"


@dataclass
class Script:
    """What the mock model answers, whatever the API.

    Default policy, per model request:

    * the conversation holds no tool result yet, ``use_tool`` is true and the request
      does not rule the tool out (a request whose ``tools`` list lacks it, or is
      empty, gets text: e.g. a title request; one with no ``tools`` key gets the
      call) -> one tool call (OpenAI ``finish_reason: "tool_calls"``, Anthropic
      ``stop_reason: "tool_use"``, a Responses ``function_call`` item, a Gemini
      ``functionCall`` part);
    * otherwise -> a final text answer.

    The tool call is ``tool_name(tool_args)``.  ``tool_name`` ``None`` means the shell
    tool of the API asked (:data:`SHELL_TOOLS`; for Responses the first of
    ``exec_command``/``shell_command``/``shell`` the request offers), and
    ``tool_args`` ``None`` means the arguments that tool takes to run ``command``
    (``{"command": command}``; ``{"cmd": command, "login": false}`` for
    ``exec_command``; an argv for ``shell``; plus a ``description`` for claude's and
    gemini's).

    ``final_text`` is the text of the answer; ``{tool_output}`` in it is replaced by
    the first lines of the last tool result joined with ", " (of a result that wraps
    the output, like codex's ``exec_command``, the part after ``Output:``; claude's
    ``<system-reminder>`` notes left out).  ``None``
    means "I ran <tool> and it printed: <those lines>" after a tool result, and
    "Hello from the mock model." when there is none.

    ``error_status`` (e.g. 500) makes the first ``error_times`` model requests
    (counted over the server's lifetime; ``-1`` = every request) fail with that HTTP
    status and the API's error body carrying ``error_message``; with
    ``retry_after_ms`` set, those answers also carry ``retry-after-ms`` (and
    ``retry-after`` in whole seconds), which clients that retry on their own (opencode,
    the OpenAI and Anthropic SDKs) honour: 0 makes their retries immediate.

    ``delay_s`` is slept before answering (errors too); ``chunk_delay_s`` between SSE
    events; the final text is streamed as ``text_chunks`` deltas.  ``usage`` is
    (input tokens, output tokens) reported for every answer.

    ``per_api`` maps an API (:data:`CHAT`, :data:`ANTHROPIC`, :data:`RESPONSES`,
    :data:`GEMINI`) to the script that answers that API's requests instead of this one
    (its own tool call, final text, errors, delays and usage), so one server can drive
    different CLIs differently: e.g. claude calls an MCP tool while the pi that tool
    runs calls ``bash``.  Overrides are not nested (an override's ``per_api`` is
    ignored); the error budget stays one server-wide counter.
    """

    use_tool: bool = True
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    command: str = "ls"
    final_text: str | None = None
    error_status: int | None = None
    error_times: int = 0
    error_message: str = "mock server error"
    retry_after_ms: int | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    text_chunks: int = 1
    usage: tuple[int, int] = (10, 5)
    per_api: dict[str, Script] = field(default_factory=dict)

    def for_api(self, api: str) -> Script:
        """The script that answers ``api``'s requests: its ``per_api`` entry, else self."""
        return self.per_api.get(api, self)


# --------------------------------------------------------------------------- policy


def _content_text(content: Any) -> str:
    """Text of a message content: a string, or a list of text parts of any API."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_content_text(p) for p in content)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return str(content["text"])
        if "content" in content:
            return _content_text(content["content"])
    return ""


def _chat_tool_output(body: dict[str, Any]) -> str | None:
    """Text of the last ``role: "tool"`` message, or None when there is none."""
    messages = body.get("messages")
    for msg in reversed(messages if isinstance(messages, list) else []):
        if isinstance(msg, dict) and msg.get("role") == "tool":
            return _content_text(msg.get("content"))
    return None


def _anthropic_tool_output(body: dict[str, Any]) -> str | None:
    """Content of the last ``tool_result`` block of any message."""
    messages = body.get("messages")
    for msg in reversed(messages if isinstance(messages, list) else []):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            for block in reversed(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    return _content_text(block.get("content"))
    return None


def _responses_tool_output(body: dict[str, Any]) -> str | None:
    """Output of the last ``*_call_output`` input item."""
    items = body.get("input")
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
            out = item.get("output")
            return out if isinstance(out, str) else _content_text(out)
    return None


def _gemini_tool_output(body: dict[str, Any]) -> str | None:
    """The last ``functionResponse`` part's ``response.output`` (or the whole response)."""
    contents = body.get("contents")
    for content in reversed(contents if isinstance(contents, list) else []):
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in reversed(parts if isinstance(parts, list) else []):
            fr = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(fr, dict):
                resp = fr.get("response")
                if isinstance(resp, dict):
                    for key in ("output", "llmContent", "error"):
                        if isinstance(resp.get(key), str):
                            return str(resp[key])
                return json.dumps(resp)
    return None


_TOOL_OUTPUT = {
    CHAT: _chat_tool_output,
    ANTHROPIC: _anthropic_tool_output,
    RESPONSES: _responses_tool_output,
    GEMINI: _gemini_tool_output,
}


def _offered_tools(api: str, body: dict[str, Any]) -> set[str] | None:
    """Names of the tools the request offers; None when it says nothing about tools."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return None
    names: set[str] = set()
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if api == GEMINI:
            decls = tool.get("functionDeclarations") or tool.get("function_declarations")
            for decl in decls if isinstance(decls, list) else []:
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    names.add(decl["name"])
        elif api == CHAT and isinstance(tool.get("function"), dict):
            names.add(str(tool["function"].get("name")))
        elif isinstance(tool.get("name"), str):
            names.add(tool["name"])
        elif tool.get("type") == "local_shell":
            names.add("local_shell")
    return names


_OUTPUT_END = re.compile(r"^(Error|Exit Code|Signal|Background PIDs|Process Group PGID): ")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def _unwrap_output(output: str) -> str:
    """The command output inside a wrapped tool result (``...\\nOutput: ...``), without
    the ``<system-reminder>`` notes claude appends."""
    output = _REMINDER.sub("", output)
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Output:"):
            rest = [line[len("Output:") :]]
            for more in lines[i + 1 :]:
                if _OUTPUT_END.match(more):
                    break
                rest.append(more)
            return "\n".join(rest)
    return output


def _summarize(output: str, max_lines: int = 5) -> str:
    lines = [ln.strip() for ln in _unwrap_output(output).splitlines() if ln.strip()]
    summary = ", ".join(lines[:max_lines])
    if len(lines) > max_lines:
        summary += ", ..."
    return summary or "(no output)"


def _shell_args(name: str, command: str) -> dict[str, Any]:
    if name == "exec_command":
        return {"cmd": command, "login": False}  # no login shell: no profile noise
    if name in ("shell", "local_shell"):
        return {"command": ["bash", "-lc", command]}
    if name in ("Bash", "run_shell_command"):
        return {"command": command, "description": "Run a shell command"}
    return {"command": command}


def _tool_name(script: Script, api: str, offered: set[str] | None) -> str:
    if script.tool_name is not None:
        return script.tool_name
    if api == RESPONSES and offered:
        for name in _CODEX_SHELLS:
            if name in offered:
                return name
    return SHELL_TOOLS[api]


@dataclass(frozen=True)
class _Answer:
    text: str | None
    tool: tuple[str, dict[str, Any]] | None

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool else "stop"


def _decide(script: Script, body: dict[str, Any], api: str = CHAT) -> _Answer:
    tool_output = _TOOL_OUTPUT[api](body)
    offered = _offered_tools(api, body)
    name = _tool_name(script, api, offered)
    if tool_output is None and script.use_tool and (offered is None or name in offered):
        args = (
            script.tool_args if script.tool_args is not None else _shell_args(name, script.command)
        )
        return _Answer(None, (name, dict(args)))
    summary = _summarize(tool_output) if tool_output is not None else ""
    if script.final_text is not None:
        text = script.final_text.replace("{tool_output}", summary)
    elif tool_output is not None:
        text = f"I ran {name} and it printed: {summary}"
    else:
        text = "Hello from the mock model."
    return _Answer(text, None)


def _split(text: str, n: int) -> list[str]:
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    parts: list[str] = []
    pos = 0
    for i in range(n):
        end = pos + size + (1 if i < extra else 0)
        parts.append(text[pos:end])
        pos = end
    return [p for p in parts if p] or [text]


def _halves(s: str) -> list[str]:
    half = len(s) // 2
    return [p for p in (s[:half], s[half:]) if p]


# --------------------------------------------------------------------------- OpenAI Chat


def _usage(script: Script) -> dict[str, int]:
    prompt, completion = script.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chunk(
    model: str, created: int, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": _RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _stream_chunks(
    script: Script, answer: _Answer, model: str, include_usage: bool
) -> Iterator[dict[str, Any]]:
    created = int(time.time())
    yield _chunk(model, created, {"role": "assistant", "content": ""})
    if answer.text is not None:
        for piece in _split(answer.text, script.text_chunks):
            yield _chunk(model, created, {"content": piece})
    if answer.tool is not None:
        name, args = answer.tool
        yield _chunk(
            model,
            created,
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": _TOOL_CALL_ID,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            },
        )
        for part in _halves(json.dumps(args)):
            yield _chunk(
                model, created, {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}
            )
    yield _chunk(model, created, {}, answer.finish_reason)
    if include_usage:
        yield {
            "id": _RESPONSE_ID,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(script),
        }


def _completion(script: Script, answer: _Answer, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.tool is not None:
        name, args = answer.tool
        message["tool_calls"] = [
            {
                "id": _TOOL_CALL_ID,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
    return {
        "id": _RESPONSE_ID,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason}],
        "usage": _usage(script),
    }


# --------------------------------------------------------------------------- Anthropic


def _anthropic_usage(script: Script, output: bool = True) -> dict[str, int]:
    prompt, completion = script.usage
    return {
        "input_tokens": prompt,
        "output_tokens": completion if output else 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _anthropic_blocks(answer: _Answer) -> list[dict[str, Any]]:
    if answer.tool is not None:
        name, args = answer.tool
        return [{"type": "tool_use", "id": "toolu_mock_1", "name": name, "input": args}]
    return [{"type": "text", "text": answer.text or ""}]


def _anthropic_message(script: Script, answer: _Answer, model: str) -> dict[str, Any]:
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(answer),
        "stop_reason": "tool_use" if answer.tool else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(script),
    }


def _anthropic_events(
    script: Script, answer: _Answer, model: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    start = _anthropic_message(script, answer, model)
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(script, output=False))
    yield "message_start", {"type": "message_start", "message": start}
    (block,) = _anthropic_blocks(answer)
    if block["type"] == "tool_use":
        deltas = [
            {"type": "input_json_delta", "partial_json": p}
            for p in _halves(json.dumps(block["input"]))
        ]
        block = {**block, "input": {}}
    else:
        deltas = [
            {"type": "text_delta", "text": p} for p in _split(block["text"], script.text_chunks)
        ]
        block = {"type": "text", "text": ""}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if answer.tool else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": script.usage[1]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------------- OpenAI Responses


def _responses_items(answer: _Answer, done: bool) -> list[dict[str, Any]]:
    status = "completed" if done else "in_progress"
    if answer.tool is not None:
        name, args = answer.tool
        return [
            {
                "type": "function_call",
                "id": "fc_mock_1",
                "call_id": _TOOL_CALL_ID,
                "name": name,
                "arguments": json.dumps(args) if done else "",
                "status": status,
            }
        ]
    content = [{"type": "output_text", "text": answer.text or "", "annotations": []}]
    return [
        {
            "type": "message",
            "id": "msg_mock_1",
            "role": "assistant",
            "status": status,
            "content": content if done else [],
        }
    ]


def _responses_object(script: Script, answer: _Answer | None, model: str) -> dict[str, Any]:
    """The response object; ``answer`` None = the in-progress one of ``response.created``."""
    prompt, completion = script.usage
    obj: dict[str, Any] = {
        "id": "resp_mock",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress" if answer is None else "completed",
        "model": model,
        "output": [] if answer is None else _responses_items(answer, done=True),
        "usage": None,
    }
    if answer is not None:
        obj["usage"] = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
    return obj


def _responses_events(
    script: Script, answer: _Answer, model: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _responses_object(script, None, model)}
    ]
    (item,) = _responses_items(answer, done=False)
    (done,) = _responses_items(answer, done=True)
    at = {"output_index": 0, "item_id": item["id"]}
    events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
    if answer.tool is not None:
        for part in _halves(done["arguments"]):
            events.append({"type": "response.function_call_arguments.delta", **at, "delta": part})
        events.append(
            {"type": "response.function_call_arguments.done", **at, "arguments": done["arguments"]}
        )
    else:
        text = answer.text or ""
        part0 = {"type": "output_text", "text": "", "annotations": []}
        events.append(
            {"type": "response.content_part.added", **at, "content_index": 0, "part": part0}
        )
        for piece in _split(text, script.text_chunks):
            events.append(
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": piece}
            )
        events.append({"type": "response.output_text.done", **at, "content_index": 0, "text": text})
        events.append(
            {
                "type": "response.content_part.done",
                **at,
                "content_index": 0,
                "part": {**part0, "text": text},
            }
        )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done})
    events.append(
        {"type": "response.completed", "response": _responses_object(script, answer, model)}
    )
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
        yield str(event["type"]), event


# --------------------------------------------------------------------------- Gemini


def _gemini_usage(script: Script) -> dict[str, int]:
    prompt, completion = script.usage
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion,
        "totalTokenCount": prompt + completion,
    }


def _gemini_response(
    script: Script, parts: list[dict[str, Any]], model: str, last: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": "mock"}
    if last:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = _gemini_usage(script)
    return out


def _gemini_chunks(script: Script, answer: _Answer, model: str) -> list[dict[str, Any]]:
    if answer.tool is not None:
        name, args = answer.tool
        call = {"functionCall": {"name": name, "args": args}}
        return [_gemini_response(script, [call], model, last=True)]
    pieces = _split(answer.text or "", script.text_chunks)
    return [
        _gemini_response(script, [{"text": p}], model, last=i == len(pieces) - 1)
        for i, p in enumerate(pieces)
    ]


def _gemini_whole(script: Script, answer: _Answer, model: str) -> dict[str, Any]:
    if answer.tool is not None:
        return _gemini_chunks(script, answer, model)[0]
    return _gemini_response(script, [{"text": answer.text or ""}], model, last=True)


_GEMINI_PATH = re.compile(r"^(?:/v1beta|/v1alpha|/v1)?/models/([^/:]+):([A-Za-z]+)$")
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def _error_body(api: str, status: int, message: str) -> dict[str, Any]:
    if api == ANTHROPIC:
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": message}}
    if api == GEMINI:
        name = _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": name}}
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": None}}


def _count_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body)) // 4)


# --------------------------------------------------------------------------- server

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_MESSAGES_PATHS = ("/v1/messages", "/messages")
_RESPONSES_PATHS = ("/v1/responses", "/responses")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # streaming bodies end when the connection closes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self, api: str = CHAT) -> None:
        self._send_json(404, _error_body(api, 404, f"not found: {self.command} {self.path}"))

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_HEAD(self) -> None:
        self.server.owner._log(f"HEAD {self.path}")
        self.send_response(200 if urlsplit(self.path).path in ("", "/") else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.server.owner._log(f"GET {self.path}")
        path = urlsplit(self.path).path.rstrip("/")
        if path in ("/v1/models", "/models"):
            # one list that reads as OpenAI's and as Anthropic's
            model = {
                "id": MODEL_ID,
                "object": "model",
                "created": 0,
                "owned_by": PROVIDER,
                "type": "model",
                "display_name": "Mock Model",
                "created_at": "2025-01-01T00:00:00Z",
            }
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [model],
                    "has_more": False,
                    "first_id": MODEL_ID,
                    "last_id": MODEL_ID,
                },
            )
        elif path in ("/v1beta/models", "/v1alpha/models"):
            model = {
                "name": f"models/{GEMINI_MODEL}",
                "displayName": "Mock Model",
                "supportedGenerationMethods": ["generateContent", "countTokens"],
                "inputTokenLimit": 1048576,
                "outputTokenLimit": 65536,
            }
            self._send_json(200, {"models": [model]})
        elif path == "":
            self._send_json(200, {"ok": True})
        else:
            self._not_found()

    def do_POST(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._post()  # a client going away mid-answer is not an error

    def _post(self) -> None:
        owner = self.server.owner
        owner._log(f"POST {self.path}")
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        sse = True
        gemini = _GEMINI_PATH.match(path)
        if path in _CHAT_PATHS:
            api = CHAT
        elif path in _MESSAGES_PATHS:
            api = ANTHROPIC
        elif path in _RESPONSES_PATHS:
            api = RESPONSES
        elif path.endswith("/messages/count_tokens"):
            body = self._json_body(ANTHROPIC)
            if body is not None:
                self._send_json(200, {"input_tokens": _count_tokens(body.get("messages"))})
            return
        elif gemini and gemini.group(2) in ("generateContent", "streamGenerateContent"):
            api = GEMINI
            sse = "sse" in parse_qs(url.query).get("alt", [])
        elif gemini and gemini.group(2) == "countTokens":
            body = self._json_body(GEMINI)
            if body is not None:
                self._send_json(200, {"totalTokens": _count_tokens(body.get("contents", body))})
            return
        else:
            self._not_found()
            return
        body = self._json_body(api)
        if body is None:
            return
        script = owner.script.for_api(api)
        owner._record(body)
        if script.delay_s > 0:
            time.sleep(script.delay_s)
        if owner._take_error(script):
            status = script.error_status or 500
            headers = {}
            if script.retry_after_ms is not None:
                ms = max(0, script.retry_after_ms)
                headers = {"retry-after-ms": str(ms), "retry-after": str(-(-ms // 1000))}
            self._send_json(status, _error_body(api, status, script.error_message), headers)
            return
        answer = _decide(script, body, api)
        if api == GEMINI and gemini is not None:
            model = gemini.group(1)
            if gemini.group(2) == "generateContent":
                self._send_json(200, _gemini_whole(script, answer, model))
            elif sse:
                self._stream(script, ((None, c) for c in _gemini_chunks(script, answer, model)))
            else:
                self._send_json(200, _gemini_chunks(script, answer, model))
            return
        model = str(body.get("model") or MODEL_ID)
        stream = bool(body.get("stream"))
        if api == ANTHROPIC:
            if stream:
                self._stream(script, _anthropic_events(script, answer, model))
            else:
                self._send_json(200, _anthropic_message(script, answer, model))
        elif api == RESPONSES:
            if stream:
                self._stream(script, _responses_events(script, answer, model))
            else:
                self._send_json(200, _responses_object(script, answer, model))
        elif not stream:
            self._send_json(200, _completion(script, answer, model))
        else:
            opts = body.get("stream_options")
            include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
            chunks = _stream_chunks(script, answer, model, include_usage)
            self._stream(script, ((None, c) for c in chunks), done=True)

    def _json_body(self, api: str) -> dict[str, Any] | None:
        """The request's JSON object body; answers 400 and returns None when it is not one."""
        try:
            body = json.loads(self._read_body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, _error_body(api, 400, "body is not a JSON object"))
            return None
        return body

    def _stream(
        self,
        script: Script,
        events: Iterator[tuple[str | None, dict[str, Any]]],
        done: bool = False,
    ) -> None:
        """Send ``events`` as SSE (``event:`` lines where named); ``done`` adds ``[DONE]``."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for i, (name, data) in enumerate(events):
            if i and script.chunk_delay_s > 0:
                time.sleep(script.chunk_delay_s)
            head = f"event: {name}\n".encode() if name else b""
            self.wfile.write(head + b"data: " + json.dumps(data).encode() + b"\n\n")
            self.wfile.flush()
        if done:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], owner: MockModelServer) -> None:
        self.owner = owner
        super().__init__(addr, _Handler)


class MockModelServer:
    """The mock model on ``host:port`` (port 0 = a free one), served in a daemon thread.

    Starts at construction; use as a context manager or call :meth:`close`.
    ``script`` may be replaced at any time.  ``requests`` lists the JSON bodies of all
    model requests received, whatever the API (chat completions, messages, responses,
    generateContent; error-answered ones included), in arrival order; ``http_log``
    lists every HTTP request as ``"METHOD /path?query"`` (token counts and model lists
    too).
    """

    def __init__(
        self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.script = script if script is not None else Script()
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._http_log: list[str] = []
        self._errors_sent = 0
        self._httpd = _Server((host, port), self)
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="mockmodel",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot copy of the model request bodies received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def http_log(self) -> list[str]:
        """A snapshot copy of every HTTP request line received so far (``"POST /v1/..."``)."""
        with self._lock:
            return list(self._http_log)

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(body)

    def _log(self, line: str) -> None:
        with self._lock:
            self._http_log.append(line)

    def _take_error(self, script: Script) -> bool:
        if script.error_status is None:
            return False
        with self._lock:
            if script.error_times < 0 or self._errors_sent < script.error_times:
                self._errors_sent += 1
                return True
        return False

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MockModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- pi


def write_pi_config(
    agent_dir: Path, base_url: str, *, retry: dict[str, Any] | None = None
) -> dict[str, str]:
    """Point a pi child at the mock; return the env vars it needs.

    Writes ``agent_dir/models.json`` (provider ``mock``, model ``mock-model``, api
    ``openai-completions``, baseUrl ``<base_url>/v1``) and, when ``retry`` is given,
    ``agent_dir/settings.json`` with ``{"retry": retry}``.  pi's retry shape is
    ``{"enabled": bool, "maxRetries": int, "baseDelayMs": int,
    "provider": {"maxRetries": int, "timeoutMs": int, "maxRetryDelayMs": int}}``: the
    top-level keys drive pi's own ``auto_retry_start`` loop (defaults true/3/2000);
    ``provider.maxRetries`` is the OpenAI SDK's silent in-request retry count
    (default 2) -- set it to 0 to make every HTTP error visible to pi at once.

    The returned env: ``PI_CODING_AGENT_DIR``; ``PI_OFFLINE=1``,
    ``PI_SKIP_VERSION_CHECK=1`` and ``PI_TELEMETRY=0`` (no startup network); and
    ``HOME=agent_dir/home`` (pi also reads ``~/.agents/skills`` from the real home).
    """
    agent_dir = Path(agent_dir)
    agent_dir.mkdir(parents=True, exist_ok=True)
    home = agent_dir / "home"
    home.mkdir(exist_ok=True)
    models = {
        "providers": {
            PROVIDER: {
                "baseUrl": base_url.rstrip("/") + "/v1",
                "api": "openai-completions",
                "apiKey": "x",
                "models": [
                    {
                        "id": MODEL_ID,
                        "name": "Mock Model",
                        "reasoning": False,
                        "input": ["text"],
                        "contextWindow": 128000,
                        "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    }
                ],
            }
        }
    }
    (agent_dir / "models.json").write_text(json.dumps(models, indent=2) + "\n")
    if retry is not None:
        (agent_dir / "settings.json").write_text(json.dumps({"retry": retry}, indent=2) + "\n")
    return {
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "HOME": str(home),
    }


def pi_argv(task: str, *, tools: str | None = None, pi: str = "pi") -> list[str]:
    """The pi command line for a run against the mock (spawn it with stdin=/dev/null)."""
    argv = [pi, "--mode", "json", "-p", "--no-session", "--provider", PROVIDER, "--model", MODEL_ID]
    if tools:
        argv += ["--tools", tools]
    return [*argv, task]


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


# --------------------------------------------------------------------------- claude


def write_claude_config(
    home: Path, base_url: str, *, max_retries: int | None = None
) -> dict[str, str]:
    """Point a Claude Code child at the mock's Anthropic API; return the env it needs.

    Run ``claude -p --output-format stream-json --verbose --model claude-sonnet-4-5
    -- TASK`` (:data:`CLAUDE_MODEL`; any model name works) with this env.  Claude
    calls ``POST /v1/messages?beta=true`` (streaming) for each turn; its shell tool is
    ``Bash`` (``{"command", "description"}``).

    ``home`` becomes the child's ``HOME``, with ``.claude.json`` (onboarding done,
    no auto-update) and ``.claude/settings.json`` allowing ``Bash`` (so ``-p`` runs
    it without a permission prompt, whatever the command line says).

    The env: ``HOME``; ``ANTHROPIC_BASE_URL`` = ``base_url`` (no ``/v1``);
    ``ANTHROPIC_API_KEY=x``; ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
    ``DISABLE_AUTOUPDATER=1``, ``DISABLE_TELEMETRY=1``, ``DISABLE_ERROR_REPORTING=1``
    (no startup traffic elsewhere); ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDECODE`` and
    ``CLAUDE_CODE_ENTRYPOINT`` emptied (a parent Claude Code's must not leak in);
    and, when ``max_retries`` is given, ``CLAUDE_CODE_MAX_RETRIES`` (default 10
    with exponential backoff: pass 0 for a fast failure on HTTP errors).
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    _write_json(
        home / ".claude.json",
        {
            "hasCompletedOnboarding": True,
            "autoUpdates": False,
            "numStartups": 1,
            "bypassPermissionsModeAccepted": True,
        },
    )
    _write_json(home / ".claude" / "settings.json", {"permissions": {"allow": ["Bash"]}})
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url.rstrip("/"),
        "ANTHROPIC_API_KEY": "x",
        "ANTHROPIC_AUTH_TOKEN": "",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDECODE": "",
        "CLAUDE_CODE_ENTRYPOINT": "",
    }
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    return env


# --------------------------------------------------------------------------- codex


def write_codex_config(
    codex_home: Path, base_url: str, *, model: str = CODEX_MODEL, retries: int = 0
) -> dict[str, str]:
    """Point a Codex child at the mock's Responses API; return the env it needs.

    Run ``codex exec --json --skip-git-repo-check -m mock-model TASK``
    (:data:`CODEX_MODEL`, also the config's default model) with this env.  Codex calls
    ``POST /v1/responses`` (streaming) for each turn; its shell tool in 0.169 is
    ``exec_command`` (``{"cmd": ...}``), which the mock picks from the request's tools.
    Codex warns once that it has no metadata for ``mock-model`` (an ``error`` item in
    its stream; harmless).

    Writes ``codex_home/config.toml``: ``model``, ``model_provider = "mock"``, and
    ``[model_providers.mock]`` with ``base_url = <base_url>/v1``,
    ``wire_api = "responses"``, ``env_key = "MOCK_API_KEY"`` and
    ``request_max_retries`` / ``stream_max_retries`` = ``retries`` (default 0: an HTTP
    error fails the turn at once); plus no update check and no analytics.

    The env: ``CODEX_HOME``, ``MOCK_API_KEY=x``, and ``OPENAI_API_KEY`` /
    ``OPENAI_BASE_URL`` / ``CODEX_API_KEY`` emptied (a parent's must not leak in).
    """
    codex_home = Path(codex_home)
    codex_home.mkdir(parents=True, exist_ok=True)
    url = base_url.rstrip("/") + "/v1"
    (codex_home / "config.toml").write_text(
        f"model = {json.dumps(model)}\n"
        f'model_provider = "{PROVIDER}"\n'
        "check_for_update_on_startup = false\n"
        "\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        f"[model_providers.{PROVIDER}]\n"
        'name = "Mock"\n'
        f"base_url = {json.dumps(url)}\n"
        'wire_api = "responses"\n'
        'env_key = "MOCK_API_KEY"\n'
        f"request_max_retries = {int(retries)}\n"
        f"stream_max_retries = {int(retries)}\n"
    )
    return {
        "CODEX_HOME": str(codex_home),
        "MOCK_API_KEY": "x",
        "OPENAI_API_KEY": "",
        "OPENAI_BASE_URL": "",
        "CODEX_API_KEY": "",
    }


# --------------------------------------------------------------------------- gemini


def write_gemini_config(
    home: Path, base_url: str, *, max_attempts: int | None = None
) -> dict[str, str]:
    """Point a Gemini CLI child at the mock's Gemini API; return the env it needs.

    Run ``gemini -p TASK --output-format stream-json -m gemini-2.5-flash``
    (:data:`GEMINI_MODEL`) with this env.  Gemini calls
    ``POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`` for each
    turn; its shell tool is ``run_shell_command`` (``{"command", "description"}``).

    ``home`` becomes the child's ``HOME``, with ``.gemini/settings.json``: API-key
    auth (``security.auth.selectedType = "gemini-api-key"``), folder trust off, no
    usage statistics, telemetry or auto-update, ``run_shell_command`` allowed
    (``tools.allowed``: headless gemini otherwise refuses tools that need a
    confirmation), and, when ``max_attempts`` is given, ``general.maxAttempts``
    (default 10 with a 5 s backoff: pass 1 for a fast failure on HTTP 5xx; 4xx are not
    retried).

    The env: ``HOME``, ``GOOGLE_GEMINI_BASE_URL`` = ``base_url``, ``GEMINI_API_KEY=x``,
    ``GEMINI_CLI_TRUST_WORKSPACE=true`` (what ``--skip-trust`` sets),
    ``GEMINI_CLI_NO_RELAUNCH=true`` (no second node process), ``TMPDIR`` =
    ``home/tmp`` (gemini drops an error report file in the temp dir on every API
    error), and
    ``GOOGLE_API_KEY`` / ``GOOGLE_GENAI_USE_VERTEXAI`` / ``GOOGLE_CLOUD_PROJECT``
    emptied.
    """
    home = Path(home)
    general: dict[str, Any] = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    if max_attempts is not None:
        general["maxAttempts"] = int(max_attempts)
    _write_json(
        home / ".gemini" / "settings.json",
        {
            "security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": False},
            },
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": general,
        },
    )
    (home / ".gemini" / "policies").mkdir(exist_ok=True)
    (home / ".gemini" / "policies" / "mock.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ndecision = "allow"\npriority = 100\n'
    )
    (home / "tmp").mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "GOOGLE_GEMINI_BASE_URL": base_url.rstrip("/"),
        "GEMINI_API_KEY": "x",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GOOGLE_API_KEY": "",
        "GOOGLE_GENAI_USE_VERTEXAI": "",
        "GOOGLE_CLOUD_PROJECT": "",
    }


# --------------------------------------------------------------------------- opencode


def write_opencode_config(config_dir: Path, base_url: str) -> dict[str, str]:
    """Point an OpenCode child at the mock's Chat Completions API; return its env.

    Run ``opencode run --format json -m mock/mock-model TASK`` (:data:`OPENCODE_MODEL`)
    with this env.  OpenCode calls ``POST /v1/chat/completions`` (streaming) through
    its bundled ``@ai-sdk/openai-compatible`` provider; its shell tool is ``bash``
    (``{"command"}``).  It retries HTTP 5xx/429 without end (2 s, 4 s, ... backoff):
    script a 4xx to see it fail.

    Writes ``config_dir/opencode.json`` with provider ``mock`` (``npm:
    "@ai-sdk/openai-compatible"``, ``options.baseURL = <base_url>/v1``, ``apiKey``,
    model ``mock-model``), outside the work tree, named by ``OPENCODE_CONFIG``.

    The env: ``OPENCODE_CONFIG``; ``HOME`` and ``XDG_{CONFIG,DATA,CACHE,STATE}_HOME``
    under ``config_dir/home`` (opencode keeps its database, logs and an npm cache
    there); ``OPENCODE_DISABLE_MODELS_FETCH=1`` (no models.dev download),
    ``OPENCODE_DISABLE_AUTOUPDATE=1``, ``OPENCODE_DISABLE_SHARE=1``.
    """
    config_dir = Path(config_dir)
    home = config_dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": base_url.rstrip("/") + "/v1", "apiKey": "x"},
                "models": {
                    MODEL_ID: {
                        "name": "Mock Model",
                        "tool_call": True,
                        "limit": {"context": 128000, "output": 4096},
                    }
                },
            }
        },
    }
    _write_json(config_dir / "opencode.json", config)
    return {
        "OPENCODE_CONFIG": str(config_dir / "opencode.json"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }


# --------------------------------------------------------------------------- CLI

_WRITERS: dict[str, Callable[[Path, str], dict[str, str]]] = {
    "claude": write_claude_config,
    "codex": write_codex_config,
    "gemini": write_gemini_config,
    "opencode": write_opencode_config,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m subagents.mockmodel",
        description=__doc__.split("\n")[0] if __doc__ else None,
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    p.add_argument(
        "--final", dest="final_text", help="final answer text ({tool_output} is substituted)"
    )
    p.add_argument("--command", default="ls", help="shell command of the default tool call")
    p.add_argument("--tool", dest="tool_name", help="tool to call (default: the API's shell tool)")
    p.add_argument("--tool-args", help="tool arguments as JSON (default: run --command)")
    p.add_argument("--no-tool", action="store_true", help="answer text at once, no tool call")
    p.add_argument("--error-status", type=int)
    p.add_argument("--error-times", type=int, default=-1, help="with --error-status; -1 = always")
    p.add_argument(
        "--retry-after-ms", type=int, help="with --error-status: a retry-after-ms header"
    )
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between SSE chunks")
    p.add_argument("--text-chunks", type=int, default=1)
    p.add_argument("--pi-config", type=Path, metavar="DIR", help="also write a pi agent dir there")
    for name in _WRITERS:
        p.add_argument(
            f"--{name}-config", type=Path, metavar="DIR", help=f"also write a {name} config there"
        )
    a = p.parse_args(argv)
    tool_args = None
    if a.tool_args is not None:
        tool_args = json.loads(a.tool_args)
        if not isinstance(tool_args, dict):
            p.error("--tool-args must be a JSON object")
    script = Script(
        use_tool=not a.no_tool,
        tool_name=a.tool_name,
        tool_args=tool_args,
        command=a.command,
        final_text=a.final_text,
        error_status=a.error_status,
        error_times=a.error_times if a.error_status is not None else 0,
        retry_after_ms=a.retry_after_ms,
        delay_s=a.delay,
        chunk_delay_s=a.chunk_delay,
        text_chunks=a.text_chunks,
    )
    with MockModelServer(script, host=a.host, port=a.port) as srv:
        print(srv.url, flush=True)
        if a.pi_config is not None:
            env = write_pi_config(a.pi_config, srv.url)
            print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
            print(" ".join(pi_argv("TASK")), flush=True)
        for name, writer in _WRITERS.items():
            target = getattr(a, f"{name}_config")
            if target is not None:
                env = writer(target, srv.url)
                print(f"{name}: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
