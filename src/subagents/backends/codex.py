"""Codex (`@openai/codex`) via ``codex exec --json``.

Stream facts (codex 0.169, see tests/fixtures/streams/codex*.jsonl):

* ``item.started`` / ``item.completed`` carry items; ``command_execution``,
  ``file_change``, ``mcp_tool_call`` and ``web_search`` are tool calls (some only
  ever arrive completed), ``agent_message`` is assistant text, ``reasoning`` is
  thinking, an ``error`` item is a warning;
* ``turn.completed`` ends the run: its usage is a running total whose
  ``input_tokens`` include the cached ones; no cost, no model id, no stop reason;
* ``turn.failed`` ends it as a failure;
* a top-level ``error`` is often a reconnect notice ("Reconnecting... 1/5"): on
  its own it is not the end.
"""

from __future__ import annotations

import json

from subagents.backends.base import Backend, CommandRequest, Normalizer, text_blocks
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, Usage

TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def _unwrap_error(message: JsonValue) -> str:
    """Codex passes the server's JSON error body through as the message; keep its text."""
    text = str(message or "").strip()
    if text.startswith("{"):
        try:
            body: JsonValue = json.loads(text)
        except ValueError:
            return text
        inner = body.get("error") if isinstance(body, dict) else None
        said = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(said, str) and said:
            return said
        if isinstance(inner, str) and inner:
            return inner
        said = body.get("message") if isinstance(body, dict) else None
        if isinstance(said, str) and said:
            return said
    return text


def _codex_usage(u: JsonValue) -> Usage:
    if not isinstance(u, dict):
        return ev.empty_usage()
    total_in = ev.count(u.get("input_tokens"))
    cache_read = ev.count(u.get("cached_input_tokens"))
    cache_write = ev.count(u.get("cache_write_input_tokens"))
    out = ev.count(u.get("output_tokens"))  # includes reasoning_output_tokens
    return {
        # Codex counts cached tokens inside input_tokens; canonical input is the rest.
        "input": max(0, total_in - cache_read - cache_write),
        "output": out,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": total_in + out,
        "cost": None,  # codex reports no cost
    }


def _tool_args(item: JsonObject) -> JsonObject:
    kind = item.get("type")
    if kind == "command_execution":
        return {"command": item.get("command", "")}
    if kind == "file_change":
        return {"changes": item.get("changes") or []}
    if kind == "mcp_tool_call":
        return {
            "server": item.get("server"),
            "tool": item.get("tool"),
            "arguments": item.get("arguments"),
        }
    if kind == "web_search":
        return {"query": item.get("query", "")}
    return {}


def _tool_outcome(item: JsonObject) -> tuple[bool, str]:
    kind = item.get("type")
    status = item.get("status")
    failed = status in ("failed", "declined")
    if kind == "command_execution":
        code = item.get("exit_code")
        failed = failed or (isinstance(code, int) and code != 0)
        return failed, str(item.get("aggregated_output") or "")
    if kind == "file_change":
        changes = item.get("changes")
        text = "\n".join(
            f"{c.get('kind', 'update')} {c.get('path', '')}"
            for c in (changes if isinstance(changes, list) else [])
            if isinstance(c, dict)
        )
        return failed, text
    if kind == "mcp_tool_call":
        err = item.get("error")
        said = err.get("message") if isinstance(err, dict) else None
        if said:
            return True, str(said)
        result = item.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        return failed, text_blocks(content, "\n") if isinstance(content, list) else ""
    return failed, ""


