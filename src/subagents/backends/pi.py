"""pi: `@mariozechner/pi-coding-agent` up to 0.73, `@earendil-works/pi-coding-agent` since 0.74
(0.87 needs Node >= 22, 1.6 Node >= 22.19; 1.x streams as 0.87 does). Both stream shapes are
handled; 0.87 adds `agent_end.willRetry`, `agent_settled`, a `role: "system"` message,
`rawStopReason` and delta-only `message_update`s.

A pi that settles (`agent_settled`, since 0.80.4) runs in rpc mode (`--mode rpc`): the task
and every later message are JSON commands on its stdin (`prompt`, `steer`, `abort`), the
stream is json mode's plus `response` and `queue_update` lines, and a run is over at
`agent_settled` (docs/live-control.md). An older pi runs in json mode (`-p`, the task in argv)
and takes no messages.
"""

from __future__ import annotations

import json
from pathlib import Path

from subagents.backends.base import Backend, CommandRequest, Fed, Normalizer, text_blocks
from subagents.backends.tools import tools_for
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from subagents.types import JsonObject, JsonValue, MessageMode, Usage

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


# The first pi that ends a run with `agent_settled`, which live input needs (a run is over
# only then: an auto-retry may follow `agent_end`).
SETTLES_SINCE = (0, 80, 4)


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """``"0.87.1"`` -> ``(0, 87, 1)``; None when it is not such a version."""
    parts = (version or "").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:3]):
        return None
    return tuple(int(p) for p in parts[:3])


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

    def feed(self, obj: JsonObject) -> Fed:
        return self._fed(self._read(obj))

    def _read(self, obj: JsonObject) -> list[ev.Event]:
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

    def skipped(self, tail: bytes) -> Fed | None:
        # pi 0.87 says up front that an auto-retry follows, in the last key of agent_end
        # (`{...event, willRetry}`), a line skipped unparsed: the error was not the end.
        # A bare `true}` closing the line can only be that top-level key.
        if tail.rstrip().endswith(b',"willRetry":true}'):
            self.terminal = False
            return self._fed([])
        return None

    def _message_end(self, msg: JsonValue) -> list[ev.Event]:
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            return []
        content = msg.get("content")
        parts = content if isinstance(content, list) else []
        if parts or msg.get("stopReason") not in ("error", "aborted"):
            self.turns += 1  # (an empty failed message, an abort's or an API error's, is none)
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


# The id of the command that starts the run with its task.
TASK_ID = "task"


