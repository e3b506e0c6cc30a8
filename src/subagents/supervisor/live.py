"""Live control of one run, the supervisor's side: messages sent to the child (``subagents
send``: steer, follow-up), its budget, and what happens when it comes to rest.

A live child (pi in rpc mode, claude, codex: ``RunSpec.live``) takes its task and every later
message on its stdin, in its CLI's protocol, which its normalizer speaks; this module feeds
the supervisor's control endpoint to it and writes what it returns (``Fed.writes``) to the
child's stdin (``InputWriter``). A follow-up waits here until the child would end; then it is sent as the
conversation's next turn (live), or, for a CLI that takes no input while it runs (gemini,
opencode), it becomes a continuation of the same conversation in a new process of the same
run (the supervisor spawns it). A steer is refused where the CLI takes none.

Every message is a ``user_message`` event when it is sent (queued or refused) and again when
the child takes it; a budget reached is a ``limit`` event. What the run does about it is the
supervisor's: this module returns it (``"limit"``: a budget stops the run; at rest, ``"go
on"`` or ``"end"``) and is told what it needs of the run's state. Standard library only.
"""

from __future__ import annotations

from subagents.core import events as ev
from subagents.core.inputs import MAX_MESSAGE_BYTES

# The endpoint, the stdin writer and the budget are imported where a run has them: a run that
# can take nothing (pi before 0.80.4, no budget) starts as it did without live control.

TYPE_CHECKING = False
if TYPE_CHECKING:
    import selectors
    from pathlib import Path
    from typing import Literal, Protocol, TypeAlias

    from _typeshed import FileDescriptorLike

    from subagents.backends import Backend, CommandRequest, Fed, Normalizer
    from subagents.supervisor.approvals import Approvals
    from subagents.supervisor.budget import Budget
    from subagents.supervisor.control import ControlServer, Reply
    from subagents.supervisor.phase import Action, StallWatch
    from subagents.supervisor.spec import RunSpec
    from subagents.supervisor.stdin import InputWriter
    from subagents.types import (
        ApprovalChoice,
        CommandRecord,
        ControlReply,
        Event,
        JsonObject,
        JsonValue,
        LimitKind,
        LimitRecord,
        Limits,
        MessageCounts,
        MessageMode,
        ReceiptWord,
        Usage,
    )

    class Supervisor(Protocol):
        """What live control uses of the supervisor (supervisor/main.py)."""

        spec: RunSpec
        run_dir: Path
        norm: Normalizer | None
        watch: StallWatch

        def emit(self, event: Event) -> None: ...
        def flush(self) -> None: ...
        def totals(self) -> tuple[int, Usage]: ...

    # At rest: the run goes on (a turn started), or it ends (the child's stdin closed).
    AtRest: TypeAlias = Literal["go on", "end"]


MODES = ("steer", "follow-up")
HELD = "held until the current turn ends"
ENDING = "the run has given its answer and is ending"
ENDED = "the run ended before the child took it"


class Message:
    __slots__ = ("mode", "reply", "said", "text")

    def __init__(self, mode: MessageMode, text: str, reply: Reply | None) -> None:
        self.mode: MessageMode = mode
        self.text = text
        self.reply = reply
        self.said: tuple[str, str | None] | None = None  # the last receipt recorded


