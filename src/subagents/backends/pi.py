"""pi in json mode: `@mariozechner/pi-coding-agent` up to 0.73, `@earendil-works/pi-coding-agent`
since 0.74 (0.87 needs Node >= 22). Both stream shapes are handled; 0.87 adds `agent_end.willRetry`,
`agent_settled`, a `role: "system"` message, `rawStopReason` and delta-only `message_update`s."""

from __future__ import annotations

import json
from pathlib import Path

from subagents.backends.base import Backend, CommandRequest, Normalizer, text_blocks
from subagents.backends.tools import tools_for
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, RunResult, Usage

# Where in a run directory pi keeps the run's session.
SESSION_DIR = "session"
# The provider whose requests `copilot_agent_initiator` marks, and the extension that does it
# (package data beside this module; given to the child only, never installed in pi).
COPILOT_PROVIDER = "github-copilot"
COPILOT_EXTENSION = str(Path(__file__).with_name("pi_copilot.ts"))


def _pi_usage(u: JsonValue) -> Usage:
    if not isinstance(u, dict):
        return ev.empty_usage()
    cost = u.get("cost")
    return {
        "input": ev.count(u.get("input")),
        "output": ev.count(u.get("output")),
        "cacheRead": ev.count(u.get("cacheRead")),
        "cacheWrite": ev.count(u.get("cacheWrite")),
        "totalTokens": ev.count(u.get("totalTokens")),
        "cost": ev.number(cost.get("total") if isinstance(cost, dict) else cost),
    }


def _error_text(message: JsonValue) -> str:
    """pi 0.87 reports an HTTP error as ``"500: {json body}"``; say ``"500 <message>"`` as 0.73 did."""
    text = str(message)
    status, sep, body = text.partition(": ")
    if sep and status.isdigit() and body.startswith("{"):
        try:
            obj: JsonValue = json.loads(body)
        except ValueError:
            return text
        inner = obj.get("error", obj) if isinstance(obj, dict) else None
        msg = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(msg, str) and msg:
            return f"{status} {msg}"
    return text


def _may_use_copilot(model: str | None) -> bool:
    """No provider named (pi's default may be Copilot) or Copilot's: the extension checks
    the provider of each request itself, so this only spares other providers its loading."""
    provider, sep, _ = (model or "").partition("/")
    return not sep or provider == COPILOT_PROVIDER


# Events after which the run is plainly still going: they disarm a pending completion.
_ACTIVITY = frozenset(
    {"agent_start", "turn_start", "tool_execution_start", "auto_retry_start", "compaction_start"}
)