def _command(obj: JsonObject) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class PiRpcNormalizer(PiNormalizer):
    """pi in rpc mode: json mode's events, plus the input (see the module docstring).

    A message's receipts: pi's ``response`` to its command says *queued* (or refused, with
    pi's error); its text as a user ``message_end`` says *delivered*. pi holds a steer that
    comes when it settles (it only queues it when idle): it is then sent again as a prompt.
    """

    live = True

    def __init__(self) -> None:
        super().__init__()
        # Messages pi was given and has not put in the conversation yet: (id, text).
        self._pending: list[tuple[str, str]] = []
        # Ids of the commands that carried a steer (their response is its first receipt).
        self._steers: set[str] = set()
        # A prompt made of several held steers: its id -> the ids of the others in it.
        self._with: dict[str, list[str]] = {}
        self._aborts = 0

    def begin(self, req: CommandRequest) -> Fed:
        fed = Fed()
        fed.write(_command({"id": TASK_ID, "type": "prompt", "message": req.task}))
        return fed

    def steer(self, message_id: str, text: str) -> Fed:
        self._pending.append((message_id, text))
        self._steers.add(message_id)
        fed = Fed()
        fed.write(_command({"id": message_id, "type": "steer", "message": text}))
        return fed

    def follow_up(self, message_id: str, text: str) -> Fed:
        # At rest pi is idle: only a prompt starts a run (an idle follow_up is only queued).
        self._pending.append((message_id, text))
        fed = Fed()
        fed.write(_command({"id": message_id, "type": "prompt", "message": text}))
        return self._going_on(fed)

    def abort(self) -> Fed:
        # A steer still queued would be delivered into the aborted run's last turn.
        self._aborts += 1
        fed = Fed()
        fed.write(_command({"id": f"clear-{self._aborts}", "type": "clear_queue"}))
        fed.write(_command({"id": f"abort-{self._aborts}", "type": "abort"}))
        return fed

    def held_input(self) -> Fed | None:
        """Steers pi took too late for its run: it holds them, idle, until a prompt. They
        become one prompt (pi takes no prompt while busy), after its queue is cleared."""
        held = [(i, t) for i, t in self._pending if i in self._steers]
        if not held:
            return None
        fed = Fed()
        fed.write(_command({"id": "clear-held", "type": "clear_queue"}))
        text = "\n\n".join(t for _, t in held)
        self._pending = [p for p in self._pending if p not in held] + [(held[0][0], text)]
        self._steers.difference_update(i for i, _ in held)  # a prompt now, not held again
        self._with[held[0][0]] = [i for i, _ in held[1:]]
        fed.write(_command({"id": held[0][0], "type": "prompt", "message": text}))
        return self._going_on(fed)

    def feed(self, obj: JsonObject) -> Fed:
        t = obj.get("type")
        if t == "response":
            said = Fed()
            return self._fed(self._response(obj, said), said)
        if t == "message_end":
            msg = obj.get("message")
            if isinstance(msg, dict) and msg.get("role") == "user":
                said = Fed()
                self._delivered(text_blocks(msg.get("content")), said)
                return self._fed([], said)
        out = self._read(obj)
        # A run is over at agent_settled (after any retry), not at its last message.
        if t == "agent_settled":
            self.terminal = ev.is_terminal(self.stop_reason)
        else:
            self.terminal = False
        return self._fed(out)

    def _delivered(self, text: str, fed: Fed) -> None:
        """A user message in the conversation: the pending message it is (the task's own
        comes first and matches none)."""
        for i, (message_id, sent) in enumerate(self._pending):
            if sent == text or sent.strip() == text.strip():
                del self._pending[i]
                self._steers.discard(message_id)
                for delivered in (message_id, *self._with.pop(message_id, [])):
                    fed.receipt(delivered, "delivered")
                return

    def _response(self, obj: JsonObject, fed: Fed) -> list[ev.Event]:
        rid = obj.get("id")
        ok = obj.get("success") is True
        if rid == TASK_ID and not ok:
            # pi did not take the task: nothing will run, so the run ends here.
            self.error_message = f"pi refused the task: {obj.get('error') or 'no reason given'}"
            self.failed = True
            self.stop_reason, self.raw_stop_reason = ev.ERROR, None
            self.terminal = True
            return [ev.error(self.error_message, fatal=False)]
        if not isinstance(rid, str) or not any(rid == i for i, _ in self._pending):
            return []
        if not ok:
            self._pending = [p for p in self._pending if p[0] != rid]
            self._steers.discard(rid)
            fed.receipt(rid, "refused", f"pi: {obj.get('error') or 'refused'}")
        elif rid in self._steers and obj.get("command") == "steer":
            fed.receipt(rid, "queued")
        return []


class PiBackend(Backend):
    name = "pi"
    default_binary = "pi"
    install_hint = "npm install -g @earendil-works/pi-coding-agent"
    supports_tools = True
    supports_system_prompt = True
    supports_thinking = True
    can_continue = True
    needs_version = True
    tested_versions = ("0.73.1", "0.87.1", "1.6.0")

    def live_input(self, version: str | None) -> bool:
        found = version_tuple(version)
        return found is not None and found >= SETTLES_SINCE

    def live_normalizer(self) -> Normalizer:
        return PiRpcNormalizer()

    def refusals(self, version: str | None) -> dict[MessageMode, str]:
        if self.live_input(version):
            return {}
        why = (
            f"pi {version} takes no messages while it runs (pi 0.80.4 or later does)"
            if version
            else "could not read pi's version (`pi --version`); messages need pi 0.80.4 or later"
        )
        return {"steer": why, "follow-up": why}

    def resume_point(self, run_dir: str, result: Mapping[str, object]) -> str | None:
        # The session file pi wrote into the run's session directory.
        found = sorted(Path(run_dir, SESSION_DIR).glob("*.jsonl"))
        return str(found[-1]) if found else None

    reads_task_from_stdin = True  # piped stdin is the message (pi trims its ends)

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        # rpc: the task is the first command on stdin (a task in argv is ignored there).
        argv = [binary, "--mode", "rpc"] if req.live else [binary, "--mode", "json", "-p"]
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
        if req.task_on_stdin or req.live:
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
