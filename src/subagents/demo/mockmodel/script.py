"""What the mock model answers: the script, decided statelessly from the request's conversation."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # A request's body is another program's JSON: each value is narrowed before use.
    from subagents.types import JsonObject, JsonValue

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
RESPONSE_ID = "chatcmpl-mock"
HOLD_AT_MOST = 120.0  # a ``hold`` never set (a test that failed first) lets go after this
TOOL_CALL_ID = "call_mock_1"


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

    ``delay_s`` is slept before answering (errors too); ``hold``, an event, is waited on
    before that (at most ``HOLD_AT_MOST`` s): a child kept waiting on its model for as long
    as a test needs it to, instead of for a fixed delay; ``chunk_delay_s`` between SSE
    events; the final text is streamed as ``text_chunks`` deltas.  ``usage`` is
    (input tokens, output tokens) reported for every answer.

    ``loop`` scripts a child that keeps working until it is told otherwise (live
    control: steer, follow-up, budgets).  Per request, in this order:

    * a user message came after the task (a steer, a follow-up, a budget's wrap-up;
      :func:`later_user_message`) and
      ``heed_messages`` is true -> a final text answer, ``reply_text`` with
      ``{message}`` replaced by that message's text (the newest one);
    * fewer than ``loop_limit`` tool results so far and the tool is offered -> the
      tool call again (``command`` e.g. ``"sleep 1"``: a tool that runs long enough
      to be steered);
    * otherwise -> the final text as without ``loop``.

    ``heed_messages`` false makes a stubborn child that ignores every message (a
    budget's grace turns run out); ``loop_limit`` bounds every loop all the same.
    Still stateless: the loop count is the number of tool results in the request.
    Each answer's usage is ``usage``; the cost the CLI reports follows from its price
    table (``write_pi_config``/``write_opencode_config`` take a ``price``; claude's
    is its own for the model name; codex and gemini report none), and
    :attr:`MockModelServer.served` counts the answers and the usage reported.

    ``per_api`` maps an API (:data:`CHAT`, :data:`ANTHROPIC`, :data:`RESPONSES`,
    :data:`GEMINI`) to the script that answers that API's requests instead of this one
    (its own tool call, final text, errors, delays and usage), so one server can drive
    different CLIs differently: e.g. claude calls an MCP tool while the pi that tool
    runs calls ``bash``.  Overrides are not nested (an override's ``per_api`` is
    ignored); the error budget stays one server-wide counter.
    """

    use_tool: bool = True
    tool_name: str | None = None
    tool_args: JsonObject | None = None
    command: str = "ls"
    final_text: str | None = None
    error_status: int | None = None
    error_times: int = 0
    error_message: str = "mock server error"
    retry_after_ms: int | None = None
    delay_s: float = 0.0
    hold: threading.Event | None = field(default=None, compare=False, repr=False)
    chunk_delay_s: float = 0.0
    text_chunks: int = 1
    usage: tuple[int, int] = (10, 5)
    loop: bool = False
    loop_limit: int = 50
    heed_messages: bool = True
    reply_text: str = 'You said: "{message}"'
    per_api: dict[str, Script] = field(default_factory=dict)

    def for_api(self, api: str) -> Script:
        """The script that answers ``api``'s requests: its ``per_api`` entry, else self."""
        return self.per_api.get(api, self)


# --------------------------------------------------------------------------- policy


