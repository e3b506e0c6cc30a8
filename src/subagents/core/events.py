"""Canonical events and stop reasons shared by every backend.

Events are plain dicts (cheap to build, ready for JSON). Every event carries
``seq``, ``ts`` and ``type``; the supervisor stamps ``seq`` and ``ts``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: it slows the supervisor's start

if TYPE_CHECKING:
    from typing import Any, Final, TypeAlias

    Event: TypeAlias = dict[str, Any]

# Canonical stop reasons.
STOP: Final = "stop"
LENGTH: Final = "length"
TOOL_USE: Final = "toolUse"
ABORTED: Final = "aborted"
ERROR: Final = "error"

TERMINAL_SUCCESS: Final = frozenset({STOP, LENGTH})
TERMINAL_FAILURE: Final = frozenset({ABORTED, ERROR})
TERMINAL: Final = TERMINAL_SUCCESS | TERMINAL_FAILURE

_RAW_TO_CANONICAL: Final[dict[str, str]] = {
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


def empty_usage() -> dict[str, Any]:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": None,
    }


def add_usage(total: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """Sum ``part`` into ``total`` in place; cost stays None until someone reports one."""
    for key in TOKEN_KEYS:
        total[key] = int(total.get(key) or 0) + int(part.get(key) or 0)
    cost = part.get("cost")
    if cost is not None:
        total["cost"] = (total.get("cost") or 0.0) + float(cost)
    return total


# Constructors: one per event type, so every producer spells the fields the same way.


def run_started(backend: str, agent: str | None, model: str | None, cwd: str, pid: int) -> Event:
    return {
        "type": "run_started",
        "backend": backend,
        "agent": agent,
        "model": model,
        "cwd": cwd,
        "pid": pid,
    }


def assistant_text(
    text: str,
    stop_reason: str | None,
    raw_stop_reason: str | None,
    model: str | None,
    usage: dict[str, Any] | None = None,
) -> Event:
    ev: Event = {
        "type": "assistant_text",
        "text": text,
        "stopReason": stop_reason,
        "rawStopReason": raw_stop_reason,
        "model": model,
    }
    if usage is not None:
        ev["usage"] = usage
    return ev


def thinking(text: str) -> Event:
    return {"type": "thinking", "text": text}


def tool_call(tool_call_id: str, tool_name: str, args: Any) -> Event:
    return {"type": "tool_call", "toolCallId": tool_call_id, "toolName": tool_name, "args": args}


TOOL_RESULT_TEXT_LIMIT: Final = 4000


def tool_result(tool_call_id: str, tool_name: str, is_error: bool, text: str) -> Event:
    truncated = len(text) > TOOL_RESULT_TEXT_LIMIT
    return {
        "type": "tool_result",
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "isError": bool(is_error),
        "text": text[:TOOL_RESULT_TEXT_LIMIT] if truncated else text,
        "truncated": truncated,
    }


def usage(totals: dict[str, Any]) -> Event:
    return {"type": "usage", **totals}


def notice(level: str, message: str) -> Event:
    return {"type": "notice", "level": level, "message": message}


def stalled(since: float, seconds: float) -> Event:
    """The stall watchdog's notice: no event since ``since`` (epoch seconds) and no tool
    call in flight for ``seconds``."""
    return {
        "type": "notice",
        "level": "warn",
        "message": f"stalled: no event for {seconds:.0f} s and no tool call in flight",
        "stalled": True,
        "since": round(since, 3),
    }


def error(message: str, fatal: bool) -> Event:
    return {"type": "error", "message": message, "fatal": fatal}


def run_finished(status: str, exit_code: int | None, signal: str | None, duration_ms: int) -> Event:
    return {
        "type": "run_finished",
        "status": status,
        "exitCode": exit_code,
        "signal": signal,
        "durationMs": duration_ms,
    }
