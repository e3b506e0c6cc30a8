"""Gemini CLI (`@google/gemini-cli`) with ``--output-format stream-json``.

Stream facts (gemini 0.61, see tests/fixtures/streams/gemini*.jsonl):

* ``init`` names the model; ``message`` lines with ``role: assistant`` arrive as
  ``delta: true`` chunks to accumulate;
* ``tool_use`` / ``tool_result`` pair up by ``tool_id`` (the result has no name);
* ``error`` lines have a ``severity`` (warning | error) and are not the end;
* ``result`` is the last line: ``status`` success | error, usage in ``stats``,
  no cost; with status error the message is in ``error.message`` or, for an
  invalid stream (e.g. a truncated answer), in the ``error`` line before it;
* the exit code may be an HTTP status mod 256 (400 -> 144): never read it.
"""

from __future__ import annotations

import json

from subagents.backends.base import Backend, CommandRequest, Fed, Normalizer
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, Usage

# How gemini says an answer was cut at the token limit (MAX_TOKENS_EXCEEDED_SUGGESTION).
_TRUNCATED_MARKERS = ("truncated because it exceeded the token limit", "MAX_TOKENS")


def _gemini_usage(stats: JsonValue) -> Usage:
    if not isinstance(stats, dict):
        return ev.empty_usage()
    total_in = ev.count(stats.get("input_tokens"))
    cached = ev.count(stats.get("cached"))
    fresh = stats.get("input")
    out = ev.count(stats.get("output_tokens"))
    total = stats.get("total_tokens")
    inp = int(fresh) if isinstance(fresh, int) else max(0, total_in - cached)
    return {
        "input": inp,
        "output": out,
        "cacheRead": cached,
        "cacheWrite": 0,
        "totalTokens": int(total) if isinstance(total, int) else inp + cached + out,
        "cost": None,  # gemini reports no cost
    }


def _api_error(message: str) -> str:
    """``[API Error: {"error": {"message": "..."}}]`` -> ``API error: ...``; else as is."""
    prefix = "[API Error: "
    if not (message.startswith(prefix) and message.endswith("]")):
        return message
    inner = message[len(prefix) : -1].strip()
    try:
        body: JsonValue = json.loads(inner)
    except ValueError:
        return f"API error: {inner}"
    err = body.get("error") if isinstance(body, dict) else None
    text = err.get("message") if isinstance(err, dict) else None
    return f"API error: {text}" if isinstance(text, str) and text else f"API error: {inner}"


