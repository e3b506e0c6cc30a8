"""The failure body handed to the parent when a run did not complete.

:func:`render` turns a ``result.json``-shaped dict and the run's canonical events
into bounded Markdown: what went wrong, what the child was doing, what it cost,
what it had said so far, and where to look next. Standard library only: the
supervisor imports this module.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from subagents.core.events import TOKEN_KEYS, count
from subagents.present.figures import money
from subagents.present.humanize import humanize_tool_call, one_line

if TYPE_CHECKING:
    from subagents.types import Event, RunResult, ToolCall, Usage

__all__ = ["render"]

NORMAL_STOPS: Final = frozenset({"stop", "length"})
ERROR_LIMIT: Final = 3000
STDERR_LIMIT: Final = 2000
ACTIVITY_CALLS: Final = 20
ACTIVITY_LINE_LIMIT: Final = 256
PARTIAL_LIMIT: Final = 1500
NOTHING_CAPTURED: Final = (
    "Nothing was captured from the child: no output, no stderr, no error message."
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def fence(text: str) -> str:
    """A backtick fence longer than the longest backtick run in ``text`` (at least 3)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _fenced(text: str) -> str:
    marks = fence(text)
    return f"{marks}\n{text}\n{marks}"


def _inline_code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def _cut_line(text: str, suffix: str, limit: int) -> str:
    """``text + suffix`` in at most ``limit`` characters, cutting ``text`` with an ellipsis."""
    if len(text) + len(suffix) <= limit:
        return text + suffix
    room = max(0, limit - len(suffix) - 1)
    return text[:room] + "…" + suffix


# --------------------------------------------------------------------------- sections


def _error_section(result: RunResult, events: Sequence[Event]) -> str:
    message = result.get("errorMessage")
    text = message.strip() if isinstance(message, str) else ""
    if not text:  # fall back on what the stream said
        seen: list[str] = []
        for event in events:
            if event["type"] == "error":
                msg = str(event.get("message") or "").strip()
                if msg and msg not in seen:
                    seen.append(msg)
        text = "\n".join(seen[-3:])
    if not text:
        return ""
    if len(text) > ERROR_LIMIT:
        text = (
            text[:ERROR_LIMIT]
            + f"\n… [{len(text) - ERROR_LIMIT} more characters of the error message]"
        )
    return "## Error\n\n" + text


def _status_section(result: RunResult) -> str:
    parts: list[str] = []
    status = result.get("status")
    if status:
        parts.append(f"status={status}")
    stop = result.get("stopReason")
    if stop is not None and stop not in NORMAL_STOPS:
        parts.append(f"stop={stop}")
        raw = result.get("rawStopReason")
        if raw is not None and raw != stop:
            parts.append(f"rawStop={raw}")
    exit_code = result.get("exitCode")
    if exit_code is not None and exit_code != 0:
        parts.append(f"exit={exit_code}")
    signal = result.get("signal")
    if signal is not None:
        parts.append(f"signal={signal}")
    if result.get("forcedCleanup"):
        parts.append("forcedCleanup=true")
    if not parts:
        return ""
    return "## Status\n\n" + " ".join(parts)


def _stderr_section(stderr_tail: str) -> str:
    text = _ANSI.sub("", stderr_tail).rstrip()
    if not text.strip():
        return ""
    note = ""
    if len(text) > STDERR_LIMIT:
        note = f"Last {STDERR_LIMIT} of {len(text)} characters:\n\n"
        text = text[-STDERR_LIMIT:]
    return "## stderr (tail)\n\n" + note + _fenced(text)


def _activity_section(events: Sequence[Event], events_path: str | None) -> str:
    calls: list[ToolCall] = []
    outcomes: dict[str, bool] = {}
    for event in events:
        if event["type"] == "tool_call":
            calls.append(event)
        elif event["type"] == "tool_result":
            call_id = event.get("toolCallId")
            if isinstance(call_id, str):
                outcomes[call_id] = bool(event.get("isError"))
    if not calls:
        return ""
    shown = calls[-ACTIVITY_CALLS:]
    left_out = len(calls) - len(shown)
    noun = "call" if len(calls) == 1 else "calls"
    if left_out:
        where = f"; the older {left_out} in {events_path}" if events_path else ""
        header = f"## Activity ({len(calls)} tool {noun}, showing the last {len(shown)}{where})"
    else:
        header = f"## Activity ({len(calls)} tool {noun})"
    lines = [header, ""]
    for call in shown:
        text = one_line(humanize_tool_call(str(call.get("toolName") or "tool"), call.get("args")))
        call_id = call.get("toolCallId")
        if isinstance(call_id, str) and call_id in outcomes:
            suffix = " (failed)" if outcomes[call_id] else " (ok)"
        else:
            suffix = " (no result)"
        lines.append(_cut_line("- " + text, suffix, ACTIVITY_LINE_LIMIT))
    return "\n".join(lines)


