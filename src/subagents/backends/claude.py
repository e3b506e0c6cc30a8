"""Claude Code (`@anthropic-ai/claude-code`) in print mode with stream-json output.

Stream facts (claude 2.1, see tests/fixtures/streams/claude*.jsonl):

* one ``assistant`` line per content block, several sharing a message id, each
  repeating that message's usage; ``stop_reason`` is always null there, so a
  tool-use turn is known from its ``tool_use`` blocks;
* tool results come back in ``user`` lines as ``tool_result`` blocks;
* ``result`` is the last line: it carries the stop reason, the run's usage and
  ``total_cost_usd``; it may say ``subtype: success`` with ``is_error: true``
  (an API error), which is a failure;
* ``stream_event`` lines (``--include-partial-messages``) repeat what the
  ``assistant`` lines say, so they are never parsed.

Every run takes its input as stream-json (``--input-format stream-json``): the task is the
first user line on stdin, a message sent later another one. claude hands a message that
comes while a tool runs to the model with that tool's result (a steer); one that comes
while it writes its answer, or after a ``result``, starts a new turn (a follow-up) with a
new ``result``. ``--replay-user-messages`` echoes each user line as claude takes it
(``isReplay``): the *delivered* receipt. Closing stdin lets it exit.
"""

from __future__ import annotations

import json
import os

from subagents.backends.base import Backend, CommandRequest, Fed, Normalizer, text_blocks
from subagents.backends.claudeprompt import PROMPT_TOOL, SERVER
from subagents.backends.tools import tools_for
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, LimitKind, Usage

# What a root user may run without prompts (claude refuses bypassPermissions as root).
ROOT_ALLOWED_TOOLS = (
    "Bash",
    "Edit",
    "MultiEdit",
    "Write",
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookEdit",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "Task",
)


def _claude_usage(u: JsonValue, cost: JsonValue = None) -> Usage:
    if not isinstance(u, dict):
        u = {}
    inp = ev.count(u.get("input_tokens"))
    out = ev.count(u.get("output_tokens"))
    cache_read = ev.count(u.get("cache_read_input_tokens"))
    cache_write = ev.count(u.get("cache_creation_input_tokens"))
    return {
        "input": inp,
        "output": out,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": inp + out + cache_read + cache_write,
        "cost": ev.number(cost),
    }


def _counts(usage: Usage) -> tuple[int, int, int, int, int]:
    """The token counts of a usage: all whole numbers, so a running sum stays exact.
    (An assistant line carries no cost; only the result line does.)"""
    return (
        usage["input"],
        usage["output"],
        usage["cacheRead"],
        usage["cacheWrite"],
        usage["totalTokens"],
    )


def _errors_text(obj: JsonObject) -> str:
    errors = obj.get("errors")
    if isinstance(errors, list):
        return "; ".join(str(e) for e in errors if e)
    return ""


def _user_line(text: str) -> bytes:
    line = {"type": "user", "message": {"role": "user", "content": text}}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


# claude's own bound that ended a turn (its result's terminal_reason): the budget's kind.
_OWN_LIMITS: dict[JsonValue, LimitKind] = {"max_turns": "turns", "budget_exhausted": "cost"}
# The id claude's echo of the task is matched to.
TASK_ID = "task"
# Why a steer claude took after its answer is a follow-up now.
LATE_STEER = "claude was writing its answer: it takes the message after it, as a follow-up"


