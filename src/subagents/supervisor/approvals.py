"""Approvals, the supervisor's side (docs/approvals.md): a child's request to act is let
through by a rule, denied by the policy, or written to the run's inbox (``core.inbox``) to
wait for a decision, which is answered to whoever asked for the child (claude's permission
server over the control endpoint; a backend's normalizer for codex's and ACP's requests).

A decision is taken by whoever claims it first in the inbox: a person (``subagents
approve``), the parent, or this module when the item's time is up (denied, the reason
recorded) or the run ends. The decider pokes the control endpoint (``decided``); the inbox
is also looked at every ``POLL`` seconds while an item waits, so a poke that never came
delays a decision, never loses it. While an item waits the stall watchdog's clocks stop.
Every request and decision is an ``approval`` event (and so a transcript line); result.json
lists them. Standard library only.
"""

from __future__ import annotations

import time

from subagents.core import approve, inbox, questions
from subagents.core import events as ev
from subagents.core.ids import new_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Literal, Protocol

    from subagents.supervisor.phase import StallWatch
    from subagents.supervisor.spec import RunSpec
    from subagents.types import (
        ApprovalChoice,
        ApprovalDecision,
        ApprovalItem,
        ApprovalPolicy,
        ApprovalRecord,
        Event,
        ItemKind,
        JsonValue,
        Question,
    )

    WaitsFor = Literal["person", "parent"]
    # What a request's answer is given to: the choice, why (a denial's message), and a
    # question's answers.
    Answer = Callable[[ApprovalChoice, str | None, list[str] | None], None]

    class Supervisor(Protocol):
        spec: RunSpec
        run_dir: Path
        watch: StallWatch

        def emit(self, event: Event) -> None: ...
        def flush(self) -> None: ...


# How often the inbox is looked at while an item waits (a decider's poke is the fast path).
POLL = 1.0
RUN_ENDED = "the run ended before a decision"
NOT_ALLOWED = "the run's policy denies what its rules do not allow"
NO_ANSWERS = "the run's policy answers no questions: decide yourself and say so"
# The most of a request's input an item keeps (JSON characters).
INPUT_LIMIT = 64 * 1024


class Waiting:
    __slots__ = ("answer", "deadline", "record")

    def __init__(self, record: ApprovalRecord, answer: Answer, deadline: float) -> None:
        self.record = record
        self.answer = answer
        self.deadline = deadline


