"""Humanized progress lines from canonical events.

One formatter serves the live CLI display, ``transcript.md`` and MCP progress
messages, so they all say the same thing. Standard library only: the supervisor
imports this module.

Tool calls are put in words by :mod:`subagents.present.humanize`.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict

from subagents.core.approve import CHOICE_WORDS
from subagents.core.childtext import neutralize, one_line
from subagents.present.humanize import (
    ELLIPSIS,
    MEMORY_LIMIT,
    THINKING_LIMIT,
    WARN_LEVELS,
    Call,
    collapse,
    duration,
    head,
)

# typing and dataclasses are not imported at run time: the supervisor imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from subagents.types import ApprovalEvent, Event, LimitEvent, ToolCall, ToolResult, UserMessage

__all__ = ["ProgressFormatter", "transcript_entry"]

# A progress line is one line, and a short one, wherever it is shown (a terminal, a log,
# an MCP message): a long answer or tool output is cut here; the transcript keeps it whole.
LINE_LIMIT = 400


class ProgressFormatter:
    """Turns canonical events into short progress lines.

    Stateful: it remembers tool calls by ``toolCallId`` so results can say what
    finished, and the latest activity for a status line. Feeding the same event
    twice is harmless.
    """

    def __init__(self, max_len: int | None = LINE_LIMIT) -> None:
        self.max_len = max_len
        self._calls: OrderedDict[str, Call] = OrderedDict()
        self._pending: OrderedDict[str, None] = OrderedDict()
        # The latest activity: text, or a tool call (and its outcome) worded only when
        # asked for; most events are never shown on a status line.
        self._activity: str | tuple[Call, str | None, str | None] | None = None
        self._cwd: str | None = None
        # When the child went quiet, while the last event is the watchdog's stall notice.
        self._stalled_since: object = None
        # The approval items the child waits on (requested, not decided yet).
        self._waiting: set[str] = set()

    # public

    def line(self, event: Event) -> str | None:
        """The progress line for ``event``, or None when there is nothing to show.

        Its fields are read one by one, each checked as it is read: an event read back from
        disk, whatever else it holds, is worded or passed over, never an error."""
        text = self._text(event, shorten=True)
        return None if text is None else self._cap(neutralize(text))

    def stalled_for(self) -> float | None:
        """Seconds the child has been quiet, while the last event is the watchdog's stall
        notice; None when it is not stalled."""
        since = self._stalled_since
        return max(0.0, time.time() - since) if isinstance(since, (int, float)) else None

    def waiting(self) -> bool:
        """Whether the child waits for a decision on a request to act (docs/approvals.md)."""
        return bool(self._waiting)

    def activity(self) -> str | None:
        """Short "current activity" for a status line (None before anything happened)."""
        quiet = self.stalled_for()
        if quiet is not None:
            return self._cap(f"stalled for {quiet:.0f} s")
        activity = self._activity
        if isinstance(activity, tuple):
            call, outcome, cwd = activity
            activity = self._activity = call.words(outcome, shorten=True, cwd=cwd)
        return None if activity is None else self._cap(neutralize(activity))

    # internals

    def _cap(self, text: str) -> str:
        return text if self.max_len is None else head(text, self.max_len)

    def _remember(self, call_id: str, call: Call) -> None:
        """Remember a call (and that it runs) as the latest; forget the oldest past the limit."""
        calls, pending = self._calls, self._pending
        if call_id in calls:  # an id seen again moves to the end (a new one is put there)
            calls.move_to_end(call_id)
        calls[call_id] = call
        if len(calls) > MEMORY_LIMIT:
            calls.popitem(last=False)
        if call_id in pending:
            pending.move_to_end(call_id)
        pending[call_id] = None
        if len(pending) > MEMORY_LIMIT:
            pending.popitem(last=False)

    def _text(self, event: Event, *, shorten: bool) -> str | None:
        """Word ``event`` (full paths when ``shorten`` is False) and update the state."""
        etype = event.get("type")
        if etype == "assistant_text":
            text = event.get("text")
            # (isspace: strip's verdict without a copy of a big answer)
            if not isinstance(text, str) or not text or text.isspace():
                return None
            self._activity = "Writing answer"
            return collapse(text) if shorten else text.strip()
        if etype == "thinking":
            text = event.get("text")
            self._activity = "Thinking"
            if not isinstance(text, str) or not text.strip():
                return None
            return "Thinking: " + (
                head(collapse(text), THINKING_LIMIT) if shorten else text.strip()
            )
        if event["type"] == "tool_call":
            return self._tool_call(event, shorten=shorten)
        if event["type"] == "tool_result":
            return self._tool_result(event, shorten=shorten)
        # Any event but a stall notice means the child is moving again.
        self._stalled_since = event.get("since") if event.get("stalled") else None
        if etype == "usage":  # (the status line shows tokens): the most frequent, first
            return None
        if etype == "notice":
            message = str(event.get("message") or "").strip()
            level = str(event.get("level") or "info").lower()
            if not message or level == "debug":
                return None
            message = collapse(message) if shorten else message
            return f"⚠ {message}" if level in WARN_LEVELS else message
        if etype == "error":
            message = str(event.get("message") or "").strip() or "unknown error"
            text = "Error: " + (collapse(message) if shorten else message)
            if event.get("fatal"):
                self._activity = text
            return text
        if etype == "run_started":
            cwd = event.get("cwd")
            self._cwd = cwd if isinstance(cwd, str) and cwd else None
            backend = event.get("backend") or "agent"
            model = event.get("model")
            text = f"Started {backend}" + (f" ({model})" if model else "")
            self._activity = "Starting"
            return text
        if etype == "run_finished":
            text = f"Finished: {event.get('status') or 'unknown'}"
            took = duration(event.get("durationMs"))
            if took:
                text += f" in {took}"
            self._activity = text
            return text
        if event["type"] == "user_message":
            return self._message(event, shorten=shorten)
        if event["type"] == "limit":
            return limit_words(event)
        if event["type"] == "approval":
            return self._approval(event)
        return None  # usage (the status line shows tokens) and anything unknown

    def _approval(self, event: ApprovalEvent) -> str:
        """A request to act, or its decision: what waits is the activity meanwhile."""
        text = approval_words(event)
        item = str(event.get("item"))
        if event.get("state") == "decided":
            self._waiting.discard(item)
        elif event.get("waitsFor"):
            self._waiting.add(item)
            self._activity = text
        return text

    def _message(self, event: UserMessage, *, shorten: bool) -> str | None:
        """A message sent to the child, and what became of it."""
        mode = str(event.get("mode") or "message")
        receipt = event.get("receipt")
        reason = str(event.get("reason") or "")
        who = "subagents" if mode in ("wrap-up", "repair") else "you"
        if receipt == "delivered":
            return f"✓ the child took {'the' if who == 'subagents' else 'your'} {mode}"
        if receipt == "refused":
            return f"✗ {mode} not taken: {reason or 'refused'}"
        if event.get("reason") and reason != HELD_REASON and mode != "follow-up":
            return f"(your {mode}) {reason}"  # a later word on a message sent before
        text = str(event.get("text") or "")
        text = collapse(text) if shorten else text.strip()
        line = f"{who} → child ({mode}): {text}"
        self._activity = head(line, 80)
        return line

    def _tool_call(self, event: ToolCall, *, shorten: bool) -> str:
        call_id = event.get("toolCallId")
        call = Call(str(event.get("toolName") or "tool"), event.get("args"))
        if isinstance(call_id, str) and call_id:
            self._remember(call_id, call)
        self._activity = (call, None, self._cwd)
        return call.words(None, shorten=shorten, cwd=self._cwd)

    def _tool_result(self, event: ToolResult, *, shorten: bool) -> str:
        call_id = event.get("toolCallId")
        outcome = "failed" if event.get("isError") else "done"
        call = self._calls.get(call_id) if isinstance(call_id, str) else None
        if call is None:
            call = Call(str(event.get("toolName") or "tool"), None)
        if isinstance(call_id, str):
            self._pending.pop(call_id, None)
        text = call.words(outcome, shorten=shorten, cwd=self._cwd)
        if self._pending:  # another call is still running: that is the current activity
            latest = self._calls.get(next(reversed(self._pending)))
            self._activity = (latest, None, self._cwd) if latest is not None else text
        else:
            self._activity = (call, outcome, self._cwd)
        return text


# A follow-up's first receipt: it waits in the supervisor (supervisor/live.py says it so).
HELD_REASON: Final = "held until the current turn ends"
_LIMIT_NAMES: Final = {"turns": "turn", "tokens": "token", "cost": "cost"}
_LIMIT_ACTIONS: Final = {
    "wrap-up": "asking the child to wrap up",
    "abort": "stopping the child",
    "stop": "the run ends at this answer",
}


def _amount(kind: str, value: object) -> str:
    if not isinstance(value, (int, float)):
        return "?"
    if kind == "cost":
        return f"${value:.2f}" if value >= 0.01 else f"${value:.4g}"
    return f"{int(value)}"


def limit_words(event: LimitEvent) -> str:
    """``⚠ turn limit reached (3 of 3): asking the child to wrap up``."""
    kind = str(event.get("kind") or "")
    whose = "job's " if event.get("scope") == "job" else ""
    used, limit = _amount(kind, event.get("used")), _amount(kind, event.get("limit"))
    action = _LIMIT_ACTIONS.get(str(event.get("action")), str(event.get("action")))
    name = _LIMIT_NAMES.get(kind, kind)
    return f"⚠ {whose}{name} limit reached ({used} of {limit}): {action}"


def approval_words(event: ApprovalEvent) -> str:
    """``⏸ waiting for approval (item 01…): Bash: git push`` / ``✓ allowed by ann: …``; a
    question's ``⏸ waiting for an answer (item 01…): Which colour? (Red | Blue)`` /
    ``✓ answered by ann: Which colour? (Red | Blue) → Blue``."""
    summary = one_line(str(event.get("summary") or event.get("tool") or "a request"))
    question = event.get("kind") == "question"
    # (``ProgressFormatter._approval`` keeps what waits; the words are these.)
    if event.get("state") != "decided":
        item = event.get("item")
        if event.get("waitsFor") == "parent" and question:
            how = f"subagent_decide, choice answer, item {item}"
            return f"⏸ waiting for your answer ({how}): {summary}"
        if event.get("waitsFor") == "parent":
            return f"⏸ waiting for your decision (subagent_decide, item {item}): {summary}"
        if event.get("waitsFor") == "person":
            wanted = "an answer" if question else "approval"
            return f"⏸ waiting for {wanted} (item {item}): {summary}"
        return f"asks the user: {summary}" if question else f"asks to act: {summary}"
    choice = str(event.get("choice") or "")
    mark = "✗" if choice == "deny" else "✓"
    word = "not answered" if question and choice == "deny" else CHOICE_WORDS.get(choice, choice)
    text = f"{mark} {word} by {one_line(str(event.get('by')))}"
    reason = event.get("reason")
    if reason:
        text += f" ({one_line(str(reason))})"
    answers = event.get("answers")
    if answers:
        return f"{text}: {summary} → {one_line(' · '.join(str(a) for a in answers))}"
    return f"{text}: {summary}"


# --------------------------------------------------------------------------- transcript

# A tool's output under its line in the transcript, at most (a failure's and a success's).
TRANSCRIPT_OUTPUT_TEXT: Final = 800


def _fence_for(text: str) -> str:
    if "`" not in text:  # (most outputs: nothing to count)
        return "```"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line.strip() else ">" for line in text.splitlines())


def _output(text: str) -> str:
    """A tool's output as a code fence in its line's list item (the web shows it collapsed),
    its first :data:`TRANSCRIPT_OUTPUT_TEXT` characters; nothing for none."""
    output = text.strip()
    if not output:
        return ""
    if len(output) > TRANSCRIPT_OUTPUT_TEXT:
        more = len(output) - TRANSCRIPT_OUTPUT_TEXT
        output = f"{output[:TRANSCRIPT_OUTPUT_TEXT]}\n{ELLIPSIS} [{more} more characters]"
    fence = _fence_for(output)
    body = "\n".join("  " + line for line in output.splitlines())
    return f"\n  {fence}\n{body}\n  {fence}\n\n"


def transcript_entry(event: Event, formatter: ProgressFormatter) -> str | None:
    """Markdown chunk for ``transcript.md``; chunks are meant to be concatenated as they are.

    Uses the same wording as :meth:`ProgressFormatter.line` (with full paths and
    commands) and updates ``formatter``'s state the same way. A child's control
    characters and escape sequences never reach it (``cat transcript.md`` is safe).
    """
    # Most of a long run: a tool call, or a result without output, one line each, worded
    # directly (what `_text` dispatches to). Printable text holds no control character,
    # escape or lone surrogate (each is unprintable), so there is nothing to neutralise.
    if event["type"] == "tool_call":
        text = formatter._tool_call(event, shorten=False)
    elif event["type"] == "tool_result" and not event.get("isError") and not event.get("text"):
        text = formatter._tool_result(event, shorten=False)
    else:
        text = None
    if text is not None:
        return f"- {text}\n" if text.isprintable() else neutralize(f"- {text}\n")
    chunk = _transcript_chunk(event, formatter)
    return None if chunk is None else neutralize(chunk)


def _transcript_chunk(event: Event, formatter: ProgressFormatter) -> str | None:
    text = formatter._text(event, shorten=False)
    if text is None:
        return None
    etype = event.get("type")
    if etype in ("run_started", "run_finished"):
        return f"\n## {text}\n\n"
    if etype == "assistant_text":
        return f"\n{text}\n\n"
    if etype == "thinking":
        return "\n" + _quote(text) + "\n\n"
    if etype == "tool_call":
        return f"- {text}\n"
    if etype == "tool_result":
        mark = "✗ " if event.get("isError") else ""
        return f"- {mark}{text}\n" + _output(str(event.get("text") or ""))
    if etype == "error":
        return "\n" + _quote("**" + text.replace("Error:", "Error:**", 1)) + "\n\n"
    if etype in ("notice", "limit", "approval"):
        return "\n" + _quote(text) + "\n\n"
    if etype == "user_message":
        # A message sent (whole, as the child got it), or what became of it (one line).
        sent = text.startswith(("you → child", "subagents → child"))
        return "\n" + _quote(text) + "\n\n" if sent else f"- {text}\n"
    return f"\n{text}\n\n"
