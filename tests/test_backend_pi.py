"""pi backend: real captured streams of pi 0.73.1 and 0.87.1 replayed through a real
supervisor (the conformance kit), plus the 0.87 traps with hand-written lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.backends import get_backend
from subagents.testing.conformance import Case, check_backend

STREAMS = Path(__file__).parent / "fixtures" / "streams"
U15 = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15, "cost": 0}
U30 = {"input": 20, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 30, "cost": 0}
RUN = ("assistant_text", "tool_call", "tool_result", "usage")

CASES = {
    "pi": Case(STREAMS / "pi.jsonl", "completed", "All done.", "stop", 1, {"totalTokens": 264}),
    "pi.ls": Case(STREAMS / "pi.ls.jsonl", "completed", "DONE", "stop", 1, U30, event_types=RUN),
    "pi.text-only": Case(STREAMS / "pi.text-only.jsonl", "completed", "DONE", "stop", 0, U15),
    "pi087.text-only": Case(
        STREAMS / "pi087.text-only.jsonl", "completed", "DONE", "stop", 0, U15, "mock-model"
    ),
    "pi087.ls": Case(
        STREAMS / "pi087.ls.jsonl",
        "completed",
        "Found: a.txt, b.py",
        "stop",
        1,
        U30,
        "mock-model",
        event_types=RUN,
    ),
    "pi087.error500": Case(
        STREAMS / "pi087.error500.jsonl",
        "failed",
        stop_reason="error",
        tool_calls=0,
        error_contains="500 mock server error",
        event_types=("notice", "error"),
    ),
    "pi087.error500-noretry": Case(
        STREAMS / "pi087.error500-noretry.jsonl",
        "failed",
        stop_reason="error",
        error_contains="500 mock server error",
    ),
    "pi087.error500-recovers": Case(
        STREAMS / "pi087.error500-recovers.jsonl",
        "completed",
        "DONE",
        "stop",
        0,
        U15,
        event_types=("notice", "assistant_text"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pi_streams_conform(name: str, tmp_path: Path) -> None:
    assert check_backend("pi", [CASES[name]], tmp_path) == []


def _error_end() -> dict:
    body = '500: {"message":"mock server error","type":"server_error","code":null}'
    return {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "content": [],
            "stopReason": "error",
            "errorMessage": body,
        },
    }


def test_pi087_agent_end_will_retry_disarms_the_error() -> None:
    norm = get_backend("pi").normalizer()
    norm.feed(_error_end())
    assert norm.terminal and norm.failed
    assert norm.error_message == "500 mock server error"
    norm.feed({"type": "agent_end", "messages": [], "willRetry": True})
    assert not norm.terminal  # a retry follows: not the end, even before auto_retry_start


def test_pi087_agent_end_without_retry_keeps_the_error_terminal() -> None:
    norm = get_backend("pi").normalizer()
    norm.feed(_error_end())
    norm.feed({"type": "agent_end", "messages": [], "willRetry": False})
    norm.feed({"type": "agent_settled"})
    assert norm.terminal and norm.failed


def test_pi087_system_message_and_entries_are_ignored() -> None:
    norm = get_backend("pi").normalizer()
    assert norm.feed({"type": "message_end", "message": {"role": "system", "content": ""}}) == []
    assert norm.feed({"type": "entry_appended", "entry": {"type": "custom"}}) == []