class ClaudeNormalizer(Normalizer):
    skip_prefixes = (b'{"type":"stream_event"',)
    live = True

    def __init__(self) -> None:
        super().__init__()
        self._tool_names: dict[str, str] = {}
        # Token counts per assistant message id (claude repeats a message's usage on
        # every block of it) since the last result; the results' sum (each counts its own
        # turn, its cost is the session's so far); and the running total, kept up to date
        # message by message from that sum.
        self._message_usage: dict[str, tuple[int, int, int, int, int]] = {}
        self._results_total = ev.empty_usage()
        self._usage_total = ev.empty_usage()
        # User lines written that claude has not echoed yet: (id, text), oldest first.
        self._pending: list[tuple[str, str]] = []
        self._interrupts = 0

    # ---- input ----

    def begin(self, req: CommandRequest) -> Fed:
        self._pending.append((TASK_ID, req.task))
        fed = Fed()
        fed.write(_user_line(req.task))
        return fed

    def steer(self, message_id: str, text: str) -> Fed:
        self._pending.append((message_id, text))
        fed = Fed()
        fed.write(_user_line(text))
        fed.receipt(message_id, "queued")  # written: claude reads it when it can
        return fed

    def follow_up(self, message_id: str, text: str) -> Fed:
        self._pending.append((message_id, text))
        fed = Fed()
        fed.write(_user_line(text))
        return self._going_on(fed)

    def abort(self) -> Fed:
        self._interrupts += 1
        request = {
            "type": "control_request",
            "request_id": f"interrupt-{self._interrupts}",
            "request": {"subtype": "interrupt"},
        }
        fed = Fed()
        fed.write(json.dumps(request, separators=(",", ":")).encode() + b"\n")
        return fed

    def held_input(self) -> Fed | None:
        # A line claude has not taken yet starts a new turn after this result.
        late = [i for i, _ in self._pending if i != TASK_ID]
        if not late:
            return None
        fed = Fed()
        for message_id in late:
            fed.receipt(message_id, "queued", LATE_STEER)
        return self._going_on(fed)

    def _echoed(self, text: str, fed: Fed) -> None:
        for i, (message_id, sent) in enumerate(self._pending):
            if sent == text:
                del self._pending[i]
                if message_id != TASK_ID:
                    fed.receipt(message_id, "delivered")
                return

    def feed(self, obj: JsonObject) -> Fed:
        t = obj.get("type")
        if t == "assistant":
            self.terminal = False
            return self._fed(self._assistant(obj))
        if t == "user":
            self.terminal = False
            if obj.get("isReplay"):
                message = obj.get("message")
                content = message.get("content") if isinstance(message, dict) else None
                said = Fed()
                self._echoed(
                    content if isinstance(content, str) else text_blocks(content, ""), said
                )
                return self._fed([], said)
            return self._fed(self._user(obj))
        if t == "result":
            return self._fed(self._result(obj))
        if t == "system":
            return self._fed(self._system(obj))
        return self._fed([])

    def _system(self, obj: JsonObject) -> list[ev.Event]:
        sub = obj.get("subtype")
        if sub == "init":
            session = obj.get("session_id")
            if isinstance(session, str) and session:
                self.session_id = session
            model = obj.get("model")
            if isinstance(model, str) and model and not self.model:
                self.model = model
            return []
        if sub == "api_retry":
            self.terminal = False
            why = obj.get("error_status") or obj.get("error") or "error"
            msg = f"API request failed ({why}); retry {obj.get('attempt')}/{obj.get('max_retries')}"
            delay = obj.get("retry_delay_ms")
            if isinstance(delay, (int, float)):
                msg += f" in {delay / 1000:.1f}s"
            return [ev.notice("warn", msg)]
        return []

    def _assistant(self, obj: JsonObject) -> list[ev.Event]:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return []
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        nested = obj.get("parent_tool_use_id") is not None  # a sub-agent's message (Task tool)
        out: list[ev.Event] = []
        texts: list[str] = []
        has_calls = False
        for b in blocks:
            if not isinstance(b, dict):
                continue
            bt = b.get("type")
            if bt == "text" and not nested:
                texts.append(str(b.get("text", "")))
            elif bt == "thinking" and not nested and str(b.get("thinking", "")).strip():
                out.append(ev.thinking(str(b["thinking"])))
            elif bt == "tool_use":
                has_calls = True
                call_id = str(b.get("id", ""))
                name = str(b.get("name", ""))
                self._tool_names[call_id] = name
                self.tool_calls += 1
                out.append(ev.tool_call(call_id, name, b.get("input")))
        if nested:
            return out
        model = msg.get("model")
        raw = msg.get("stop_reason")
        answer = self._answer(
            "\n".join(texts),
            raw if isinstance(raw, str) else None,
            model if isinstance(model, str) else None,
            has_tool_calls=has_calls,
        )
        if texts:
            out.insert(0, answer)
        # The result, not an assistant line, ends the run.
        self.terminal = False
        msg_id, reported = msg.get("id"), msg.get("usage")
        if isinstance(msg_id, str) and isinstance(reported, dict):
            usage = _claude_usage(reported)
            counts = _counts(usage)
            before = self._message_usage.get(msg_id)
            if before is None:
                self.turns += 1  # a new message: a new model response
                before = (0, 0, 0, 0, 0)
            self._message_usage[msg_id] = counts
            grown = [now - was for now, was in zip(counts, before, strict=True)]
            total = self._usage_total
            total["input"] += grown[0]
            total["output"] += grown[1]
            total["cacheRead"] += grown[2]
            total["cacheWrite"] += grown[3]
            total["totalTokens"] += grown[4]
            self.usage = total.copy()
            out.append(ev.usage(self.usage.copy()))
        return out

    def _user(self, obj: JsonObject) -> list[ev.Event]:
        msg = obj.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            return []
        out: list[ev.Event] = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                call_id = str(b.get("tool_use_id", ""))
                out.append(
                    ev.tool_result(
                        call_id,
                        # Each call has one result: forgetting it keeps memory to the
                        # calls still running, however long the run.
                        self._tool_names.pop(call_id, ""),
                        bool(b.get("is_error")),
                        text_blocks(b.get("content"), "\n"),
                    )
                )
        return out

    def _result(self, obj: JsonObject) -> list[ev.Event]:
        subtype = obj.get("subtype")
        failed = bool(obj.get("is_error")) or (subtype is not None and subtype != "success")
        raw = obj.get("stop_reason")
        raw = raw if isinstance(raw, str) else None
        stop = ev.canonical_stop_reason(raw)
        if stop is None:
            stop = ev.ERROR if failed else ev.STOP
        self.stop_reason, self.raw_stop_reason = stop, raw
        self.terminal = True
        self.failed = failed
        # A result's usage is its own turn's, its cost the session's so far: the turns add
        # up, the cost is the latest (a follow-up's result comes after the first's).
        turn = _claude_usage(obj.get("usage"), obj.get("total_cost_usd"))
        totals = self._results_total
        cost = turn["cost"] if turn["cost"] is not None else totals["cost"]
        ev.add_usage(totals, turn)
        totals["cost"] = cost
        self.usage = totals.copy()
        self._message_usage.clear()  # the next turn's messages are new ones
        self._usage_total = totals.copy()
        self.own_limit = _OWN_LIMITS.get(obj.get("terminal_reason"))
        out: list[ev.Event] = []
        text = obj.get("result")
        if failed:
            self.error_message = self._failure_message(obj)
            out.append(ev.error(self.error_message, fatal=False))
        elif isinstance(text, str) and text.strip():
            self.final_text = text
            self.saw_answer = True
        if not failed and "structured_output" in obj:
            self.structured = obj["structured_output"]
            self.has_structured = True
            if not self.saw_answer:  # the answer is the value (claude's result text is "")
                self.final_text = json.dumps(self.structured, ensure_ascii=False)
                self.saw_answer = True
        denials = obj.get("permission_denials")
        if isinstance(denials, list) and denials:
            names = sorted({str(d.get("tool_name", "?")) for d in denials if isinstance(d, dict)})
            out.append(
                ev.notice("warn", f"claude denied {len(denials)} tool call(s): {', '.join(names)}")
            )
        out.append(ev.usage(self.usage.copy()))
        return out

    @staticmethod
    def _failure_message(obj: JsonObject) -> str:
        subtype = obj.get("subtype")
        errors = _errors_text(obj)
        if subtype == "error_max_turns":
            turns = obj.get("num_turns")
            msg = "claude stopped at its turn limit (error_max_turns)"
            if turns is not None:
                msg += f" after {turns} turns"
            return msg + (f": {errors}" if errors else "")
        if subtype == "error_max_budget_usd":
            return "claude stopped at its cost limit (--max-budget-usd)" + (
                f": {errors}" if errors else ""
            )
        if subtype not in (None, "success"):
            return f"claude ended with {subtype}" + (f": {errors}" if errors else "")
        text = obj.get("result")
        detail = text.strip() if isinstance(text, str) and text.strip() else errors
        status = obj.get("api_error_status")
        prefix = (
            f"claude reported an error (API status {status})"
            if status
            else "claude reported an error"
        )
        return prefix + (f": {detail}" if detail else "")


