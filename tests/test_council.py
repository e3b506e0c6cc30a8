"""A council that falls short (docs/structured.md): fewer members answered than its quorum
(the judge never starts; the job says why), and a judge that fails (the members' answers are
kept). Real supervisors and processes: the fake agent plays pi's members, and a stand-in
binary that exits at once plays a member or judge that fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import pistream as pi
from support.fake import Fake

import subagents

pytestmark = pytest.mark.process


def failing_bin(directory: Path, name: str, marker: Path) -> Path:
    """A CLI that fails at once, leaving ``marker`` behind as proof it was started."""
    path = directory / name
    path.write_text(f"#!/bin/sh\ntouch '{marker}'\necho 'no model here' >&2\nexit 3\n")
    path.chmod(0o755)
    return path


def test_too_few_answers_for_the_quorum_fail_the_council_and_the_judge_never_starts(
    fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = tmp_path / "started"
    started.mkdir()
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    monkeypatch.setenv("SUBAGENTS_CLAUDE_BIN", str(failing_bin(tmp_path, "c", started / "c")))
    monkeypatch.setenv("SUBAGENTS_CODEX_BIN", str(failing_bin(tmp_path, "x", started / "x")))
    monkeypatch.setenv("SUBAGENTS_GEMINI_BIN", str(failing_bin(tmp_path, "g", started / "g")))
    spec = {
        "mode": "council",
        "steps": [{"task": "review it", "backend": b} for b in ("pi", "claude", "codex")],
        "judge": "gemini",
        "quorum": 2,
    }
    job = subagents.run(spec, env=fake.env(pi.answer("looks fine")))

    assert job["mode"] == "council" and job["status"] == "failed"
    assert job.get("errorMessage") == (
        "1 of 3 members answered, fewer than the quorum of 2: the judge did not start"
    )
    assert not (started / "g").exists()  # the judge's CLI was never run
    assert (started / "c").exists() and (started / "x").exists()
    assert [r["backend"] for r in job["runs"]] == ["pi", "claude", "codex"]
    council = job["council"]
    assert council["answered"] == 1 and council["quorum"] == 2
    assert [m["status"] for m in council["members"]] == ["completed", "failed", "failed"]
    assert council["members"][0]["answer"] == "looks fine"
    assert "verdict" not in council and "judgeRunId" not in council
    assert job["finalText"] is None


def test_a_judge_that_fails_keeps_the_members_answers_and_fails_the_council(
    fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    judge_bin = failing_bin(tmp_path, "judge", tmp_path / "judged")
    monkeypatch.setenv("SUBAGENTS_CLAUDE_BIN", str(judge_bin))
    spec = {
        "mode": "council",
        "steps": [{"task": "review it", "backend": "pi"}, {"task": "review it", "backend": "pi"}],
        "judge": "claude",
    }
    job = subagents.run(spec, env=fake.env(pi.answer("looks fine")))

    assert (tmp_path / "judged").exists()  # enough answered: the judge ran, and failed
    judge = job["runs"][2]
    assert judge["backend"] == "claude" and judge["status"] == "failed"
    # jobs/council.status: a council with a judge completes only with a verdict; else it
    # ends as its judge's run did.
    assert job["status"] == "failed"
    assert job.get("errorMessage", "").startswith("the judge gave no verdict: ")
    council = job["council"]
    assert council["answered"] == 2 and council["judgeRunId"] == judge["runId"]
    assert council["verdict"] is None and council["judgeError"]
    # the members' answers are kept, in the record and in the runs
    assert [m["answer"] for m in council["members"]] == ["looks fine", "looks fine"]
    assert [r["finalText"] for r in job["runs"][:2]] == ["looks fine", "looks fine"]
    assert [r["status"] for r in job["runs"][:2]] == ["completed", "completed"]