def _usage_section(result: RunResult, events: Sequence[Event]) -> str:
    usage: Usage | None = result.get("usage")
    if not isinstance(usage, dict):
        usage = next((e for e in reversed(events) if e["type"] == "usage"), None)
    model = result.get("model")
    if not model:
        for event in reversed(events):
            if event["type"] in ("assistant_text", "run_started") and event.get("model"):
                model = str(event.get("model"))
                break
    tokens = {key: count(usage.get(key)) for key in TOKEN_KEYS} if usage else {}
    cost = usage.get("cost") if usage else None
    if not any(tokens.values()) and cost is None and not model:
        return ""
    lines = ["## Usage before failure", ""]
    if tokens:
        total = tokens["totalTokens"] or (
            tokens["input"] + tokens["output"] + tokens["cacheRead"] + tokens["cacheWrite"]
        )
        lines.append(
            f"- tokens: input {tokens['input']:,} · output {tokens['output']:,} · "
            f"cache read {tokens['cacheRead']:,} · cache write {tokens['cacheWrite']:,} "
            f"(total {total:,})"
        )
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        lines.append(f"- cost: {money(cost)}")
    else:
        lines.append("- cost not reported")
    lines.append(f"- model: {model}" if model else "- model not reported")
    return "\n".join(lines)


def _partial_text(result: RunResult, events: Sequence[Event]) -> str:
    final = result.get("finalText")
    if isinstance(final, str) and final.strip():
        return final.strip()
    for event in reversed(events):
        if event["type"] == "assistant_text":
            text = event.get("text")
            if isinstance(text, str) and text.strip():
                return text.strip()
    return ""


def _partial_section(text: str) -> str:
    if not text:
        return ""
    note = ""
    if len(text) > PARTIAL_LIMIT:
        dropped = len(text) - PARTIAL_LIMIT
        note = f"Last {PARTIAL_LIMIT} of {len(text)} characters ({dropped} earlier characters dropped):\n\n"
        text = text[-PARTIAL_LIMIT:]
    return "## Partial output\n\n" + note + _fenced(text)


def _postmortem_section(raw_path: str | None) -> str:
    if not raw_path or not os.path.isfile(raw_path):
        return ""
    return "## Post-mortem\n\nThe child's raw stream: " + _inline_code(
        f"jq . < {shlex.quote(raw_path)}"
    )


# --------------------------------------------------------------------------- render


def _truncation_suffix(dropped: int) -> str:
    return f"\n… [truncated: {dropped} characters dropped]"


def _open_fence(text: str) -> str | None:
    """The fence left open at the end of ``text`` (fences are whole lines of backticks)."""
    opened: str | None = None
    for line in text.split("\n"):
        if len(line) >= 3 and line.strip("`") == "":
            if opened is None:
                opened = line
            elif len(line) >= len(opened):
                opened = None
    return opened


def _cap(body: str, cap: int) -> str:
    """``body`` within ``cap`` characters; a cut one ends saying exactly how much was dropped.

    The suffix closes a code fence the cut left open, then states the number of
    characters of ``body`` that were dropped.
    """
    if len(body) <= cap:
        return body
    keep = max(0, cap - len(_truncation_suffix(len(body))))
    while True:
        kept = body[:keep]
        opened = _open_fence(kept)
        suffix = (f"\n{opened}" if opened else "") + _truncation_suffix(len(body) - keep)
        excess = len(kept) + len(suffix) - cap
        if excess <= 0 or keep == 0:
            return (kept + suffix)[:cap]  # [:cap] only bites when cap is below the suffix itself
        keep = max(0, keep - excess)


def _is_capturing_event(event: Event) -> bool:
    if event["type"] in ("tool_call", "tool_result", "error", "notice"):
        return True
    if event["type"] == "assistant_text" or event["type"] == "thinking":
        text = event.get("text")
        return isinstance(text, str) and bool(text.strip())
    return False


def render(
    result: RunResult,
    events: Sequence[Event],
    *,
    stderr_tail: str = "",
    raw_path: str | None = None,
    events_path: str | None = None,
    cap: int = 8000,
) -> str:
    """Markdown failure body: Error, Status, stderr (tail), Activity, Usage before failure,
    Partial output, Post-mortem, each omitted when empty; at most ``cap`` characters."""
    partial = _partial_text(result, events)
    error = _error_section(result, events)
    stderr = _stderr_section(stderr_tail)
    captured = bool(error or stderr or partial or any(_is_capturing_event(e) for e in events))
    sections: list[str] = []
    if not captured:
        sections.append(NOTHING_CAPTURED)
        sections.append(_status_section(result))
    else:
        sections += [
            error,
            _status_section(result),
            stderr,
            _activity_section(events, events_path),
            _usage_section(result, events),
            _partial_section(partial),
        ]
    sections.append(_postmortem_section(raw_path))
    body = "\n\n".join(section for section in sections if section) + "\n"
    return _cap(body, cap)