class Approvals:
    def __init__(self, sup: Supervisor, policy: ApprovalPolicy) -> None:
        self.sup = sup
        self.policy = policy
        self.waiting: dict[str, Waiting] = {}
        self.records: list[ApprovalRecord] = []
        self.always: set[str] = set()  # tools allowed for the rest of the run
        self.next_poll: float | None = None

    def ask(self, tool: str, tool_input: JsonValue, answer: Answer) -> None:
        """A child asks to use ``tool`` with ``tool_input`` (or, with an asking tool, asks
        the user its questions): answered now (a rule, the policy) or once decided."""
        spec = self.sup.spec
        asked = questions.questions_of(tool, tool_input)
        kind: ItemKind = "approval" if asked is None else "question"
        if asked is None:
            summary = approve.summary(tool, tool_input)
        else:
            summary = questions.summary(asked, approve.SUMMARY_LIMIT)
        item_id = new_id()
        now = time.time()
        record: ApprovalRecord = {
            "item": item_id,
            "tool": tool,
            "summary": summary,
            "requestedAt": now,
            "choice": None,
            "by": None,
            "decidedAt": None,
        }
        if asked is not None:
            record["kind"] = kind
        self.records.append(record)
        rule = None
        if asked is None:  # (rules say what may act; a question is never passed unanswered)
            rule = approve.passes(
                self.policy["rules"], self.policy["editsInTree"], tool, tool_input, spec.cwd
            )
            if rule is None and tool in self.always:
                rule = f"{tool} allowed for the rest of the run"
            if rule is not None and not self._parent_may(tool, tool_input):
                rule = None  # (a parent's own rules pass nothing outside the user's bound)
        policy = self.policy["policy"]
        waits = rule is None and policy != "deny"
        who: WaitsFor | None = None
        if waits:
            who = (
                "parent" if policy == "parent" and self._parent_may(tool, tool_input) else "person"
            )
        self.sup.emit(ev.approval(item_id, tool, summary, waits_for=who, kind=kind))
        if rule is not None:
            self._settled(record, answer, _decision(item_id, "allow", "rule", rule))
            return
        if policy == "deny":
            why = NO_ANSWERS if asked is not None else NOT_ALLOWED
            self._settled(record, answer, _decision(item_id, "deny", "policy", why))
            return
        unwritten = self._write(item_id, tool, tool_input, summary, asked, now, who == "parent")
        if unwritten is not None:  # (a full disk): nobody could decide it, so it is denied
            why = f"the inbox could not be written: {unwritten}"
            self._settled(record, answer, _decision(item_id, "deny", "subagents", why))
            return
        mono = time.monotonic()
        self.waiting[item_id] = Waiting(record, answer, mono + self.policy["timeout"])
        self.sup.watch.pause(mono)
        self.next_poll = mono + POLL
        self.sup.flush()

    def _write(
        self,
        item_id: str,
        tool: str,
        tool_input: JsonValue,
        summary: str,
        asked: list[Question] | None,
        now: float,
        parent: bool,
    ) -> str | None:
        """The item written to the run's inbox (``parent``: for the parent to decide, else
        a person); else why it could not be."""
        spec = self.sup.spec
        item: ApprovalItem = {
            "id": item_id,
            "runId": spec.runId,
            "jobId": spec.jobId,
            "backend": spec.backend,
            "task": spec.task[:2000],
            "tool": tool,
            "summary": summary,
            "input": _bounded(tool_input),
            "policy": "parent" if parent else "ask",
            "choices": ["allow", "always", "deny"] if asked is None else ["answer", "deny"],
            "requestedAt": now,
            "expiresAt": now + self.policy["timeout"],
            "kind": "approval" if asked is None else "question",
        }
        if asked is not None:
            item["questions"] = asked
        if "parentMay" in self.policy:
            item["parentMay"] = self.policy["parentMay"]
            item["cwd"] = spec.cwd
        try:
            inbox.write_item(self.sup.run_dir, item)
        except OSError as exc:
            return str(exc.strerror or exc)
        return None

    def _parent_may(self, tool: str, tool_input: JsonValue) -> bool:
        """Whether the parent may decide this request: a question always; a request to act
        when no bound is set (``parentMay``) or one of its rules covers it."""
        bound = self.policy.get("parentMay") if self.policy["policy"] == "parent" else None
        if bound is None or questions.questions_of(tool, tool_input) is not None:
            return True
        return approve.passes(bound, False, tool, tool_input, self.sup.spec.cwd) is not None

    def poll(self) -> None:
        """Settle every waiting item that was decided."""
        for item_id in list(self.waiting):
            decision = inbox.read_decision(self.sup.run_dir, item_id)
            if decision is not None:
                self._settle(item_id, decision)
        self.next_poll = time.monotonic() + POLL if self.waiting else None

    def next_deadline(self) -> float | None:
        if not self.waiting:
            return None
        soonest = min(w.deadline for w in self.waiting.values())
        return soonest if self.next_poll is None else min(soonest, self.next_poll)

    def on_deadlines(self, now: float) -> None:
        if not self.waiting:
            return
        timeout = self.policy["timeout"]
        for item_id in [i for i, w in self.waiting.items() if now >= w.deadline]:
            why = f"no decision within {timeout:g} s"
            _, decision = inbox.claim(self.sup.run_dir, item_id, "deny", "timeout", why)
            self._settle(item_id, decision)
        if self.next_poll is not None and now >= self.next_poll:
            self.poll()

    def finish(self) -> list[ApprovalRecord]:
        """The run is over: what still waits is denied (unless decided just now)."""
        for item_id in list(self.waiting):
            _, decision = inbox.claim(self.sup.run_dir, item_id, "deny", "subagents", RUN_ENDED)
            self._settle(item_id, decision)
        inbox.close(self.sup.run_dir)
        return self.records

    def _settle(self, item_id: str, decision: ApprovalDecision) -> None:
        waiting = self.waiting.pop(item_id)
        if not self.waiting:
            self.sup.watch.resume(time.monotonic())
            self.next_poll = None
        self._settled(waiting.record, waiting.answer, decision)

    def _settled(self, record: ApprovalRecord, answer: Answer, decision: ApprovalDecision) -> None:
        choice, reason = decision["choice"], decision.get("reason")
        answers = decision.get("answers") if choice == "answer" else None
        record["choice"] = choice
        record["by"] = decision["by"]
        record["decidedAt"] = decision["at"]
        if reason:
            record["reason"] = reason
        if answers is not None:
            record["answers"] = answers
        if choice == "always":
            self.always.add(record["tool"])
        event = ev.approval(
            record["item"], record["tool"], record["summary"], choice, decision["by"], reason
        )
        if "kind" in record:
            event["kind"] = record["kind"]
        if answers is not None:
            event["answers"] = answers
        self.sup.emit(event)
        self.sup.flush()
        message = None
        if choice == "deny":
            by = decision["by"]
            what = "not answered" if "kind" in record else "denied"
            message = f"{what} by {by}" + (f": {reason}" if reason else "")
        answer(choice, message, answers)


def _bounded(tool_input: JsonValue) -> JsonValue:
    """The input as the item keeps it: whole up to ``INPUT_LIMIT`` bytes of JSON (a file a
    child would write may be large), else only its keys' small values."""
    import json

    if len(json.dumps(tool_input, ensure_ascii=False)) <= INPUT_LIMIT:
        return tool_input
    if not isinstance(tool_input, dict):
        return {"truncated": True}
    small = {k: v for k, v in tool_input.items() if len(json.dumps(v)) <= 1000}
    return {**small, "truncated": True}


def _decision(item_id: str, choice: ApprovalChoice, by: str, reason: str) -> ApprovalDecision:
    """A decision taken here, at once (a rule, the policy): no one else could take it."""
    return {"item": item_id, "choice": choice, "by": by, "at": time.time(), "reason": reason}
