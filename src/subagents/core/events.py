"""Canonical events and stop reasons shared by every backend.

Events are plain dicts (cheap to build, ready for JSON). Every event carries
``seq``, ``ts`` and ``type``; the supervisor stamps ``seq`` and ``ts``.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # typing itself is not imported: it slows the supervisor's start

if TYPE_CHECKING:
    from typing import Final, Literal

    from subagents.types import (
        ApprovalChoice,
        ApprovalEvent,
        AssistantText,
        ErrorEvent,
        Event,
        ItemKind,
        JsonValue,
        LimitAction,
        LimitEvent,
        LimitKind,
        LimitScope,
        MessageMode,
        Notice,
        NoticeLevel,
        ReceiptWord,
        RunFinished,
        RunStarted,
        RunStatus,
        StopReason,
        Thinking,
        ToolCall,
        ToolResult,
        Usage,
        UsageEvent,
        UserMessage,
    )

__all__ = ["Event"]  # the union of every event, for annotations (subagents.types.Event)

# Canonical stop reasons.
STOP: Final = "stop"
LENGTH: Final = "length"
TOOL_USE: Final = "toolUse"
ABORTED: Final = "aborted"
ERROR: Final = "error"

TERMINAL_SUCCESS: Final = frozenset({STOP, LENGTH})
TERMINAL_FAILURE: Final = frozenset({ABORTED, ERROR})
TERMINAL: Final = TERMINAL_SUCCESS | TERMINAL_FAILURE

_RAW_TO_CANONICAL: Final[dict[str, StopReason]] = {
    "toolUse": TOOL_USE,
    "tool_use": TOOL_USE,
    "tool_calls": TOOL_USE,
    "tool-calls": TOOL_USE,
    "stop": STOP,
    "end_turn": STOP,
    "endTurn": STOP,
    "stop_sequence": STOP,
    "length": LENGTH,
    "max_tokens": LENGTH,
    "aborted": ABORTED,
    "error": ERROR,
}

EVENT_TYPES: Final = frozenset(
    {
        "run_started",
        "assistant_text",
        "thinking",
        "tool_call",
        "tool_result",
        "usage",
        "notice",
        "error",
        "run_finished",
        "user_message",
        "limit",
        "approval",
    }
)


def canonical_stop_reason(raw: str | None) -> str | None:
    """Map a CLI's stop-reason spelling onto the canonical one.

    An unknown value is kept as it came: it is then never terminal.
    """
    if raw is None:
        return None
    return _RAW_TO_CANONICAL.get(raw, raw)


def is_terminal(stop_reason: str | None) -> bool:
    return stop_reason in TERMINAL


# The token counts of a usage record; with its cost, every key of one.
TOKEN_KEYS: Final = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
USAGE_KEYS: Final = (*TOKEN_KEYS, "cost")


def empty_usage() -> Usage:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": None,
    }


def count(value: object) -> int:
    """A token count as a CLI or a record says it: a number (a fraction cut off), anything
    else 0."""
    if type(value) is int:  # nearly always: cheaper than int() was on a parsed line's counts
        return value
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def number(value: object) -> float | None:
    """A number (a cost in USD, a time) as a CLI or a record says it; anything else None
    (for a cost: unpriced)."""
    if type(value) is float:
        return value
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def usage_of(record: Usage) -> Usage:
    """The usage a record carries (a usage event's, a result's), and nothing else of it."""
    return {
        "input": record["input"],
        "output": record["output"],
        "cacheRead": record["cacheRead"],
        "cacheWrite": record["cacheWrite"],
        "totalTokens": record["totalTokens"],
        "cost": record["cost"],
    }


def add_usage(total: Usage, part: Usage) -> Usage:
    """Sum ``part`` into ``total`` in place (``part`` may be a record's read back from disk:
    a count it lacks counts 0); cost stays None until someone reports one. A sum that is no
    number (an overflow, a child's NaN) stays so, whatever comes after, and is written
    unpriced: :func:`priced`."""
    total["input"] += count(part.get("input"))
    total["output"] += count(part.get("output"))
    total["cacheRead"] += count(part.get("cacheRead"))
    total["cacheWrite"] += count(part.get("cacheWrite"))
    total["totalTokens"] += count(part.get("totalTokens"))
    total["cost"] = add_cost(total["cost"], part.get("cost"))
    return total


def add_cost(total: float | None, cost: object) -> float | None:
    """A running sum of costs: None until one is known; infinite from the first that is no
    finite number or the first overflow (:func:`cost_of` makes that "unpriced", null)."""
    if not isinstance(cost, (int, float)) or isinstance(cost, bool):
        return total
    part = float(cost)
    if not math.isfinite(part):
        part = math.inf
    return (total or 0.0) + part


def cost_of(total: object) -> float | None:
    """A cost as a record holds it: a finite number, else None (unpriced; JSON has no
    Infinity or NaN, and a record is written strict)."""
    if isinstance(total, int | float) and not isinstance(total, bool) and math.isfinite(total):
        return float(total)
    return None


def priced(usage: Usage) -> Usage:
    """``usage`` fit for a record: its cost made :func:`cost_of` (a copy when it changes)."""
    cost = usage.get("cost")
    if cost is None or cost_of(cost) is not None:
        return usage
    return {**usage, "cost": None}


def started_event(events: list[Event]) -> RunStarted | None:
    """The run's ``run_started`` event (its child's pid and start time), if it has one."""
    for event in events:
        if event["type"] == "run_started":
            return event
    return None


# Constructors: one per event type, so every producer spells the fields the same way.


def run_started(
    backend: str,
    agent: str | None,
    model: str | None,
    cwd: str,
    pid: int,
    create_time: float | None = None,
) -> RunStarted:
    """``createTime``: when the child started (core.procs), so that whoever finds its
    supervisor dead signals that pid only while it is still the child."""
    return {
        "type": "run_started",
        "backend": backend,
        "agent": agent,
        "model": model,
        "cwd": cwd,
        "pid": pid,
        "createTime": create_time,
    }


def assistant_text(
    text: str,
    stop_reason: str | None,
    raw_stop_reason: str | None,
    model: str | None,
    usage: Usage | None = None,
) -> AssistantText:
    ev: AssistantText = {
        "type": "assistant_text",
        "text": text,
        "stopReason": stop_reason,
        "rawStopReason": raw_stop_reason,
        "model": model,
    }
    if usage is not None:
        ev["usage"] = usage
    return ev


def thinking(text: str) -> Thinking:
    return {"type": "thinking", "text": text}


def tool_call(tool_call_id: str, tool_name: str, args: JsonValue) -> ToolCall:
    return {"type": "tool_call", "toolCallId": tool_call_id, "toolName": tool_name, "args": args}


TOOL_RESULT_TEXT_LIMIT: Final = 4000


def tool_result(tool_call_id: str, tool_name: str, is_error: bool, text: str) -> ToolResult:
    truncated = len(text) > TOOL_RESULT_TEXT_LIMIT
    return {
        "type": "tool_result",
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "isError": bool(is_error),
        "text": text[:TOOL_RESULT_TEXT_LIMIT] if truncated else text,
        "truncated": truncated,
    }


def usage(totals: Usage) -> UsageEvent:
    return {
        "type": "usage",
        "input": totals["input"],
        "output": totals["output"],
        "cacheRead": totals["cacheRead"],
        "cacheWrite": totals["cacheWrite"],
        "totalTokens": totals["totalTokens"],
        "cost": cost_of(totals["cost"]),
    }


def notice(level: NoticeLevel, message: str) -> Notice:
    return {"type": "notice", "level": level, "message": message}


# How the supervisor's own notice of a stop it makes ends (a timeout, a signal): the run's
# status says that stop when it ends, so no face shows it as the child's warning.
STOPPING = "; stopping the child"


def stopping(why: str) -> Notice:
    """The supervisor's notice that it stops the child, and why."""
    return notice("error", f"{why}{STOPPING}")


