"""The public Python API, as the README shows it."""

from __future__ import annotations

import pistream as pi
import pytest
from conftest import Fake

import subagents


def test_run_returns_result_json(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    seen: list[str] = []
    result = subagents.run(
        "Summarize README.md",
        agent="scout",
        env=fake.env(pi.answer("A summary.")),
        on_event=lambda i, e: seen.append(e["type"]),
    )
    assert result["status"] == "completed" and result["finalText"] == "A summary."
    assert result["agent"] == "scout" and result["jobId"]
    assert "tool_call" in seen and seen[-1] == "run_finished"


def test_start_wait_and_stop(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = subagents.start(
        {"mode": "parallel", "tasks": [{"task": "a"}, {"task": "b"}]}, env=fake.env(pi.answer("ok"))
    )
    result = job.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    assert [r["finalText"] for r in result["runs"]] == ["ok", "ok"]
    slow = subagents.start("forever", env=fake.env([*pi.start(), {"sleep": 60}]))
    assert slow.wait(timeout=0.2) is None
    assert slow.stop()["status"] == "aborted"


def test_bad_request_is_one_exception(fake: Fake) -> None:
    with pytest.raises(subagents.BadRequest, match="unknown agent 'nobody'"):
        subagents.run("x", agent="nobody")