class GeminiNormalizer(Normalizer):
    def __init__(self) -> None:
        super().__init__()
        self._text: list[str] = []
        self._tool_names: dict[str, str] = {}
        self._truncated = False
        self._last_error: str | None = None
        # Inside a model response (its text, its tool calls) until a tool result comes.
        self._responding = False

    def _responds(self) -> None:
        """An assistant message or tool call: part of a model response."""
        self._responding = True

    def _responded(self) -> None:
        """A tool result or the end: the model response before it was one turn."""
        if self._responding:
            self._responding = False
            self.turns += 1

    def feed(self, obj: JsonObject) -> Fed:
        return self._fed(self._read(obj))

    def _read(self, obj: JsonObject) -> list[ev.Event]:
        t = obj.get("type")
        if t == "init" and self.session_id is None:
            session = obj.get("session_id")
            if isinstance(session, str) and session:
                self.session_id = session  # `gemini --resume ID` resumes it
        if t == "message":
            if obj.get("role") == "assistant":
                self.terminal = False
                self._responds()
                content = obj.get("content")
                text = content if isinstance(content, str) else ""
                if obj.get("delta"):
                    self._text.append(text)
                else:  # a whole message
                    self._text = [text]
            return []
        if t == "tool_use":
            self.terminal = False
            self._responds()
            out = self._flush(ev.TOOL_USE)
            call_id = str(obj.get("tool_id", ""))
            name = str(obj.get("tool_name", ""))
            self._tool_names[call_id] = name
            self.tool_calls += 1
            out.append(ev.tool_call(call_id, name, obj.get("parameters")))
            return out
        if t == "tool_result":
            self._responded()
            call_id = str(obj.get("tool_id", ""))
            is_error = obj.get("status") == "error"
            output = obj.get("output")
            err = obj.get("error")
            said = err.get("message") if isinstance(err, dict) else None
            if is_error and said and not output:
                output = said
            return [
                ev.tool_result(
                    # One result a call: forgotten then, so memory stays with the running calls.
                    call_id,
                    self._tool_names.pop(call_id, ""),
                    is_error,
                    str(output or ""),
                )
            ]
        if t == "error":
            message = str(obj.get("message") or "").strip()
            if any(m in message for m in _TRUNCATED_MARKERS):
                self._truncated = True
            if obj.get("severity") == "error":
                self._last_error = message or self._last_error
                return [ev.notice("error", message)] if message else []
            return [ev.notice("warn", message)] if message else []
        if t == "result":
            self._responded()
            return self._result(obj)
        if t == "init":
            model = obj.get("model")
            if isinstance(model, str) and model:
                self.model = model
        return []

    def _flush(self, stop: str | None) -> list[ev.Event]:
        """Emit the text gathered so far as one assistant message ending with ``stop``."""
        text = "".join(self._text)
        self._text = []
        self.stop_reason, self.raw_stop_reason = stop, None
        if not text.strip():
            return []
        self.final_text = text
        self.saw_answer = True
        return [ev.assistant_text(text, stop, None, self.model)]

    def _result(self, obj: JsonObject) -> list[ev.Event]:
        stats = obj.get("stats")
        models = stats.get("models") if isinstance(stats, dict) else None
        if isinstance(models, dict) and len(models) == 1:
            self.model = str(next(iter(models)))  # the model that actually answered
        self.usage = _gemini_usage(stats)
        failed = obj.get("status") != "success"
        # Gemini gives no stop reason; derive it (length when the stream said the
        # answer was cut, which it may still call a success).
        stop = ev.LENGTH if self._truncated else (ev.ERROR if failed else ev.STOP)
        out = self._flush(stop)
        self.terminal = True
        self.failed = failed
        if failed:
            err = obj.get("error")
            message = err.get("message") if isinstance(err, dict) else None
            message = _api_error(str(message)) if message else self._last_error
            self.error_message = message or f"gemini ended with status {obj.get('status')!r}"
            out.append(ev.error(self.error_message, fatal=False))
        out.append(ev.usage(self.usage.copy()))
        return out

    def finish(self) -> list[ev.Event]:
        # The stream stopped mid-answer: keep what was said (not terminal).
        return self._flush(None) if self._text else []


class GeminiBackend(Backend):
    name = "gemini"
    default_binary = "gemini"
    install_hint = "npm install -g @google/gemini-cli"
    # Gemini CLI has no per-run tool allow list (only settings and policy files) and
    # only a full system-prompt replacement (GEMINI_SYSTEM_MD), not an addition.
    supports_tools = False
    supports_system_prompt = False
    reads_task_from_stdin = True  # piped stdin comes before the --prompt text
    can_continue = True  # --resume SESSION_ID
    tested_versions = ("0.61.0",)
    reports_cost = False
    live_cost = False

    def stdin_task(self, task: str) -> str:
        return " " + task if task.startswith("/") else task  # not a slash command

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        # "--prompt=TASK" keeps a task starting with "-" a value; a leading "/" would
        # be taken for a slash command, so such a task gets a leading space.
        task = " " + req.task if req.task.startswith("/") else req.task
        # With the task on stdin, the empty prompt is appended to it: the task alone.
        prompt = "" if req.task_on_stdin else task
        argv = [binary, "--prompt=" + prompt, "--output-format", "stream-json"]
        if req.model:
            argv.append("--model=" + req.model)
        # Headless: approve every tool call; trust the working directory for this run.
        argv += ["--approval-mode", "yolo", "--skip-trust"]
        if req.resume:
            argv.append("--resume=" + req.resume)
        argv += req.extra_args
        return argv

    def normalizer(self) -> Normalizer:
        return GeminiNormalizer()