class PiNormalizer(Normalizer):
    # pi repeats the whole partial message on every delta; the final message comes
    # again in message_end, so these lines are mirrored but never parsed. Nor are the
    # lines ``feed`` ignores: message_start, turn_end (the turn's messages again) and
    # agent_end (every message of the run: megabytes on a long run).
    skip_prefixes = (
        b'{"type":"message_update"',
        b'{"type":"tool_execution_update"',
        b'{"type":"message_start"',
        b'{"type":"turn_end"',
        b'{"type":"agent_end"',
    )

    def feed(self, obj: JsonObject) -> list[ev.Event]:
        t = obj.get("type")
        if t in _ACTIVITY:
            self.terminal = False
        # The tool calls first: on a long run they are nearly every line parsed.
        if t == "tool_execution_start":
            self.tool_calls += 1
            return [
                ev.tool_call(
                    str(obj.get("toolCallId", "")), str(obj.get("toolName", "")), obj.get("args")
                )
            ]
        if t == "tool_execution_end":
            result = obj.get("result")
            text = text_blocks(result.get("content")) if isinstance(result, dict) else ""
            return [
                ev.tool_result(
                    str(obj.get("toolCallId", "")),
                    str(obj.get("toolName", "")),
                    bool(obj.get("isError")),
                    text,
                )
            ]
        if t == "message_end":
            return self._message_end(obj.get("message"))
        if t == "auto_retry_start":
            self.failed = False
            msg = f"retrying after error (attempt {obj.get('attempt')}/{obj.get('maxAttempts')}): {_error_text(obj.get('errorMessage', ''))}"
            return [ev.notice("warn", msg)]
        if t == "auto_retry_end" and not obj.get("success"):
            # Retries exhausted: the error message that preceded them is the end.
            self.terminal = ev.is_terminal(self.stop_reason)
            return [
                ev.notice("error", f"retries exhausted: {_error_text(obj.get('finalError', ''))}")
            ]
        if t == "agent_settled":
            self.terminal = self.terminal or ev.is_terminal(self.stop_reason)
        return []

    def skipped(self, tail: bytes) -> None:
        # pi 0.87 says up front that an auto-retry follows, in the last key of agent_end
        # (`{...event, willRetry}`), a line skipped unparsed: the error was not the end.
        # A bare `true}` closing the line can only be that top-level key.
        if tail.rstrip().endswith(b',"willRetry":true}'):
            self.terminal = False

    def _message_end(self, msg: JsonValue) -> list[ev.Event]:
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            return []
        content = msg.get("content")
        parts = content if isinstance(content, list) else []
        text = text_blocks(parts)
        has_calls = any(isinstance(p, dict) and p.get("type") == "toolCall" for p in parts)
        out: list[ev.Event] = []
        for p in parts:
            if (
                isinstance(p, dict)
                and p.get("type") == "thinking"
                and str(p.get("thinking", "")).strip()
            ):
                out.append(ev.thinking(str(p["thinking"])))
        usage = _pi_usage(msg.get("usage"))
        ev.add_usage(self.usage, usage)
        raw_stop, model = msg.get("stopReason"), msg.get("model")
        out.append(
            self._answer(
                text,
                raw_stop if isinstance(raw_stop, str) else None,
                model if isinstance(model, str) else None,
                usage,
                has_calls,
            )
        )
        if self.stop_reason == ev.ERROR or self.stop_reason == ev.ABORTED:
            self.failed = True
            self.error_message = _error_text(
                msg.get("errorMessage") or f"model stopped with {self.stop_reason}"
            )
            out.append(ev.error(self.error_message, fatal=False))
        elif self.stop_reason in ev.TERMINAL_SUCCESS:
            self.failed = False
        out.append(ev.usage(self.usage.copy()))
        return out


class PiBackend(Backend):
    name = "pi"
    default_binary = "pi"
    install_hint = "npm install -g @earendil-works/pi-coding-agent"
    supports_tools = True
    supports_system_prompt = True
    supports_thinking = True
    can_continue = True

    def resume_point(self, run_dir: str, result: RunResult) -> str | None:
        # The session file pi wrote into the run's session directory.
        found = sorted(Path(run_dir, SESSION_DIR).glob("*.jsonl"))
        return str(found[-1]) if found else None

    reads_task_from_stdin = True  # piped stdin is the message (pi trims its ends)

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        argv = [binary, "--mode", "json", "-p"]
        if req.session_dir:
            # The session is kept in the run directory; continuing forks it into the new one.
            argv += ["--session-dir", req.session_dir]
            if req.resume:
                argv += ["--fork", req.resume]
        else:
            argv.append("--no-session")
        if req.model:
            provider, sep, model_id = req.model.partition("/")
            if sep and provider and model_id:
                argv += ["--provider", provider, "--model", model_id]
            else:
                argv += ["--model", req.model]
        if req.thinking:
            argv += ["--thinking", req.thinking]
        if req.copilot_agent_initiator and _may_use_copilot(req.model):
            argv += ["-e", COPILOT_EXTENSION]
        if req.tools is not None:
            argv += ["--tools", ",".join(tools_for("pi", req.tools))]
        if req.system_prompt_file:
            argv += ["--append-system-prompt", req.system_prompt_file]
        argv += req.extra_args
        if req.task_on_stdin:
            return argv
        # pi takes the task as a positional message; a task starting with "-" or "@"
        # would be read as an option or a file reference, so those are prefixed.
        argv.append(req.task if not req.task.startswith(("-", "@")) else " " + req.task)
        return argv

    def child_env(self, req: CommandRequest) -> dict[str, str]:
        # A pi-subagents extension in the child's pi must not offer delegation again.
        return {"PI_SUBAGENTS_CHILD": "1"}

    def normalizer(self) -> Normalizer:
        return PiNormalizer()
