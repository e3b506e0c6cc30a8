"""OpenCode (`opencode-ai`) via ``opencode run --format json``.

Stream facts (opencode 1.18, see tests/fixtures/streams/opencode*.jsonl):

* only completed parts are printed: ``text``, ``reasoning``, ``tool_use`` (with
  its final state, so a call and its result arrive together);
* a model step is ``step_start`` ... ``step_finish``; ``part.reason`` is the
  step's finish reason: ``tool-calls`` means another step follows, anything
  else on the last step ends the run;
* usage is per ``step_finish`` (``tokens``, ``cost``) and is summed; ``input``
  already excludes cached tokens and ``output`` excludes reasoning;
* an ``error`` line (e.g. an API error) ends the run as a failure; no model id.
"""

from __future__ import annotations

from subagents.backends.base import Backend, CommandRequest, Fed, Normalizer
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, Usage


def _step_usage(part: JsonObject) -> Usage:
    tokens = part.get("tokens")
    tokens = tokens if isinstance(tokens, dict) else {}
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    inp, out, reasoning = (
        ev.count(tokens.get("input")),
        ev.count(tokens.get("output")),
        ev.count(tokens.get("reasoning")),
    )
    read, write = ev.count(cache.get("read")), ev.count(cache.get("write"))
    total = tokens.get("total")
    cost = part.get("cost")
    return {
        "input": inp,
        "output": out + reasoning,
        "cacheRead": read,
        "cacheWrite": write,
        "totalTokens": ev.count(total)
        if total is not None
        else inp + out + reasoning + read + write,
        "cost": ev.number(cost),
    }


def _error_message(err: JsonValue) -> str:
    if not isinstance(err, dict):
        return str(err or "opencode reported an error")
    data = err.get("data")
    data = data if isinstance(data, dict) else {}
    name = err.get("name")
    message = data.get("message") or err.get("message") or ""
    status = data.get("statusCode")
    head = str(name or "error") + (f" (HTTP {status})" if status else "")
    return f"{head}: {message}" if message else head


class OpenCodeNormalizer(Normalizer):
    def __init__(self) -> None:
        super().__init__()
        self._text: list[str] = []
        self._step_calls = 0

    def feed(self, obj: JsonObject) -> Fed:
        return self._fed(self._read(obj))

    def _read(self, obj: JsonObject) -> list[ev.Event]:
        t = obj.get("type")
        if self.session_id is None:
            session = obj.get("sessionID")
            if isinstance(session, str) and session:
                self.session_id = session  # `opencode run --session ID --fork` resumes it
        part = obj.get("part")
        part = part if isinstance(part, dict) else {}
        if t == "text":
            self.terminal = False
            text = part.get("text")
            if isinstance(text, str) and text:
                self._text.append(text)
            return []
        if t == "tool_use":
            self.terminal = False
            return self._tool(part)
        if t == "step_start":
            self.terminal = False
            self._text = []
            self._step_calls = 0
            return []
        if t == "step_finish":
            return self._step_finish(part)
        if t == "reasoning":
            text = part.get("text")
            return [ev.thinking(text)] if isinstance(text, str) and text.strip() else []
        if t == "error":
            self.error_message = _error_message(obj.get("error"))
            self.stop_reason, self.raw_stop_reason = ev.ERROR, None
            self.failed = True
            self.terminal = True
            return [ev.error(self.error_message, fatal=False)]
        return []

    def _tool(self, part: JsonObject) -> list[ev.Event]:
        state = part.get("state")
        state = state if isinstance(state, dict) else {}
        call_id = str(part.get("callID") or part.get("id") or "")
        name = str(part.get("tool", ""))
        self.tool_calls += 1
        self._step_calls += 1
        out: list[ev.Event] = [ev.tool_call(call_id, name, state.get("input"))]
        status = state.get("status")
        if status in ("completed", "error"):
            is_error = status == "error"
            text = state.get("error") if is_error else state.get("output")
            out.append(ev.tool_result(call_id, name, is_error, str(text or "")))
        return out

    def _step_finish(self, part: JsonObject) -> list[ev.Event]:
        self.turns += 1  # a step is one model response
        usage = _step_usage(part)
        ev.add_usage(self.usage, usage)
        raw = part.get("reason")
        raw = raw if isinstance(raw, str) else None
        stop = ev.canonical_stop_reason(raw)
        if stop is None:
            stop = ev.TOOL_USE if self._step_calls else ev.STOP
        text = "\n\n".join(self._text)
        self._text = []
        self.stop_reason, self.raw_stop_reason = stop, raw
        if text.strip():
            self.final_text = text
            self.saw_answer = True
        out: list[ev.Event] = []
        if text.strip() or stop != ev.TOOL_USE:
            out.append(ev.assistant_text(text, stop, raw, self.model, usage))
        # "tool-calls" means another step follows; any other reason on the last
        # step is the end (a later step_start disarms it).
        self.terminal = stop != ev.TOOL_USE
        if self.terminal:
            self.failed = stop in ev.TERMINAL_FAILURE
            if self.failed:
                self.error_message = self.error_message or f"the model stopped with {raw or stop}"
        out.append(ev.usage(self.usage.copy()))
        return out

    def finish(self) -> list[ev.Event]:
        # The stream stopped inside a step: keep what was said (not terminal).
        text = "\n\n".join(self._text)
        self._text = []
        if not text.strip():
            return []
        self.final_text = text
        self.saw_answer = True
        return [ev.assistant_text(text, None, None, self.model)]


def _message_args(task: str) -> list[str]:
    """The task as ``--message=`` words that `opencode run` joins back unchanged.

    opencode joins its message words with " " and wraps any word holding a space
    in quotes (escaping inner quotes), so a task given as one word would reach
    the model quoted. Split on " " the words hold no space and join back exactly.
    ``--message=word`` keeps a word starting with "-" a value and a numeric word
    a string (words after ``--`` are coerced to numbers and crash opencode); the
    option parser strips one pair of matching outer quotes from such a value, so
    a word wrapped in quotes gets one more pair.
    """
    out = []
    for word in task.split(" "):
        if len(word) >= 2 and word[0] in "\"'" and word[-1] == word[0]:
            word = word[0] + word + word[0]
        out.append("--message=" + word)
    return out


class OpenCodeBackend(Backend):
    name = "opencode"
    default_binary = "opencode"
    install_hint = "npm install -g opencode-ai"
    # `opencode run` has no per-run tool allow list or system prompt option (both
    # live in opencode's agent configuration).
    supports_tools = False
    supports_system_prompt = False
    reads_task_from_stdin = True  # `opencode run` with no message reads stdin
    can_continue = True  # --session ID --fork: a new session holding the old one's turns
    tested_versions = ("1.18.33",)

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        argv = [binary, "run", "--format", "json"]
        if req.model:
            argv.append("--model=" + req.model)  # provider/model
        # Headless: approve permission requests instead of waiting for a person.
        argv.append("--auto")
        if req.resume:
            argv += ["--session=" + req.resume, "--fork"]
        argv += req.extra_args
        if not req.task_on_stdin:
            argv += _message_args(req.task)
        return argv

    # opencode takes its project directory from $PWD, not from getcwd(): the
    # supervisor sets PWD to the run's cwd for every child.

    def normalizer(self) -> Normalizer:
        return OpenCodeNormalizer()
