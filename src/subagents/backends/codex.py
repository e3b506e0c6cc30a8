"""Codex (`@openai/codex`) via ``codex app-server``: JSON-RPC over stdio (no ``jsonrpc`` key,
one object a line), so a run can be steered while it works.

The supervisor's side of the protocol (codex 0.169, see tests/fixtures/streams/live/codex*):

* ``initialize``, ``initialized``, then ``thread/start`` (cwd, model, developer instructions,
  no approvals, no sandbox: the same trust as the other backends' no-prompt modes) or, to
  continue a run, ``thread/resume`` of its thread; then ``turn/start`` with the task;
* a message while the turn runs is ``turn/steer`` with the turn's id (``expectedTurnId``);
  it is in the conversation when a ``userMessage`` item carries its ``clientId``; a
  follow-up is the next ``turn/start``; ``turn/interrupt`` stops a turn;
* ``item/started`` / ``item/completed`` carry the turn's items: ``commandExecution``,
  ``fileChange``, ``mcpToolCall``, ``webSearch`` are tool calls, ``agentMessage`` the answer,
  ``reasoning`` thinking;
* ``thread/tokenUsage/updated`` after each model response: the thread's running total, whose
  ``inputTokens`` include the cached ones (a resumed thread reports its earlier total first:
  only what grows after it is this run's); no cost, no model id;
* ``turn/completed`` ends the turn: ``completed``, ``failed`` (its ``error``) or
  ``interrupted``; an ``error`` notification says whether codex retries;
* codex may ask the client (a request with an ``id`` and a ``method``): approvals, user
  input. A headless run answers every such request with a refusal, never leaves it waiting;
  under ``--approvals`` (the thread's policy ``untrusted``) a command's or a patch's approval
  waits for the run's decision instead (codexask.py, docs/approvals.md).
"""

from __future__ import annotations

import json

from subagents.backends import codexask
from subagents.backends.base import Backend, CommandRequest, Fed, Normalizer, Requests
from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import ApprovalChoice, JsonObject, JsonValue, Usage

# Tool items, by their app-server type, and the name their tool_call events carry.
TOOL_ITEMS = {
    "commandExecution": "command_execution",
    "fileChange": "file_change",
    "mcpToolCall": "mcp_tool_call",
    "webSearch": "web_search",
    "dynamicToolCall": "dynamic_tool_call",
}
# The answer to each request codex may make of its client: a refusal (a headless run has
# nobody to ask). Anything else gets a JSON-RPC error.
REFUSALS: dict[str, JsonObject] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
    "item/permissions/requestApproval": {"permissions": {}},
    "item/tool/requestUserInput": {"answers": {}},
    "mcpServer/elicitation/request": {"action": "decline"},
    "item/tool/call": {"contentItems": [], "success": False},
}
TASK_ID = "task"
NO_ACTIVE_TURN = "no active turn"
LATE_STEER = "codex ended the turn first: it starts the next turn with the message"


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


def _counts(u: JsonValue) -> tuple[int, int, int, int]:
    """(input incl. cached, cached, cache write, output) of a token usage breakdown."""
    if not isinstance(u, dict):
        return (0, 0, 0, 0)

    def n(key: str) -> int:
        value = u.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return (n("inputTokens"), n("cachedInputTokens"), n("cacheWriteInputTokens"), n("outputTokens"))


def _usage(counts: tuple[int, int, int, int]) -> Usage:
    total_in, cache_read, cache_write, out = counts
    return {
        # Codex counts cached tokens inside inputTokens; canonical input is the rest.
        "input": max(0, total_in - cache_read - cache_write),
        "output": out,  # includes reasoning output
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": total_in + out,
        "cost": None,  # codex reports no cost
    }


