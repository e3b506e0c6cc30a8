"""An Agent Client Protocol agent's side of the conversation, as canonical events, and ours.

ACP (protocol version 1) is JSON-RPC 2.0 over the agent's stdin/stdout, one message a line.
The supervisor's side, spoken here (each ``Fed``'s ``writes``), as codex's app-server is in
codex.py:

* ``initialize`` (our protocol version; file reading and writing offered, no terminals:
  see acpclient.py), then ``session/new`` in the run's cwd, or ``session/load`` of the run's
  session to continue it (where the agent advertises ``loadSession``; its replay of the
  conversation is not this run's and is skipped), ``session/set_model`` when a model is
  asked for, then ``session/prompt`` with the task;
* ``session/update`` notifications carry the turn: ``agent_message_chunk`` (the answer,
  gathered into one ``assistant_text`` per model response), ``agent_thought_chunk``
  (thinking), ``tool_call`` / ``tool_call_update`` (tool calls and their results),
  ``plan`` (a notice), ``usage_update`` (the session's cost, where the agent prices it);
* the response to ``session/prompt`` ends the turn with its stop reason: ``end_turn`` →
  stop, ``max_tokens`` → length, ``max_turn_requests`` and ``refusal`` → error (the run
  failed: the agent stopped short), ``cancelled`` → aborted; its ``usage`` (or the
  ``_meta`` token counts Gemini and Qwen send) is the turn's;
* a follow-up is the next ``session/prompt``; a steer cancels the running turn
  (``session/cancel``) and prompts with the message once the agent has stopped; an abort is
  ``session/cancel`` alone;
* the agent's requests of its client (files, permissions) are answered at once
  (acpclient.py); anything else gets a JSON-RPC error, never a wait.

Model turns are counted from prompts and tool-call batches (ACP tells no model response
apart): each prompt is one, and each batch of tool calls means one more response after it.
"""

from __future__ import annotations

import json
import os

from subagents.backends import acpask
from subagents.backends.acpclient import Client, Refused
from subagents.backends.base import CommandRequest, Fed, Normalizer, Requests
from subagents.core import events as ev
from subagents.errors import ClientRefusal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import ApprovalChoice, JsonObject, JsonValue, NoticeLevel, Usage

PROTOCOL_VERSION = 1
METHOD_NOT_FOUND = -32601
TASK_ID = "task"
STEER_HELD = "the running turn is cancelled: the message starts the next one"
# How each ACP stop reason ends a turn: (canonical stop reason, failure message or None).
STOPS: dict[str, tuple[str, str | None]] = {
    "end_turn": (ev.STOP, None),
    "max_tokens": (ev.LENGTH, None),
    "max_turn_requests": (ev.ERROR, "the agent reached its limit of model requests in a turn"),
    "refusal": (ev.ERROR, "the agent refused to go on"),
    "cancelled": (ev.ABORTED, "the turn was cancelled"),
}


def _line(obj: JsonObject) -> bytes:
    obj["jsonrpc"] = "2.0"
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _text(content: JsonValue) -> str:
    """The text of one ACP content block (or a list of them, or of tool call contents)."""
    if isinstance(content, dict):
        kind = content.get("type")
        if kind == "text":
            return str(content.get("text") or "")
        if kind == "content":  # a tool call's content wraps a content block
            return _text(content.get("content"))
        if kind == "diff":
            return f"diff {content.get('path', '')}"
        return ""
    if isinstance(content, list):
        return "\n".join(t for t in (_text(c) for c in content) if t)
    return ""


def _tokens(u: JsonValue) -> Usage | None:
    """A usage as ACP (``inputTokens``…) or Gemini's ``_meta.quota`` (``input_tokens``…)
    says it. ACP's ``inputTokens`` count the cached ones too, as Codex's do."""
    if not isinstance(u, dict):
        return None
    if "inputTokens" in u or "outputTokens" in u:
        total_in, out = ev.count(u.get("inputTokens")), ev.count(u.get("outputTokens"))
        read, write = ev.count(u.get("cachedReadTokens")), ev.count(u.get("cachedWriteTokens"))
        total = ev.count(u.get("totalTokens")) or total_in + out
    elif "input_tokens" in u or "output_tokens" in u:
        total_in, out = ev.count(u.get("input_tokens")), ev.count(u.get("output_tokens"))
        read = write = 0
        total = total_in + out
    else:
        return None
    return {
        "input": max(0, total_in - read - write),
        "output": out,
        "cacheRead": read,
        "cacheWrite": write,
        "totalTokens": total,
        "cost": None,
    }