class Live:
    def __init__(self, sup: Supervisor, backend: Backend) -> None:
        self.sup = sup
        self.spec = spec = sup.spec
        self.backend = backend
        self.refusals: dict[str, str] = dict(spec.refuse or {})
        self.server: ControlServer | None = None
        self.writer: InputWriter | None = None
        self.messages: dict[str, Message] = {}
        self.followups: list[str] = []
        self.delivered = 0
        self.turned_away = 0  # messages refused as they came (not sent)
        self.ending = False
        self._seen: tuple[int, int, float | None] = (0, 0, None)
        # The child's turns when it came to rest and the run went on (a follow-up sent, a
        # message it holds): if it ends with no turn since, its last answer stands.
        self.rest_turns: int | None = None
        # The one repair turn of a run whose task carries its output schema: asked yet.
        self.repaired = False
        self.budget: Budget | None = None
        if spec.limits:
            self.budget = self._budget(spec.limits, spec.jobLimits)
        # Something to do after each line the child writes (its input, a budget): the
        # supervisor asks only then.
        self.active = spec.live or self.budget is not None
        # --approvals: the child's requests to act wait for decisions (approvals.py).
        self.approvals: Approvals | None = None
        if spec.approvals:
            from subagents.supervisor.approvals import Approvals

            self.approvals = Approvals(sup, spec.approvals)

    # ---- the child -------------------------------------------------------------------

    def request(self, task: str | None = None, resume: str | None = None) -> CommandRequest:
        """The run's command request (``meta.json``'s ``command``), for ``task``."""
        from subagents.backends import CommandRequest

        fallback: CommandRecord = {"cwd": self.spec.cwd, "live": self.spec.live}
        record = (self.spec.command or fallback).copy()
        if resume is not None:
            record["resume"] = resume
        # The run's own task carries its output schema's instruction (``taskSuffix``).
        own = self.spec.task + (self.spec.taskSuffix or "")
        return CommandRequest(task=own if task is None else task, **record)

    def _budget(self, limits: Limits, job: dict[str, float] | None = None) -> Budget:
        from subagents.supervisor.budget import Budget

        return Budget(limits, grace=self.spec.graceTurns, graceful=self.spec.live, job=job)

    def listen(self, sel: selectors.BaseSelector) -> None:
        """Open the control endpoint, where the run can take something: a message (its CLI
        takes one kind or another), or its job's budget reached (it has a budget)."""
        takes = self.spec.live or len(self.refusals) < len(MODES)
        if not (takes or self.budget is not None or self.approvals is not None):
            return
        from subagents.supervisor.control import ControlServer

        self.server = ControlServer(self.sup.run_dir, self.on_request)
        problem = self.server.listen(sel)
        if problem:
            self.sup.emit(ev.notice("warn", problem))

    def started(self, stdin_fd: int, sel: selectors.BaseSelector) -> None:
        """A live child was spawned with ``stdin_fd`` as its stdin: give it its task."""
        from subagents.supervisor.stdin import InputWriter

        self.writer = InputWriter(stdin_fd, sel)
        self.take(self.norm.begin(self.request()))

    @property
    def norm(self) -> Normalizer:
        norm = self.sup.norm
        assert norm is not None
        return norm

    def after_line(self, fed: Fed, terminal: bool) -> Action | None:
        """The child wrote a line (``active`` runs, or one that asks for a write): write
        what its normalizer asks for, record receipts, check the budget (``terminal``: the
        line ended the child's turn)."""
        if fed.writes or fed.receipts:
            self.take(fed)
        for key, tool, tool_input in fed.asks:
            self._ask(key, tool, tool_input)
        if self.budget is not None:
            return self.on_progress(terminal)
        return None

    def take(self, fed: Fed) -> None:
        """Write what the child's normalizer asks for; record what became of messages."""
        if self.writer is not None:
            for line in fed.writes:
                self.writer.write(line)
        for mid, receipt, reason in fed.receipts:
            self.receipt(mid, receipt, reason)

    def on_ready(self, fileobj: FileDescriptorLike) -> Action | None:
        """A connection, or a request on one, at the control endpoint."""
        assert self.server is not None
        return self.server.on_ready(fileobj)

    # ---- messages --------------------------------------------------------------------

    def on_request(self, request: JsonObject, reply: Reply) -> Action | None:
        op = request.get("op")
        if op == "limit":
            return self._job_limit(request, reply)
        if op in ("approval", "decided"):
            self._approval(request, reply)
            return None
        mode, text = _mode(request.get("mode")), request.get("text")
        if op != "send" or mode is None or not isinstance(text, str):
            reply.send({"receipt": "refused", "reason": "not a request this supervisor takes"})
            return None
        mid = f"m{len(self.messages) + 1}"
        message = self.messages[mid] = Message(mode, text, reply)
        why = self._refusal(mode, text)
        if why is not None:
            self.turned_away += 1
            self.receipt(mid, "refused", why)
        elif mode == "follow-up":
            self.followups.append(mid)
            self.receipt(mid, "queued", HELD)
        else:
            self.take(self.norm.steer(mid, text))
            if message.said is None:  # the CLI's own receipt has not come yet
                reply.wait({"id": mid, "receipt": "queued", "mode": mode})
        return None

    def _approval(self, request: JsonObject, reply: Reply) -> None:
        """A child's request to act (claude's permission server), answered when decided; or
        a decider's word that an item was decided."""
        approvals = self.approvals
        if approvals is None:
            reply.send({"receipt": "refused", "reason": "the run asks for no approvals"})
            return
        if request.get("op") == "decided":
            approvals.poll()
            reply.send({"receipt": "delivered"})
            return
        tool = request.get("tool")
        if not isinstance(tool, str) or not tool:
            reply.send({"receipt": "refused", "reason": "the request names no tool"})
            return
        # Answered by the decision; the fallback only if the endpoint outlived the timeout.
        reply.wait(
            {"receipt": "refused", "reason": "no decision"}, approvals.policy["timeout"] + 60
        )

        def answer(choice: ApprovalChoice, why: str | None, answers: list[str] | None) -> None:
            said: ControlReply = {"receipt": "delivered", "choice": choice}
            if why:
                said["reason"] = why
            if answers is not None:
                said["answers"] = answers
            reply.send(said)

        approvals.ask(tool, request.get("input"), answer)

    def _ask(self, key: JsonValue, tool: str, tool_input: JsonValue) -> None:
        """A request to act the child's normalizer hands over (codex's, an ACP agent's):
        its answer is written to the child once decided."""
        norm = self.norm
        if self.approvals is None:  # (a normalizer asks only under a policy)
            self.take(norm.answer_ask(key, "deny", "the run asks for no approvals"))
            return
        self.approvals.ask(
            tool,
            tool_input,
            lambda c, why, answers: self.take(norm.answer_ask(key, c, why, answers)),
        )

    def _refusal(self, mode: str, text: str) -> str | None:
        if not text.strip():
            return "the message is empty"
        if len(text.encode()) > MAX_MESSAGE_BYTES:
            return "the message is over 1 MiB"
        if self.ending:
            return ENDING
        if mode in self.refusals:
            return self.refusals[mode]
        if self.budget is not None and self.budget.state != "ok":
            return "the run's budget is spent: it is wrapping up"
        return None

    def receipt(self, mid: str, receipt: ReceiptWord, reason: str | None = None) -> None:
        """What became of message ``mid``: recorded when it changed, told to its sender
        when it is the first word of it."""
        message = self.messages.get(mid)
        if message is None or message.said == (receipt, reason):
            return
        if message.said is not None and message.said[0] in ("delivered", "refused"):
            return  # final already
        message.said = (receipt, reason)
        if receipt == "delivered":
            self.delivered += 1
            if message.mode == "wrap-up" and self.budget is not None:
                self.budget.wrap_up_taken(self.sup.totals()[0])
        self.sup.emit(ev.user_message(mid, message.mode, message.text, receipt, reason))
        if message.reply is not None:
            answer: ControlReply = {"id": mid, "mode": message.mode, "receipt": receipt}
            if reason:
                answer["reason"] = reason
            message.reply.send(answer)
            message.reply = None

    def counts(self) -> MessageCounts:
        return {"sent": len(self.messages) - self.turned_away, "delivered": self.delivered}

    # ---- budget ----------------------------------------------------------------------

    def on_progress(self, terminal: bool) -> Action | None:
        """The child reported something (only looked at when the run has a budget): check
        the budget when its turns or usage moved."""
        budget = self.budget
        if budget is None:
            return None
        turns, usage = self.sup.totals()
        seen = (turns, usage["totalTokens"], usage["cost"])
        if seen == self._seen:
            return None
        self._seen = seen
        if budget.cost_unknown(usage):
            self.sup.emit(
                ev.notice(
                    "warn",
                    "a cost limit is set, but the child reports no cost for its"
                    " model: that limit cannot be counted",
                )
            )
        # A turn that called no tool was an answer (a live child's run may not be over yet:
        # pi settles later, claude's result follows): nothing to wrap up or stop there.
        action = budget.check(turns, usage, terminal or self.norm.stop_reason != ev.TOOL_USE)
        return self._act(action) if action is not None else None

    def _job_limit(self, request: JsonObject, reply: Reply) -> Action | None:
        kind = _kind(request.get("kind"))
        limit, used = _number(request.get("limit")), _number(request.get("used"))
        if self.ending or kind is None:
            reply.send({"receipt": "refused", "reason": ENDING if self.ending else "bad limit"})
            return None
        if self.budget is None:
            self.budget = self._budget({})
            self.active = True
        turns, usage = self.sup.totals()
        action = self.budget.force(kind, limit, used, turns, usage)
        reply.send({"receipt": "queued", "reason": action or "already acting on a limit"})
        return self._act(action) if action is not None else None

    def _limit_event(self) -> None:
        assert self.budget is not None and self.budget.record is not None
        record = self.budget.record
        self.sup.emit(
            ev.limit(
                record["kind"], record["limit"], record["used"], record["action"], record["scope"]
            )
        )

    def _act(self, action: str) -> Action | None:
        self._limit_event()
        if action == "wrap-up":
            mid = f"w{len(self.messages) + 1}"
            self.messages[mid] = Message("wrap-up", self.spec.wrapUp, None)
            self.take(self.norm.steer(mid, self.spec.wrapUp))
            return None
        return "limit"  # abort: the run stops for its limit

    def next_deadline(self) -> float | None:
        points = [
            self.server.next_deadline() if self.server is not None else None,
            self.approvals.next_deadline() if self.approvals is not None else None,
        ]
        return min((p for p in points if p is not None), default=None)

    def on_deadlines(self, now: float) -> None:
        if self.approvals is not None:
            self.approvals.on_deadlines(now)
        if self.server is not None:
            self.server.on_deadlines(now)

    # ---- at rest ---------------------------------------------------------------------

    def at_rest(self, stopped: bool) -> AtRest:
        """The child's last event ended its turn: "go on" when the run goes on (a follow-up
        sent, or a message the CLI holds); else it ends (a live child's stdin closed).
        ``stopped``: the run stops for a cause of the supervisor's (nothing more is sent)."""
        norm = self.norm
        budget = self.budget
        turns, usage = self.sup.totals()
        if (
            budget is not None
            and norm.own_limit
            and budget.stopped_by_cli(norm.own_limit, turns, usage)
        ):
            self._limit_event()
        self._repair(stopped)
        if not self.spec.live:
            return "end"  # a follow-up is a continuation, once the child has exited
        turn: Fed | None = None
        if self._may_go_on(budget, turns, usage, stopped):
            turn = norm.held_input()
            if turn is None and self.followups:
                mid = self.followups.pop(0)
                turn = norm.follow_up(mid, self.messages[mid].text)
        if turn is not None:
            self.take(turn)
            self.rest_turns = turns
            return "go on"
        self.end_input()
        return "end"

    def _repair(self, stopped: bool) -> None:
        """An answer that does not satisfy the output schema the task carries gets one
        repair turn quoting why, before anything else queued (a follow-up where the child
        takes input, else a continuation of its conversation)."""
        norm = self.norm
        if (
            self.spec.schemaMode != "instructed"
            or self.repaired
            or norm.failed
            or stopped
            or not (self.spec.live or self.backend.can_continue)
        ):
            return
        from subagents.supervisor import answer

        _, problem = answer.check(self.spec, norm)
        if problem is None:
            return
        self.repaired = True
        mid = f"r{len(self.messages) + 1}"
        self.messages[mid] = Message("repair", answer.repair_text(problem), None)
        self.followups.insert(0, mid)
        self.sup.emit(ev.notice("warn", f"{answer.FAILED}: {problem}; asking once more"))
        self.receipt(mid, "queued")

    def _may_go_on(self, budget: Budget | None, turns: int, usage: Usage, stopped: bool) -> bool:
        if self.norm.failed or stopped:
            self._refuse_held("the run did not end well: its follow-ups were not delivered")
            return False
        if budget is None or not self.followups:
            return True
        spent = budget.spent(turns, usage)
        if spent is None:
            return True
        if budget.state == "ok":  # reached at this answer: it is where the run stops
            budget.stop(spent, turns, usage)
            self._limit_event()
        from subagents.supervisor.budget import NAMES, describe

        kind, limit = spent
        self._refuse_held(f"the run's {NAMES[kind]} limit of {describe(kind, limit)} is reached")
        return False

    def continuation(self, terminal: bool) -> tuple[str, str] | None:
        """A child that takes no input has exited (``terminal``: after its answer): the
        follow-up to continue its conversation with, in a new process (None: the run ends).
        Asked only of a run that does not stop for a cause of the supervisor's."""
        turns, usage = self.sup.totals()
        if (
            not self.followups
            or not terminal
            or not self._may_go_on(self.budget, turns, usage, False)
        ):
            return None
        mid = self.followups.pop(0)
        return mid, self.messages[mid].text

    def end_input(self) -> None:
        """No more messages: the child's stdin closes once what is buffered is written."""
        self.ending = True
        if self.writer is not None:
            self.writer.close()

    def _refuse_held(self, why: str) -> None:
        for mid in self.followups:
            self.receipt(mid, "refused", why)
        self.followups = []

    def answer_stands(self) -> bool:
        """A child that came to rest and was given more (a follow-up, a message it held),
        then ended without a turn since: the answer it gave at rest is the run's."""
        return self.rest_turns is not None and self.sup.totals()[0] == self.rest_turns

    def finish(self) -> tuple[MessageCounts, LimitRecord | None]:
        """The run is over: nothing more is taken; what was never delivered says so."""
        self.ending = True
        if self.approvals is not None:
            self.approvals.finish()
        if self.server is not None:
            self.server.close("the run has ended")
        self._refuse_held(ENDED)
        for mid, message in self.messages.items():
            if message.said is None or message.said[0] == "queued":
                self.receipt(mid, "refused", ENDED)
        if self.writer is not None and not self.writer.closed:
            self.writer.close()
        record = None
        if self.budget is not None:
            turns, usage = self.sup.totals()
            self.budget.settle(turns, usage)
            record = self.budget.record
        return self.counts(), record


# A request is another process's JSON: each field is narrowed to what it may be.


def _mode(value: JsonValue) -> MessageMode | None:
    if value == "steer":
        return "steer"
    if value == "follow-up":
        return "follow-up"
    return None


def _kind(value: JsonValue) -> LimitKind | None:
    if value == "turns":
        return "turns"
    if value == "tokens":
        return "tokens"
    if value == "cost":
        return "cost"
    return None


def _number(value: JsonValue) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