def _tool_args(kind: str, item: JsonObject) -> JsonObject:
    if kind == "commandExecution":
        return {"command": item.get("command", "")}
    if kind == "fileChange":
        return {"changes": [{"path": path, "kind": change} for path, change in _changes(item)]}
    if kind == "mcpToolCall":
        return {
            "server": item.get("server"),
            "tool": item.get("tool"),
            "arguments": item.get("arguments"),
        }
    if kind == "webSearch":
        return {"query": item.get("query", "")}
    return {"tool": item.get("tool"), "arguments": item.get("arguments")}


def _changes(item: JsonObject) -> list[tuple[JsonValue, str]]:
    """A file change item's changes: (path, kind) each."""
    listed = item.get("changes")
    return [
        (c.get("path", ""), _change_kind(c.get("kind")))
        for c in (listed if isinstance(listed, list) else [])
        if isinstance(c, dict)
    ]


def _change_kind(kind: JsonValue) -> str:
    return str(kind.get("type", "update")) if isinstance(kind, dict) else str(kind or "update")


def _tool_outcome(kind: str, item: JsonObject) -> tuple[bool, str]:
    failed = item.get("status") in ("failed", "declined")
    if kind == "commandExecution":
        code = item.get("exitCode")
        failed = failed or (isinstance(code, int) and code != 0)
        return failed, str(item.get("aggregatedOutput") or "")
    if kind == "fileChange":
        return failed, "\n".join(f"{change} {path}" for path, change in _changes(item))
    if kind == "mcpToolCall":
        err = item.get("error")
        said = err.get("message") if isinstance(err, dict) else None
        if said:
            return True, str(said)
        result = item.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        return failed, _texts(content)
    return failed, ""


def _texts(content: JsonValue) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(c.get("text", "")) if isinstance(c, dict) else str(c)
        for c in content
        if isinstance(c, (dict, str))
    )


def _line(obj: JsonObject) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _text_input(text: str) -> list[JsonValue]:
    return [{"type": "text", "text": text}]


