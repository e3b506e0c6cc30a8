"""The approvals inbox in Claude Code (docs/claude-code.md): the plugin's monitor says when
a run of the session starts waiting on a decision (the line wakes an idle session, as a
job's end does), and ``/subagents:jobs inbox | approve | deny | answer`` is done by the
prompt hook, without a model turn. The monitor runs as Claude Code runs it (the
``subagents`` command, until Claude Code is gone); the hook's wording and decisions go through
the command in this process with the hook's JSON on stdin (the console script as Claude Code
runs the hook: test_notices_cost); the Claude Code TUI itself is not driven here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.approvals import write_item
from support.sessionlog import CLAUDE_ID, claude_monitor, hook

from subagents.core import inbox
from subagents.core.paths import runs_dir
from subagents.jobs import JobStore

pytestmark = pytest.mark.process

SESSION = f"claude-{CLAUDE_ID}"


def waiting(home: Path, job_id: str | None, item_id: str, **extra: object) -> Path:
    """A running run of ``job_id`` with one item waiting in its inbox."""
    run_dir = runs_dir(home) / f"01m8aaaaaa-{item_id[-8:]}"
    run_dir.mkdir(parents=True)
    request = {"summary": "Bash: git push --force", "input": {"command": "git push --force"}}
    write_item(run_dir, item_id, jobId=job_id, **{**request, **extra})
    return run_dir


def said(home: Path, prompt: str) -> str:
    out = json.loads(hook(home, prompt, here=True).stdout)
    # Shown to the user as the reason the prompt is blocked: no model turn.
    assert out["decision"] == "block" and out["hookSpecificOutput"]["suppressOriginalPrompt"]
    return str(out["reason"])


def test_the_jobs_command_lists_and_decides_the_sessions_items(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    mine = store.create({"mode": "single", "session": SESSION}, agents=["claude"], background=True)
    theirs = store.create(
        {"mode": "single", "session": "claude-else"}, agents=["claude"], background=True
    )
    run_dir = waiting(isolated_state, mine, "01m8bbbbbb-bbbbbbbb")
    waiting(isolated_state, theirs, "01m8cccccc-cccccccc")
    question = {
        "question": "Which colour?",
        "header": "",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": ""}],
        "multiSelect": False,
    }
    asked = waiting(
        isolated_state,
        mine,
        "01m8dddddd-dddddddd",
        kind="question",
        summary="Which colour? (Red | Blue)",
        choices=["answer", "deny"],
        questions=[question],
    )

    listed = said(isolated_state, "/subagents:jobs inbox")
    assert listed.startswith("Waiting for a decision:\n"), listed
    assert "01m8bbbbbb-bbbbbbbb" in listed and "Bash: git push --force" in listed
    assert "Which colour?" in listed and "1. Red — warm" in listed
    assert "01m8cccccc" not in listed and "(1 more in other sessions" in listed

    approved = said(isolated_state, "/subagents:jobs approve 01m8bbbbbb")
    assert approved == "allowed: item 01m8bbbbbb-bbbbbbbb"
    decision = inbox.read_decision(run_dir, "01m8bbbbbb-bbbbbbbb")
    assert decision is not None and decision["choice"] == "allow" and decision["by"]
    again = said(isolated_state, "/subagents:jobs deny 01m8bbbbbb not now")
    assert again.startswith("item 01m8bbbbbb-bbbbbbbb was decided already: allowed by")
    # A question: an approval is refused in one line; its option by number answers it.
    refused = said(isolated_state, "/subagents:jobs approve 01m8dddddd")
    assert "is a question: answer it" in refused and "\n" not in refused
    assert said(isolated_state, "/subagents:jobs answer 01m8dddddd --choice 3").startswith(
        "no option '3'"
    )
    answered = said(isolated_state, "/subagents:jobs answer 01m8dddddd --choice 2")
    assert answered == "answered: item 01m8dddddd-dddddddd"
    answer = inbox.read_decision(asked, "01m8dddddd-dddddddd")
    assert answer is not None and answer["answers"] == ["Blue"]
    assert said(isolated_state, "/subagents:jobs deny").startswith("usage: /subagents:jobs inbox")
    assert said(isolated_state, "/subagents:jobs inbox").startswith(
        "Nothing of this session waits for a decision."
    )


def test_the_monitor_says_when_a_run_of_the_session_starts_waiting(
    isolated_state: Path,
) -> None:
    store = JobStore(isolated_state)
    job = store.create({"mode": "single", "session": SESSION}, agents=["claude"], background=True)
    other = store.create(
        {"mode": "single", "session": "claude-else"}, agents=["claude"], background=True
    )
    claude = subprocess.Popen(["sleep", "300"])  # stands in for Claude Code ($CLAUDE_PID)
    monitor = claude_monitor(claude.pid)
    try:
        assert monitor.stdout is not None
        waiting(isolated_state, other, "01m8cccccc-cccccccc")  # another session's: not said
        waiting(isolated_state, job, "01m8bbbbbb-bbbbbbbb")
        line = monitor.stdout.readline()
        assert line.startswith(f"⏸ subagents: job {job} (claude) asks to: Bash: git push"), line
        assert "/subagents:jobs approve|deny 01m8bbbbbb-bbbbbbbb" in line
        waiting(isolated_state, job, "01m8dddddd-dddddddd", policy="parent")
        line = monitor.stdout.readline()  # the first is not said again; the parent's is
        assert "decide it with subagent_decide (item 01m8dddddd-dddddddd)" in line, line
    finally:
        claude.kill()
        claude.wait()
    assert monitor.wait(timeout=30) == 0  # Claude Code is gone: so is the monitor
    assert "01m8cccccc" not in monitor.stdout.read()
