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
from subagents.mcp.results import compact_result
from subagents.present import outcome
from subagents.present.answer import markdown, parent_text

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


def test_a_judge_that_fails_keeps_the_members_answers_and_says_the_verdict_is_missing(
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
    # jobs/council.status: the members answered (the quorum is met), so the council
    # completed; its note says the verdict is missing.
    assert job["status"] == "completed"
    assert job.get("errorMessage", "").startswith("the judge gave no verdict: ")
    council = job["council"]
    assert council["answered"] == 2 and council["judgeRunId"] == judge["runId"]
    assert council["verdict"] is None and council["judgeError"]
    # the members' answers are kept, in the record and in the runs
    assert [m["answer"] for m in council["members"]] == ["looks fine", "looks fine"]
    assert [r["finalText"] for r in job["runs"][:2]] == ["looks fine", "looks fine"]
    assert [r["status"] for r in job["runs"][:2]] == ["completed", "completed"]

    # Every face leads with the members' answers and says the verdict is missing.
    line = outcome.status_line(job)
    assert line.startswith("✓ completed · council · ") and "no verdict: the judge failed" in line
    assert "2/2 answered; no verdict: " in outcome.job_line(job)
    text = markdown(job)
    assert text.startswith("No verdict: the judge gave no verdict: "), text
    assert text.index("**[A] pi") < text.index("looks fine") < text.index("```")
    parent = parent_text(job)
    assert not parent.is_error and parent.text.startswith("No verdict: "), parent
    assert "# A. pi" in parent.text and "# B. pi" in parent.text, parent.text
    view = compact_result(job)
    assert view["answer"] == ["looks fine", "looks fine"] and "error" not in view, view
    assert str(view["note"]).startswith("the judge gave no verdict: "), view


def test_without_a_judge_the_members_answers_lead(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    spec = {
        "mode": "council",
        "steps": [{"task": "review it", "backend": "pi"}, {"task": "review it", "backend": "pi"}],
    }
    job = subagents.run(spec, env=fake.env(pi.answer("looks fine")))

    assert job["status"] == "completed" and "errorMessage" not in job
    view = compact_result(job)
    assert view["answer"] == ["looks fine", "looks fine"], view  # not null
    assert '2/2 answered; A "looks fine"; B "looks fine"' in outcome.job_line(job)
    text = markdown(job)
    assert text.startswith("**[A] pi"), text
    assert "no verdict" not in outcome.status_line(job)
    assert parent_text(job).text.startswith("# A. pi"), parent_text(job).text