class ClaudeBackend(Backend):
    name = "claude"
    default_binary = "claude"
    install_hint = "npm install -g @anthropic-ai/claude-code"
    supports_tools = True
    supports_system_prompt = True
    can_continue = True
    reads_task_from_stdin = True  # `claude -p` with no prompt argument reads stdin
    tested_versions = ("2.1.330",)
    own_schema = True
    # Requests to act go to our permission server (claudeprompt.py) under --approvals.
    asks = True
    prompt_server = "subagents.backends.claudeprompt"
    # Costs come with each result (a whole turn's work), not as the model answers.
    live_cost = False

    def live_input(self, version: str | None) -> bool:
        return True

    def child_env(self, req: CommandRequest) -> dict[str, str]:
        if req.approvals is None:
            return {}
        # claude's bound on an MCP tool call (ms): the permission call waits for a decision,
        # which the supervisor gives by the item's timeout.
        return {"MCP_TOOL_TIMEOUT": str(int((req.approvals["timeout"] + 120) * 1000))}

    def _is_root(self) -> bool:
        return hasattr(os, "geteuid") and os.geteuid() == 0

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        argv = [binary, "-p", "--output-format", "stream-json", "--verbose"]
        if req.live:
            # The task and later messages on stdin; each echoed as claude takes it.
            argv += ["--input-format", "stream-json", "--replay-user-messages"]
        tools = tools_for("claude", req.tools) if req.tools is not None else None
        if req.approvals is not None and "server" in req.approvals:
            # --approvals: claude asks our permission server (its call waits for the
            # decision) for anything its settings do not already allow.
            argv += ["--permission-mode", "default", "--permission-prompt-tool", PROMPT_TOOL]
            server = req.approvals["server"]
            config = {"mcpServers": {SERVER: {"command": server[0], "args": server[1:]}}}
            argv.append("--mcp-config=" + json.dumps(config))
        # Headless: nothing may wait for a permission answer. claude refuses
        # bypassPermissions for root, so root gets an explicit allow list instead
        # (in print mode anything not allowed is denied, never asked).
        elif self._is_root():
            allowed = tools if tools is not None else list(ROOT_ALLOWED_TOOLS)
            argv += ["--permission-mode", "acceptEdits"]
            if allowed:
                argv.append("--allowedTools=" + ",".join(allowed))
        else:
            argv += ["--permission-mode", "bypassPermissions"]
        # `--opt=value` forms: a value starting with "-" is never read as an option.
        if req.model:
            argv.append("--model=" + req.model)
        if tools is not None:
            argv.append("--tools=" + ",".join(tools))  # "" = no tools
        prompt = req.system_prompt
        if not prompt and req.system_prompt_file:
            with open(req.system_prompt_file, encoding="utf-8") as f:
                prompt = f.read()
        if prompt:
            argv.append("--append-system-prompt=" + prompt)
        if req.resume:
            # A new session of its own that starts from the earlier run's conversation.
            argv += ["--resume=" + req.resume, "--fork-session"]
        # claude's own bounds behind the supervisor's budget (abort-only, checked by claude
        # after each model turn; --max-turns counts per input message).
        if req.own_max_turns is not None:
            argv.append(f"--max-turns={req.own_max_turns}")
        if req.own_max_cost is not None:
            argv.append(f"--max-budget-usd={req.own_max_cost!r}")
        if req.output_schema is not None:
            # claude validates the answer itself (and retries); its result's structured_output.
            argv.append("--json-schema=" + json.dumps(req.output_schema, ensure_ascii=False))
        argv += req.extra_args
        if not (req.task_on_stdin or req.live):  # with no prompt argument, `claude -p` reads stdin
            argv += ["--", req.task]
        return argv

    def normalizer(self) -> Normalizer:
        return ClaudeNormalizer()
