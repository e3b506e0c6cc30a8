"""The conformance kit over the ACP backend: each real agent's captured stream (gemini,
qwen, Zed's claude adapter in ACP mode, against the mock model: tests/fixtures/streams/acp)
replayed through a real supervisor, as captured and with the child lingering after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.testing.conformance import Case, check_backend

pytestmark = pytest.mark.process

ACP = Path(__file__).parent / "fixtures" / "streams" / "acp"


@pytest.mark.parametrize(
    ("agent", "usage"),
    [
        ("gemini", {"input": 20, "output": 10, "cost": None}),
        ("qwen", {"totalTokens": 30, "cost": None}),
        ("claude", {"input": 20, "output": 10}),
    ],
)
def test_acp_agents_conform(tmp_path: Path, agent: str, usage: dict[str, float | None]) -> None:
    cases = [
        Case(
            ACP / f"{agent}.ls.jsonl",
            status="completed",
            final_text="Listed: a.txt.",
            stop_reason="stop",
            tool_calls=1,
            usage=usage,
            event_types=("tool_call", "tool_result", "usage", "assistant_text"),
        ),
        Case(
            ACP / f"{agent}.error400.jsonl",
            status="failed",
            error_contains="mock model is down",
            tool_calls=0,
            event_types=("error",),
        ),
    ]
    assert check_backend(f"acp:{agent}", cases, tmp_path) == []