class CodexNormalizer(Normalizer):
    def __init__(self) -> None:
        super().__init__()
        self._started: set[str] = set()

    def feed(self, obj: JsonObject) -> list[ev.Event]:
        t = obj.get("type")
        if t == "item.completed":
            self.terminal = False
            return self._item_completed(obj.get("item"))
        if t == "thread.started":
            thread = obj.get("thread_id")
            if isinstance(thread, str) and thread:
                self.session_id = thread
            return []
        if t == "item.started":
            self.terminal = False
            return self._item_started(obj.get("item"))
        if t == "turn.completed":
            return self._turn_completed(obj)
        if t == "turn.failed":
            return self._turn_failed(obj)
        if t == "turn.started":
            self.terminal = False
            return []
        if t == "error":
            # Often "Reconnecting... n/5": worth a notice, not the end. Remembered in
            # case the stream stops here without a turn.failed.
            message = _unwrap_error(obj.get("message"))
            self.error_message = message
            return [ev.notice("warn", message)]
        return []

    def _item_started(self, item: JsonValue) -> list[ev.Event]:
        if not isinstance(item, dict) or item.get("type") not in TOOL_ITEMS:
            return []
        item_id = str(item.get("id", ""))
        if item_id in self._started:
            return []
        self._started.add(item_id)
        self.tool_calls += 1
        self.stop_reason, self.raw_stop_reason = ev.TOOL_USE, None
        return [ev.tool_call(item_id, str(item["type"]), _tool_args(item))]

    def _item_completed(self, item: JsonValue) -> list[ev.Event]:
        if not isinstance(item, dict):
            return []
        kind = item.get("type")
        if kind == "agent_message":
            text = str(item.get("text") or "")
            return [self._answer(text, None, None)] if text.strip() else []
        if kind == "reasoning":
            text = str(item.get("text") or "")
            return [ev.thinking(text)] if text.strip() else []
        if kind == "error":
            return [ev.notice("warn", str(item.get("message") or "codex reported an error item"))]
        if kind in TOOL_ITEMS:
            out = self._item_started(item)  # completed without a start: the call is news too
            item_id = str(item.get("id", ""))
            self._started.discard(item_id)  # done: memory stays with the running calls
            is_error, text = _tool_outcome(item)
            out.append(ev.tool_result(item_id, str(kind), is_error, text))
            return out
        return []

    def _turn_completed(self, obj: JsonObject) -> list[ev.Event]:
        # Usage is the thread's running total: replace, never add.
        self.usage = _codex_usage(obj.get("usage"))
        # Codex gives no stop reason; a completed turn is a normal stop.
        self.stop_reason, self.raw_stop_reason = ev.STOP, None
        self.failed = False
        self.terminal = True
        return [ev.usage(self.usage.copy())]

    def _turn_failed(self, obj: JsonObject) -> list[ev.Event]:
        err = obj.get("error")
        message = _unwrap_error(err.get("message") if isinstance(err, dict) else err)
        self.error_message = message or "codex reported the turn failed"
        self.stop_reason, self.raw_stop_reason = ev.ERROR, None
        self.failed = True
        self.terminal = True
        out: list[ev.Event] = [ev.error(self.error_message, fatal=False)]
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage = _codex_usage(usage)
            out.append(ev.usage(self.usage.copy()))
        return out


def _toml_string(text: str) -> str:
    """A TOML basic string for ``-c key=value`` (codex parses the value as TOML)."""
    # JSON escapes (\", \\, \n, \uXXXX for control characters) are valid TOML;
    # ensure_ascii=False avoids surrogate-pair escapes, which TOML rejects.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


class CodexBackend(Backend):
    name = "codex"
    default_binary = "codex"
    install_hint = "npm install -g @openai/codex"
    supports_tools = False  # codex exec has no per-run tool allow list
    supports_system_prompt = True  # appended as developer instructions
    can_continue = True
    reads_task_from_stdin = True  # the prompt "-": read it from stdin

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        # The session is recorded (in $CODEX_HOME) so that a run can be continued:
        # `exec resume ID` takes the cwd from the process, which is the run's cwd.
        argv = [binary, "exec", *(["resume"] if req.resume else [])]
        argv += [
            "--json",
            "--skip-git-repo-check",
            # Headless: never ask for an approval. Same trust as the other backends'
            # no-prompt modes; run it where the agent may act.
            "--dangerously-bypass-approvals-and-sandbox",
        ]
        if not req.resume:
            argv.append("--cd=" + req.cwd)
        if req.model:
            argv.append("--model=" + req.model)
        prompt = req.system_prompt
        if not prompt and req.system_prompt_file:
            with open(req.system_prompt_file, encoding="utf-8") as f:
                prompt = f.read()
        if prompt:
            argv.append("--config=developer_instructions=" + _toml_string(prompt))
        argv += req.extra_args
        # After "--" the task is never an option; a lone "-" would mean "read stdin".
        task = "-" if req.task_on_stdin else " -" if req.task == "-" else req.task
        argv += ["--", *([req.resume] if req.resume else []), task]
        return argv

    def normalizer(self) -> Normalizer:
        return CodexNormalizer()