def stalled(since: float, seconds: float) -> Notice:
    """The stall watchdog's notice: no event since ``since`` (epoch seconds) and no tool
    call in flight for ``seconds``."""
    return {
        "type": "notice",
        "level": "warn",
        "message": f"stalled: no event for {seconds:.0f} s and no tool call in flight",
        "stalled": True,
        "since": round(since, 3),
    }


def error(message: str, fatal: bool) -> ErrorEvent:
    return {"type": "error", "message": message, "fatal": fatal}


def run_finished(
    status: RunStatus, exit_code: int | None, signal: str | None, duration_ms: int
) -> RunFinished:
    return {
        "type": "run_finished",
        "status": status,
        "exitCode": exit_code,
        "signal": signal,
        "durationMs": duration_ms,
    }


# A sent message's text as its events keep it (the child gets it whole).
MESSAGE_TEXT_LIMIT: Final = TOOL_RESULT_TEXT_LIMIT


def user_message(
    message_id: str, mode: MessageMode, text: str, receipt: ReceiptWord, reason: str | None = None
) -> UserMessage:
    event: UserMessage = {
        "type": "user_message",
        "id": message_id,
        "mode": mode,
        "text": text[:MESSAGE_TEXT_LIMIT],
        "receipt": receipt,
    }
    if reason:
        event["reason"] = reason
    return event


def limit(
    kind: LimitKind, bound: float, used: float, action: LimitAction, scope: LimitScope
) -> LimitEvent:
    return {
        "type": "limit",
        "kind": kind,
        "limit": bound,
        "used": used,
        "action": action,
        "scope": scope,
    }


def approval(
    item: str,
    tool: str,
    summary: str,
    choice: ApprovalChoice | None = None,
    by: str | None = None,
    reason: str | None = None,
    waits_for: Literal["person", "parent"] | None = None,
    kind: ItemKind = "approval",
) -> ApprovalEvent:
    """A request to act (no ``choice``), or its decision; ``kind``: a question's."""
    event: ApprovalEvent = {
        "type": "approval",
        "item": item,
        "state": "requested" if choice is None else "decided",
        "tool": tool,
        "summary": summary,
    }
    if choice is not None:
        event["choice"] = choice
    if by is not None:
        event["by"] = by
    if reason:
        event["reason"] = reason
    if waits_for is not None:
        event["waitsFor"] = waits_for
    if kind != "approval":
        event["kind"] = kind
    return event