def _error_text(err: JsonValue) -> str:
    """A JSON-RPC error's message, with the details its ``data`` carries (agents put the
    real cause there: "Internal error" alone says nothing)."""
    if not isinstance(err, dict):
        return ""
    message = str(err.get("message") or "")
    data = err.get("data")
    if isinstance(data, dict):
        data = data.get("details") or data.get("message") or data.get("error")
    if isinstance(data, str) and data.strip() and data.strip() not in message:
        message = f"{message}: {data.strip()}" if message else data.strip()
    return message[:2000]


def _meta(obj: JsonValue) -> JsonObject:
    meta = obj.get("_meta") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


class AcpNormalizer(Normalizer):
    """An ACP agent's messages as canonical events, and the client's answers to it."""

    live = True

    def __init__(self) -> None:
        super().__init__()
        self._rpc = Requests(_line)
        self._req: CommandRequest | None = None
        self._sid: str | None = None  # the ACP session (session_id: when loadable)
        self._client: Client | None = None
        self._asked: dict[JsonValue, JsonValue] | None = None
        # The agent's name, version and capabilities, from its initialize answer.
        self.agent: JsonObject = {}
        self.capabilities: JsonObject = {}
        # Until the session is ready (initialize, session/new or load answered).
        self.handshaking = True
        self.handshake_timeout: float | None = None
        self._replaying = False  # session/load replays the old conversation first
        self._prompting: str | None = None  # the message id of the running prompt
        self._cancelling = False  # asked to stop the turn (an abort, or a steer)
        self._aborting = False
        self._next: list[tuple[str, str]] = []  # steers: prompted when the turn stops
        self._chunks: list[str] = []
        self._thoughts: list[str] = []
        self._tools: dict[str, str] = {}  # calls not finished yet: id -> name
        self._in_batch = False
        # Usage of the turns ended, and of the running one so far.
        self._done = ev.empty_usage()
        self._turn_part = ev.empty_usage()

    # ---- requests we make ----

    def begin(self, req: CommandRequest) -> Fed:
        self._req = req
        fed = Fed()
        acp = req.acp
        self._client = Client(req.cwd, acp["permissions"] if acp else None)
        # --approvals: permission requests wait for the run's decision (by request id: the
        # options the agent offered).
        self._asked = {} if req.approvals else None
        self.handshake_timeout = acp["initTimeout"] if acp else None
        files = acp.get("files", True) if acp else True
        self._rpc.send(
            fed,
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": files, "writeTextFile": files},
                    "terminal": False,
                },
                "clientInfo": {"name": "subagents", "version": "1"},
            },
            "initialize",
        )
        return fed

    def _prompt(self, fed: Fed, mid: str, text: str) -> None:
        self._prompting = mid
        self._cancelling = False
        self.terminal = False
        self.turns += 1
        self._in_batch = False
        params: JsonObject = {
            "sessionId": self._sid,
            "prompt": [{"type": "text", "text": text}],
        }
        self._rpc.send(fed, "session/prompt", params, "prompt", mid)
        if mid != TASK_ID:
            fed.receipt(mid, "delivered")

    def _cancel(self, fed: Fed) -> None:
        if self._prompting is not None and not self._cancelling:
            self._cancelling = True
            fed.write(_line({"method": "session/cancel", "params": {"sessionId": self._sid}}))

    def steer(self, message_id: str, text: str) -> Fed:
        fed = Fed()
        self._next.append((message_id, text))
        fed.receipt(message_id, "queued", STEER_HELD if self._prompting else None)
        self._cancel(fed)
        return fed

    def follow_up(self, message_id: str, text: str) -> Fed:
        fed = Fed()
        self._prompt(fed, message_id, text)
        return self._going_on(fed)

    def abort(self) -> Fed:
        fed = Fed()
        self._aborting = True
        self._cancel(fed)
        return fed

    def handshake_overdue(self) -> Fed | None:
        if not self.handshaking:
            return None
        seconds = self.handshake_timeout or 0
        return self._fed(
            self._fail(
                f"{self._program()} did not answer initialize within {seconds:g} s"
                " (is it an ACP agent?)"
            )
        )

    def _program(self) -> str:
        acp = self._req.acp if self._req is not None else None
        return os.path.basename(acp["command"][0]) if acp else "the agent"

    # ---- what the agent says ----

    def feed(self, obj: JsonObject) -> Fed:
        method = obj.get("method")
        if method != "session/update":  # the rare lines: answers, the agent's requests
            if "id" not in obj:
                return self._fed([])
            said = Fed()  # what the line has us write to the agent, and its receipts
            if method is None:
                return self._fed(self._response(obj, said), said)
            return self._fed(self._serve(str(method), obj, said), said)
        return self._fed(self._update(obj.get("params")))

    def _update(self, params: JsonValue) -> list[ev.Event]:
        update = params.get("update") if type(params) is dict else None
        if type(update) is not dict or self._replaying:
            return []
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            return self._message_chunk(update)
        if kind == "tool_call_update":
            return self._tool_update(update)
        if kind == "tool_call":
            return self._tool_call(update)
        if kind == "agent_thought_chunk":
            self._thoughts.append(_text(update.get("content")))
            return []
        if kind == "plan":
            return self._plan(update.get("entries"))
        if kind == "usage_update":
            return self._cost(update.get("cost"))
        return []

    def _message_chunk(self, update: JsonObject) -> list[ev.Event]:
        # The hot path of a chatty agent: one chunk a token, kept lean.
        out = self._flush_thoughts() if self._thoughts else []
        self._in_batch = False
        content = update.get("content")
        if type(content) is dict and content.get("type") == "text":
            text = content.get("text")
            if text and type(text) is str:
                self._chunks.append(text)
        meta = update.get("_meta")
        if meta is not None:
            part = _tokens(meta.get("usage")) if type(meta) is dict else None
            if part is not None:  # Qwen: the model response's usage
                self._turn_part = ev.add_usage(self._turn_part.copy(), part)
                out.append(self._usage_event())
        return out

    def _flush_thoughts(self) -> list[ev.Event]:
        if not self._thoughts:
            return []
        text, self._thoughts = "".join(self._thoughts), []
        return [ev.thinking(text)] if text.strip() else []

    def _flush_text(self, raw_stop: str | None) -> list[ev.Event]:
        """The model response so far as one assistant_text (toolUse when it goes on)."""
        out = self._flush_thoughts()
        text, self._chunks = "".join(self._chunks), []
        if raw_stop is None:
            if text.strip():
                out.append(self._answer(text, None, None, has_tool_calls=True))
            return out
        stop, _ = STOPS.get(raw_stop, (raw_stop, None))
        self.stop_reason, self.raw_stop_reason = stop, raw_stop
        if text.strip():
            self.final_text = text
            self.saw_answer = True
        out.append(ev.assistant_text(text, stop, raw_stop, self.model))
        return out

    def _tool_call(self, update: JsonObject) -> list[ev.Event]:
        call_id = str(update.get("toolCallId", ""))
        out = self._flush_text(None)
        self.terminal = False
        if call_id not in self._tools:
            if not self._in_batch:  # a batch of calls: the model answers again after it
                self._in_batch = True
                self.turns += 1
            name = str(update.get("kind") or update.get("title") or "tool")
            self._tools[call_id] = name
            self.tool_calls += 1
            self.stop_reason, self.raw_stop_reason = ev.TOOL_USE, None
            args = update.get("rawInput")
            if args is None:
                args = {"title": update.get("title")}
            out.append(ev.tool_call(call_id, name, args))
        out.extend(self._tool_update(update))
        return out

    def _tool_update(self, update: JsonObject) -> list[ev.Event]:
        status = update.get("status")
        if status != "completed" and status != "failed":  # progress of a running call
            return []
        call_id = str(update.get("toolCallId", ""))
        if call_id not in self._tools:
            return self._tool_call(update)  # a result without its call: the call is news too
        name = self._tools.pop(call_id)
        text = _text(update.get("content"))
        if not text and update.get("rawOutput") is not None:
            raw = update.get("rawOutput")
            text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)[:8000]
        return [ev.tool_result(call_id, name, status == "failed", text)]

    def _plan(self, entries: JsonValue) -> list[ev.Event]:
        marks = {"completed": "x", "in_progress": "~"}
        items = [
            f"[{marks.get(str(e.get('status')), ' ')}] {e.get('content', '')}"
            for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, dict)
        ]
        return [ev.notice("info", "plan: " + "; ".join(items))] if items else []

    def _cost(self, cost: JsonValue) -> list[ev.Event]:
        # The session's cost so far; counted only in USD (never a guess from another currency).
        if not isinstance(cost, dict) or cost.get("currency") != "USD":
            return []
        amount = ev.number(cost.get("amount"))
        if amount is None:
            return []
        self.usage["cost"] = amount
        return [self._usage_event()]

    def _usage_event(self) -> ev.Event:
        cost = self.usage["cost"]
        self.usage = ev.add_usage(self._done.copy(), self._turn_part)
        self.usage["cost"] = cost
        return ev.usage(self.usage.copy())

    # ---- answers to our requests ----

    def _response(self, obj: JsonObject, fed: Fed) -> list[ev.Event]:
        rid = obj.get("id")
        purpose, mid = self._rpc.answered(rid)
        err = obj.get("error")
        message = _error_text(err)
        result = obj.get("result")
        if purpose == "initialize":
            return self._initialized(result, message, fed)
        if purpose == "session":
            return self._session(result, message, fed)
        if purpose == "model" and err is not None:
            return self._fail(f"the agent could not use model {self._model()!r}: {message}")
        if purpose == "prompt":
            return self._turn_ended(mid, result, message if err is not None else None, fed)
        return []

    def _model(self) -> str | None:
        return self._req.model if self._req is not None else None

    def _initialized(self, result: JsonValue, message: str, fed: Fed) -> list[ev.Event]:
        if not isinstance(result, dict):
            return self._fail(f"the agent refused initialize: {message or 'no answer'}")
        version = result.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            return self._fail(
                f"the agent speaks ACP protocol version {version!r}; subagents speaks"
                f" version {PROTOCOL_VERSION}"
            )
        caps, info = result.get("agentCapabilities"), result.get("agentInfo")
        self.capabilities = caps if isinstance(caps, dict) else {}
        self.agent = info if isinstance(info, dict) else {}
        req = self._req
        assert req is not None
        params: JsonObject = {"cwd": req.cwd, "mcpServers": []}
        if req.resume:
            if self.capabilities.get("loadSession") is not True:
                return self._fail(
                    "the agent does not advertise loadSession: its runs cannot be continued"
                )
            self._replaying = True
            self._rpc.send(fed, "session/load", {"sessionId": req.resume, **params}, "session")
        else:
            self._rpc.send(fed, "session/new", params, "session")
        name = self.agent.get("name")
        said = f"{name} {self.agent.get('version', '')}".strip() if name else "the agent"
        features = [k for k in ("loadSession",) if self.capabilities.get(k) is True]
        return [
            ev.notice("info", f"ACP: {said}; advertises {', '.join(features) or 'no loadSession'}")
        ]

    def _session(self, result: JsonValue, message: str, fed: Fed) -> list[ev.Event]:
        req = self._req
        assert req is not None
        if self._replaying:  # session/load answers null once the replay is over
            self._replaying = False
            if message:
                return self._fail(f"the agent could not load session {req.resume}: {message}")
            self.session_id = self._sid = req.resume
        elif isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            self._sid = str(result["sessionId"])
            # Named as the run's session (what ``continue`` resumes) only where it can be.
            if self.capabilities.get("loadSession") is True:
                self.session_id = self._sid
        else:
            return self._fail(f"the agent could not start a session: {message or 'no session'}")
        self.handshaking = False
        if req.model:
            self.model = req.model
            self._rpc.send(
                fed, "session/set_model", {"sessionId": self._sid, "modelId": req.model}, "model"
            )
        self._prompt(fed, TASK_ID, req.task)
        return []

    def _turn_ended(
        self, mid: str | None, result: JsonValue, error: str | None, fed: Fed
    ) -> list[ev.Event]:
        if mid != self._prompting:
            return []
        self._prompting = None
        self._tools.clear()
        # The turn's own usage where it says it (ACP's usage, or Gemini's _meta quota);
        # else what its chunks said (Qwen).
        part = _tokens(result.get("usage")) if isinstance(result, dict) else None
        quota = _meta(result).get("quota")
        if isinstance(quota, dict):
            self._quota_model(quota.get("model_usage"))
            if part is None:
                part = _tokens(quota.get("token_count"))
        if part is not None:
            self._turn_part = part
        out: list[ev.Event] = []
        if part is not None or self._turn_part != ev.empty_usage():
            out.append(self._usage_event())
        self._done, self._turn_part = self.usage.copy(), ev.empty_usage()
        if error is not None:
            out.extend(self._flush_text(None))
            out.extend(self._fail(f"the agent failed the prompt: {error}"))
            return out
        raw = result.get("stopReason") if isinstance(result, dict) else None
        raw_stop = str(raw) if raw is not None else None
        if raw_stop == "cancelled" and self._next and not self._aborting:
            out.extend(self._flush_text(None))
            mid_next, text = self._next.pop(0)
            self._prompt(fed, mid_next, text)  # a steer: the conversation goes on with it
            return out
        out.extend(self._flush_text(raw_stop))
        _, failure = STOPS.get(raw_stop or "", (None, None))
        if failure is not None:
            self.failed = True
            self.error_message = failure
            out.append(ev.error(failure, fatal=False))
        else:
            self.failed = False
        self.terminal = True
        return out

    def _quota_model(self, models: JsonValue) -> None:
        """Gemini names the model of a turn in its usage by model: the last one is the
        answer's (a router's is listed first)."""
        if isinstance(models, list) and models and isinstance(models[-1], dict):
            name = models[-1].get("model")
            if isinstance(name, str) and name and name != "auto":
                self.model = name

    def held_input(self) -> Fed | None:
        """At rest: a steer that came as the turn ended starts the next turn now."""
        if self._next and not self._aborting:
            mid, text = self._next.pop(0)
            return self.follow_up(mid, text)
        return None

    def _fail(self, message: str) -> list[ev.Event]:
        self.error_message = message
        self.failed = True
        self.stop_reason, self.raw_stop_reason = ev.ERROR, None
        self.terminal = True
        self.handshaking = False
        return [ev.error(message, fatal=False)]

    # ---- the agent's requests of its client ----

    def _serve(self, method: str, obj: JsonObject, fed: Fed) -> list[ev.Event]:
        client = self._client
        params = obj.get("params")
        params = params if isinstance(params, dict) else {}
        answer: JsonObject = {"id": obj["id"]}
        out: list[ev.Event] = []
        try:
            if client is None:
                raise Refused("the client is not ready", -32603)
            if method == "fs/read_text_file":
                answer["result"] = client.read_text_file(params)
            elif method == "fs/write_text_file":
                client.write_text_file(params)
                answer["result"] = None
            elif method == "session/request_permission" and self._asked is not None:
                tool, tool_input = acpask.request(params)
                self._asked[obj["id"]] = params.get("options")
                fed.ask(obj["id"], tool, tool_input)
                return out  # answered once decided (answer_ask)
            elif method == "session/request_permission":
                result, allowed, what = client.permission(params)
                answer["result"] = result
                word = "allowed" if allowed else "denied"
                out.append(ev.notice("info" if allowed else "warn", f"permission {word}: {what}"))
            else:
                raise Refused(f"subagents does not serve {method}", METHOD_NOT_FOUND)
        except ClientRefusal as exc:
            answer["error"] = {"code": exc.code, "message": str(exc)}
            # A method we do not serve is the agent's own business (Qwen asks one of its
            # own every turn); a file refused is the run's.
            level: NoticeLevel = "info" if exc.code == METHOD_NOT_FOUND else "warn"
            out.append(ev.notice(level, f"ACP {method}: {exc}"))
        fed.write(_line(answer))
        return out

    def answer_ask(
        self,
        key: JsonValue,
        choice: ApprovalChoice,
        why: str | None,
        answers: list[str] | None = None,
    ) -> Fed:
        fed = Fed()
        if self._asked is not None and key in self._asked:
            result = acpask.outcome(self._asked.pop(key), choice)
            fed.write(_line({"id": key, "result": result}))
        return fed

    def finish(self) -> list[ev.Event]:
        if self.handshaking and not self.failed:
            self.error_message = (
                f"{self._program()} is not an ACP agent, or it ended before answering initialize"
            )
        return self._flush_thoughts()
