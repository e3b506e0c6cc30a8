"""One job result, whoever records the end (the driver, or whoever finds it dead), and one
way records write times."""

from __future__ import annotations

import time
from typing import Any

import pytest

from subagents.core.clock import epoch, iso
from subagents.jobs.outcome import job_result, job_status


def _run(status: str, text: str | None, cost: float | None = None) -> dict[str, Any]:
    usage = {"input": 10, "output": 5, "cacheRead": 1, "cacheWrite": 0, "totalTokens": 16}
    return {"status": status, "finalText": text, "usage": {**usage, "cost": cost}}


def test_the_job_result_has_one_shape() -> None:
    runs = [_run("completed", "a", 0.5), _run("completed", "b")]
    started = time.time() - 2
    result = job_result("j1", "chain", job_status(2, runs, False), runs, started)
    assert list(result) == [
        "jobId",
        "mode",
        "status",
        "startedAt",
        "completedAt",
        "durationMs",
        "usage",
        "runs",
        "finalText",
    ]
    assert result["status"] == "completed" and result["finalText"] == "b"
    assert result["usage"] == {
        "input": 20,
        "output": 10,
        "cacheRead": 2,
        "cacheWrite": 0,
        "totalTokens": 32,
        "cost": 0.5,
    }
    assert result["startedAt"] == iso(started) and result["durationMs"] >= 2000
    assert result["runs"] is runs


def test_a_recorded_end_says_why_and_keeps_the_recorded_start() -> None:
    runs = [_run("failed", "partial")]
    result = job_result(
        "j2",
        "parallel",
        "aborted",
        runs,
        time.time(),
        started_at="2026-01-05T14:30:00.000Z",
        error="stopped; its driver was gone",
    )
    assert list(result)[:5] == ["jobId", "mode", "status", "errorMessage", "startedAt"]
    assert result["startedAt"] == "2026-01-05T14:30:00.000Z"
    assert result["finalText"] is None  # parallel: read the runs
    assert result["usage"]["cost"] is None  # nobody reported one: never a guess


@pytest.mark.parametrize(
    ("mode", "status", "expected"),
    [("single", "failed", "x"), ("chain", "failed", None), ("chain", "completed", "y")],
)
def test_final_text_by_mode(mode: str, status: str, expected: str | None) -> None:
    runs = [_run(status, "x"), _run(status, "y")] if mode == "chain" else [_run(status, "x")]
    assert job_result("j", mode, status, runs, time.time())["finalText"] == expected


def test_iso_times_are_utc_to_the_millisecond_and_read_back() -> None:
    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(1767623400.1234) == "2026-01-05T14:30:00.123Z"
    assert epoch(iso(1767623400.123)) == pytest.approx(1767623400.123)
    assert epoch("2026-01-05T14:30:00+02:00") == pytest.approx(1767616200.0)
    assert epoch(12) == 12.0
    assert epoch("not a time") is None and epoch(True) is None and epoch(None) is None
    assert abs(epoch(iso()) - time.time()) < 60  # type: ignore[operator]