def _content_text(content: JsonValue) -> str:
    """Text of a message content: a string, or a list of text parts of any API."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_content_text(p) for p in content)
    if isinstance(content, dict):
        text = content.get("text")
        if isinstance(text, str):
            return text
        if "content" in content:
            return _content_text(content["content"])
    return ""


def _chat_tool_output(body: JsonObject) -> str | None:
    """Text of the last ``role: "tool"`` message, or None when there is none."""
    messages = body.get("messages")
    for msg in reversed(messages if isinstance(messages, list) else []):
        if isinstance(msg, dict) and msg.get("role") == "tool":
            return _content_text(msg.get("content"))
    return None


def _anthropic_tool_output(body: JsonObject) -> str | None:
    """Content of the last ``tool_result`` block of any message."""
    messages = body.get("messages")
    for msg in reversed(messages if isinstance(messages, list) else []):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            for block in reversed(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    return _content_text(block.get("content"))
    return None


def _responses_tool_output(body: JsonObject) -> str | None:
    """Output of the last ``*_call_output`` input item."""
    items = body.get("input")
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
            out = item.get("output")
            return out if isinstance(out, str) else _content_text(out)
    return None


def _gemini_tool_output(body: JsonObject) -> str | None:
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
                        said = resp.get(key)
                        if isinstance(said, str):
                            return said
                return json.dumps(resp)
    return None


_TOOL_OUTPUT = {
    CHAT: _chat_tool_output,
    ANTHROPIC: _anthropic_tool_output,
    RESPONSES: _responses_tool_output,
    GEMINI: _gemini_tool_output,
}


def _offered_tools(api: str, body: JsonObject) -> set[str] | None:
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
                name = decl.get("name") if isinstance(decl, dict) else None
                if isinstance(name, str):
                    names.add(name)
            continue
        function, name = tool.get("function"), tool.get("name")
        if api == CHAT and isinstance(function, dict):
            names.add(str(function.get("name")))
        elif isinstance(name, str):
            names.add(name)
        elif tool.get("type") == "local_shell":
            names.add("local_shell")
    return names


# --------------------------------------------------------------------------- the conversation

ASSISTANT = "assistant"
USER = "user"
TOOL_RESULT = "tool_result"


def _chat_turns(body: JsonObject) -> Iterator[tuple[str, str]]:
    for msg in _list(body.get("messages")):
        role = msg.get("role")
        if role == "assistant":
            yield ASSISTANT, ""
        elif role == "tool":
            yield TOOL_RESULT, ""
        elif role == "user":
            yield USER, _content_text(msg.get("content"))


_CLAUDE_MID_TURN = re.compile(
    r"The user sent a new message while you were working:\n(.*?)\n\n"
    r"(?:This is how Claude Code|</system-reminder>)",
    re.DOTALL,
)


def _anthropic_turns(body: JsonObject) -> Iterator[tuple[str, str]]:
    for msg in _list(body.get("messages")):
        content = msg.get("content")
        if msg.get("role") == "assistant":
            yield ASSISTANT, ""
        elif msg.get("role") == "user" and isinstance(content, str):
            yield USER, content
        elif msg.get("role") == "user":
            blocks = _list(content)
            for block in blocks:
                if block.get("type") == "tool_result":
                    yield TOOL_RESULT, ""
                    # claude 2.1 hands a message sent mid-turn inside the next tool result
                    for found in _CLAUDE_MID_TURN.finditer(_content_text(block.get("content"))):
                        yield USER, found.group(1)
            yield USER, "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def _responses_turns(body: JsonObject) -> Iterator[tuple[str, str]]:
    for item in _list(body.get("input")):
        kind = str(item.get("type") or "message")
        if kind.endswith("_call_output"):
            yield TOOL_RESULT, ""
        elif kind.endswith("_call") or (kind == "message" and item.get("role") == "assistant"):
            yield ASSISTANT, ""
        elif kind == "message" and item.get("role") == "user":
            yield USER, _content_text(item.get("content"))


def _gemini_turns(body: JsonObject) -> Iterator[tuple[str, str]]:
    for content in _list(body.get("contents")):
        parts = _list(content.get("parts"))
        if content.get("role") == "model":
            yield ASSISTANT, ""
            continue
        for part in parts:
            if "functionResponse" in part:
                yield TOOL_RESULT, ""
        yield USER, "".join(text for p in parts if isinstance(text := p.get("text"), str))


def _list(value: JsonValue) -> list[JsonObject]:
    """The dict items of a JSON list (anything else: none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


_TURNS = {
    CHAT: _chat_turns,
    ANTHROPIC: _anthropic_turns,
    RESPONSES: _responses_turns,
    GEMINI: _gemini_turns,
}


def later_user_message(api: str, body: JsonObject) -> str | None:
    """The newest user text after the task (a message sent to a running child, a
    follow-up, a wrap-up), or None.

    The task is the conversation's first user text; claude's ``<system-reminder>``
    notes and a text that is one tagged block (codex's ``<environment_context>``) are
    no one's message.  A message may come before any answer: codex re-sends a request
    that a steer overtook, pi delivers a steer queued while idle with the prompt."""
    texts = []
    for kind, text in _TURNS[api](body):
        text = _REMINDER.sub("", text).strip() if kind == USER else ""
        if text and not _TAGGED.fullmatch(text):
            texts.append(text)
    return texts[-1] if len(texts) > 1 else None


_TAGGED = re.compile(r"<([A-Za-z_][\w-]*)>.*</\1>", re.DOTALL)


def tool_results(api: str, body: JsonObject) -> int:
    """How many tool results the request's conversation holds (the loop's count)."""
    return sum(1 for kind, _ in _TURNS[api](body) if kind == TOOL_RESULT)


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


def _shell_args(name: str, command: str) -> JsonObject:
    if name == "exec_command":
        return {"cmd": command, "login": False}  # no login shell: no profile noise
    if name in ("shell", "local_shell"):
        return {"command": ["bash", "-lc", command]}
    if name in ("Bash", "run_shell_command"):
        return {"command": command, "description": "Run a shell command"}
    return {"command": command}


def _call_args(script: Script, name: str) -> JsonObject:
    args = script.tool_args if script.tool_args is not None else _shell_args(name, script.command)
    return dict(args)


def _tool_name(script: Script, api: str, offered: set[str] | None) -> str:
    if script.tool_name is not None:
        return script.tool_name
    if api == RESPONSES and offered:
        for name in _CODEX_SHELLS:
            if name in offered:
                return name
    return SHELL_TOOLS[api]


@dataclass(frozen=True)
class Answer:
    text: str | None
    tool: tuple[str, JsonObject] | None
    n: int = 1
    """Which answer of the conversation this is, in a loop (else 1): its ids carry it,
    since a CLI may take two answers with one message id for one message (claude does)."""

    def uid(self, base: str) -> str:
        """``base``, made unique to this answer after the first."""
        return base if self.n == 1 else f"{base}-{self.n}"

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool else "stop"


def decide(script: Script, body: JsonObject, api: str = CHAT) -> Answer:
    tool_output = _TOOL_OUTPUT[api](body)
    offered = _offered_tools(api, body)
    name = _tool_name(script, api, offered)
    can_call = script.use_tool and (offered is None or name in offered)
    n = 1
    if script.loop:
        n = 1 + sum(1 for kind, _ in _TURNS[api](body) if kind == ASSISTANT)
        message = later_user_message(api, body) if script.heed_messages else None
        if message is not None:
            return Answer(script.reply_text.replace("{message}", message), None, n)
        if can_call and tool_results(api, body) < script.loop_limit:
            return Answer(None, (name, _call_args(script, name)), n)
    elif tool_output is None and can_call:
        return Answer(None, (name, _call_args(script, name)))
    summary = _summarize(tool_output) if tool_output is not None else ""
    if script.final_text is not None:
        text = script.final_text.replace("{tool_output}", summary)
    elif tool_output is not None:
        text = f"I ran {name} and it printed: {summary}"
    else:
        text = "Hello from the mock model."
    return Answer(text, None, n)


def split_parts(text: str, n: int) -> list[str]:
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    parts: list[str] = []
    pos = 0
    for i in range(n):
        end = pos + size + (1 if i < extra else 0)
        parts.append(text[pos:end])
        pos = end
    return [p for p in parts if p] or [text]


def halves(s: str) -> list[str]:
    half = len(s) // 2
    return [p for p in (s[:half], s[half:]) if p]