class CodexNormalizer(Normalizer):
    """codex app-server's notifications as canonical events, and its client's requests."""

    live = True

    def __init__(self) -> None:
        super().__init__()
        self._started: set[str] = set()
        # Our requests by id: what each was (its message id for a steer or a turn/start).
        self._rpc = Requests(_line)
        self.thread: str | None = None
        self._schema: JsonObject | None = None  # each turn's outputSchema (made strict)
        self.turn: str | None = None  # the active turn's id, while one runs
        self._task: str = ""
        # Messages codex has not put in the conversation yet: id -> text; the steers among
        # them whose turn/steer got no answer yet, and those codex ended the turn before.
        self._pending: dict[str, str] = {}
        self._unanswered: set[str] = set()
        self._early: list[str] = []
        self._late: list[str] = []
        # Between turns: the last one completed, no next one started.
        self._at_rest = False
        # --approvals: codex's approval requests wait for a decision (by request id: its
        # method), and a file change item's changes, which its request names by id.
        self._asking = False
        self._asked: dict[JsonValue, str] = {}
        self._question_ids: dict[JsonValue, list[str]] = {}
        self._item_changes: dict[str, JsonValue] = {}
        # The thread's token total before this run's first turn (a resumed thread's earlier
        # runs), and whether that turn has started.
        self._baseline = (0, 0, 0, 0)
        self._turn_seen = False

    # ---- requests we make ----

    def begin(self, req: CommandRequest) -> Fed:
        self._task = req.task
        self._schema = req.output_schema
        fed = Fed()
        self._rpc.send(
            fed, "initialize", {"clientInfo": {"name": "subagents", "version": "1"}}, "initialize"
        )
        fed.write(_line({"method": "initialized"}))
        self._asking = req.approvals is not None
        params: JsonObject = {
            "cwd": req.cwd,
            # Headless: never ask for an approval, no sandbox (as `exec
            # --dangerously-bypass-approvals-and-sandbox`); run it where the agent may act.
            # Under --approvals codex asks us, and the run's policy decides.
            "approvalPolicy": codexask.ASKING_POLICY if self._asking else "never",
            "sandbox": "danger-full-access",
        }
        if req.model:
            params["model"] = req.model
        prompt = req.system_prompt
        if not prompt and req.system_prompt_file:
            with open(req.system_prompt_file, encoding="utf-8") as f:
                prompt = f.read()
        if prompt:
            params["developerInstructions"] = prompt
        if req.resume:
            self._rpc.send(fed, "thread/resume", {"threadId": req.resume, **params}, "thread")
        else:
            self._rpc.send(fed, "thread/start", params, "thread")
        return fed

    def _turn_start(self, fed: Fed, mid: str, text: str) -> None:
        params: JsonObject = {
            "threadId": self.thread,
            "input": _text_input(text),
            "clientUserMessageId": mid,
        }
        if self._schema is not None:  # every turn's answer (a follow-up's too)
            params["outputSchema"] = self._schema
        self._rpc.send(fed, "turn/start", params, "turn", mid)

    def steer(self, message_id: str, text: str) -> Fed:
        self._pending[message_id] = text
        fed = Fed()
        if self.turn is None and not self._turn_seen:  # sent once the first turn runs
            self._early.append(message_id)
        elif self.turn is None:  # between turns: it starts the next one
            self._late.append(message_id)
            fed.receipt(message_id, "queued", LATE_STEER)
        else:
            self._send_steer(fed, message_id)
        return fed

    def _send_steer(self, fed: Fed, message_id: str) -> None:
        text = self._pending.get(message_id, "")
        self._unanswered.add(message_id)
        params: JsonObject = {
            "threadId": self.thread,
            "expectedTurnId": self.turn,
            "input": _text_input(text),
            "clientUserMessageId": message_id,
        }
        self._rpc.send(fed, "turn/steer", params, "steer", message_id)

    def follow_up(self, message_id: str, text: str) -> Fed:
        self._pending[message_id] = text
        self._at_rest = False
        fed = Fed()
        self._turn_start(fed, message_id, text)
        return self._going_on(fed)

    def abort(self) -> Fed:
        fed = Fed()
        if self.thread and self.turn:
            params: JsonObject = {"threadId": self.thread, "turnId": self.turn}
            self._rpc.send(fed, "turn/interrupt", params, "interrupt")
        return fed

    def held_input(self) -> Fed | None:
        """At rest: a steer codex has not answered yet may still become the next turn, and
        one it took too late becomes it now."""
        if self._late:
            mid = self._late.pop(0)
            return self.follow_up(mid, self._pending.get(mid, ""))
        return self._going_on(Fed()) if self._unanswered else None

    # ---- what codex says ----

    def feed(self, obj: JsonObject) -> Fed:
        said = Fed()  # what the line has us write to codex, and its receipts
        return self._fed(self._read(obj, said), said)

    def _read(self, obj: JsonObject, fed: Fed) -> list[ev.Event]:
        method = obj.get("method")
        if method is None:
            return self._response(obj, fed) if "id" in obj else []
        if "id" in obj:
            return self._server_request(obj, fed)
        params = obj.get("params")
        if not isinstance(params, dict):
            return []
        if method == "item/started":
            self.terminal = False
            return self._item_started(params.get("item"), fed)
        if method == "item/completed":
            self.terminal = False
            return self._item_completed(params.get("item"), fed)
        if method == "thread/tokenUsage/updated":
            return self._token_usage(params.get("tokenUsage"))
        if method == "turn/started":
            self.terminal = False
            self._at_rest = False
            turn = params.get("turn")
            self.turn = str(turn.get("id")) if isinstance(turn, dict) else self.turn
            self._turn_seen = True
            for mid in self._early:
                self._send_steer(fed, mid)
            self._early = []
            return []
        if method == "turn/completed":
            return self._turn_completed(params.get("turn"), fed)
        if method == "error":
            err = params.get("error")
            message = _unwrap_error(err.get("message") if isinstance(err, dict) else err)
            self.error_message = message or self.error_message
            retry = " (codex retries)" if params.get("willRetry") else ""
            return [ev.notice("warn", f"{message}{retry}")] if message else []
        return []

    def _server_request(self, obj: JsonObject, fed: Fed) -> list[ev.Event]:
        method = str(obj.get("method"))
        if self._asking and method in codexask.ASKS:
            params = obj.get("params")
            params = params if isinstance(params, dict) else {}
            changes = self._item_changes.pop(str(params.get("itemId")), None)
            tool, tool_input = codexask.request(method, params, changes)
            self._asked[obj["id"]] = method
            if method == codexask.QUESTION:
                self._question_ids[obj["id"]] = codexask.question_ids(params)
            fed.ask(obj["id"], tool, tool_input)
            return []
        answer: JsonObject = {"id": obj["id"]}
        if method in REFUSALS:
            answer["result"] = REFUSALS[method]
        else:
            answer["error"] = {"code": -32601, "message": f"subagents cannot answer {method}"}
        fed.write(_line(answer))
        return [ev.notice("warn", f"codex asked {method}: refused (the run is headless)")]

    def answer_ask(
        self,
        key: JsonValue,
        choice: ApprovalChoice,
        why: str | None,
        answers: list[str] | None = None,
    ) -> Fed:
        fed = Fed()
        method = self._asked.pop(key, None)
        if method is not None:
            ids = self._question_ids.pop(key, [])
            result = codexask.answer(method, choice, ids, answers)
            fed.write(_line({"id": key, "result": result}))
        return fed

    def _response(self, obj: JsonObject, fed: Fed) -> list[ev.Event]:
        rid = obj.get("id")
        purpose, mid = self._rpc.answered(rid)
        err = obj.get("error")
        message = str(err.get("message", "")) if isinstance(err, dict) else ""
        result = obj.get("result")
        if purpose == "thread":
            thread = result.get("thread") if isinstance(result, dict) else None
            if not isinstance(thread, dict) or not thread.get("id"):
                return self._fail(f"codex could not start the thread: {message or 'no thread'}")
            self.thread = self.session_id = str(thread["id"])
            self._turn_start(fed, TASK_ID, self._task)
            return []
        if purpose in ("initialize", "turn") and err is not None:
            if mid in (None, TASK_ID):
                return self._fail(f"codex refused the {purpose}: {message}")
            self._pending.pop(mid, None)
            fed.receipt(mid, "refused", f"codex: {message}")
        elif purpose == "steer" and mid is not None:
            self._unanswered.discard(mid)
            if err is None:
                fed.receipt(mid, "queued")
            elif NO_ACTIVE_TURN in message or "expected active turn" in message:
                # The turn ended first: the message starts the next one.
                self._late.append(mid)
                fed.receipt(mid, "queued", LATE_STEER)
            else:
                self._pending.pop(mid, None)
                fed.receipt(mid, "refused", f"codex: {message}")
        else:
            return []
        if self._at_rest and not self._unanswered:
            # Between turns with nothing more in flight: at rest again, the supervisor
            # starts the next turn (a late steer) or ends the run.
            self.terminal = True
        return []

    def _fail(self, message: str) -> list[ev.Event]:
        self.error_message = message
        self.failed = True
        self.stop_reason, self.raw_stop_reason = ev.ERROR, None
        self.terminal = True
        return [ev.error(message, fatal=False)]

    def _item_started(self, item: JsonValue, fed: Fed) -> list[ev.Event]:
        if not isinstance(item, dict):
            return []
        kind = item.get("type")
        if kind == "userMessage":
            mid = item.get("clientId")
            if isinstance(mid, str) and self._pending.pop(mid, None) is not None:
                fed.receipt(mid, "delivered")
            return []
        if kind not in TOOL_ITEMS:
            return []
        item_id = str(item.get("id", ""))
        if item_id in self._started:
            return []
        self._started.add(item_id)
        if self._asking and kind == "fileChange":
            self._item_changes[item_id] = item.get("changes")
        self.tool_calls += 1
        self.stop_reason, self.raw_stop_reason = ev.TOOL_USE, None
        return [ev.tool_call(item_id, TOOL_ITEMS[str(kind)], _tool_args(str(kind), item))]

    def _item_completed(self, item: JsonValue, fed: Fed) -> list[ev.Event]:
        if not isinstance(item, dict):
            return []
        kind = item.get("type")
        if kind == "agentMessage":
            text = str(item.get("text") or "")
            return [self._answer(text, None, None)] if text.strip() else []
        if kind == "reasoning":
            text = "\n".join(
                t for t in (_texts(item.get("summary")), _texts(item.get("content"))) if t
            )
            return [ev.thinking(text)] if text.strip() else []
        if kind in TOOL_ITEMS:
            out = self._item_started(item, fed)  # completed without a start: the call is news too
            item_id = str(item.get("id", ""))
            self._started.discard(item_id)  # done: memory stays with the running calls
            is_error, text = _tool_outcome(str(kind), item)
            out.append(ev.tool_result(item_id, TOOL_ITEMS[str(kind)], is_error, text))
            return out
        return []

    def _token_usage(self, usage: JsonValue) -> list[ev.Event]:
        total = _counts(usage.get("total") if isinstance(usage, dict) else None)
        if not self._turn_seen:  # a resumed thread's total so far: not this run's
            self._baseline = total
            return []
        self.turns += 1
        grown = tuple(max(0, now - was) for now, was in zip(total, self._baseline, strict=True))
        self.usage = _usage((grown[0], grown[1], grown[2], grown[3]))
        return [ev.usage(self.usage.copy())]

    def _turn_completed(self, turn: JsonValue, fed: Fed) -> list[ev.Event]:
        turn = turn if isinstance(turn, dict) else {}
        status = turn.get("status")
        self.turn = None
        self._at_rest = True
        out: list[ev.Event] = []
        if status == "completed":
            # Codex gives no stop reason; a completed turn is a normal stop.
            self.stop_reason, self.raw_stop_reason = ev.STOP, None
            self.failed = False
        elif status == "interrupted":
            self.stop_reason, self.raw_stop_reason = ev.ABORTED, "interrupted"
            self.failed = True
            self.error_message = "the turn was interrupted"
            out.append(ev.error(self.error_message, fatal=False))
        else:
            err = turn.get("error")
            message = _unwrap_error(err.get("message") if isinstance(err, dict) else err)
            self.error_message = message or self.error_message or "codex reported the turn failed"
            self.stop_reason, self.raw_stop_reason = ev.ERROR, str(status or "failed")
            self.failed = True
            out.append(ev.error(self.error_message, fatal=False))
        # Steers codex said yes to but never put in the turn: the next turn starts with them.
        for mid in list(self._pending):
            if mid not in self._unanswered and mid not in self._late:
                self._late.append(mid)
                fed.receipt(mid, "queued", LATE_STEER)
        self.terminal = True
        return out


class CodexBackend(Backend):
    name = "codex"
    default_binary = "codex"
    install_hint = "npm install -g @openai/codex"
    supports_tools = False  # codex has no per-run tool allow list
    supports_system_prompt = True  # as the thread's developer instructions
    can_continue = True  # thread/resume of the run's thread
    reads_task_from_stdin = True  # the task is a turn/start on stdin, any size
    tested_versions = ("0.169.0",)
    reports_cost = False
    live_cost = False
    own_schema = True
    strict_schema = True
    # Its app-server's approval requests wait for the run's decision (codexask.py).
    asks = True

    def live_input(self, version: str | None) -> bool:
        return True

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        # Everything else (cwd, model, instructions, the task) goes over the protocol.
        # Under --approvals its question tool is offered too (codexask.py).
        asking = codexask.QUESTION_FEATURE if req.approvals is not None else []
        return [binary, "app-server", *asking, *req.extra_args]

    def normalizer(self) -> Normalizer:
        return CodexNormalizer()
