"""A normalizer keeps state for the calls still running, not for every call of the run:
its memory must not grow with the length of the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.backends import get_backend

STREAMS = Path(__file__).parent / "fixtures" / "streams"
ID_KEYS = {"id", "tool_use_id", "toolCallId", "tool_id", "callID", "callId", "item_id"}


def _renamed(value: Any, suffix: str) -> Any:
    if isinstance(value, dict):
        return {
            k: f"{v}-{suffix}" if k in ID_KEYS and isinstance(v, str) else _renamed(v, suffix)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_renamed(v, suffix) for v in value]
    return value


@pytest.mark.parametrize(
    ("backend", "state", "stream"),
    [
        ("claude", "_tool_names", "claude.jsonl"),
        ("gemini", "_tool_names", "gemini.jsonl"),
        ("codex", "_started", "live/codex.app-server.ls.stdout.jsonl"),
    ],
)
def test_per_call_state_is_dropped_once_the_call_has_its_result(
    backend: str, state: str, stream: str
) -> None:
    lines = (STREAMS / stream).read_text().splitlines()
    objs = [json.loads(line) for line in lines if line.strip()]
    norm = get_backend(backend).normalizer()
    results = 0
    for rep in range(50):  # one long run: the recorded one 50 times over, new ids each time
        for obj in objs:
            results += sum(e["type"] == "tool_result" for e in norm.feed(_renamed(obj, str(rep))))
    assert norm.tool_calls >= 50 and results >= 50
    assert len(getattr(norm, state)) == 0
