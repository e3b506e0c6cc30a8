"""``subagents top`` driven in a real tmux pane (80x24, private tmux server): a background
job whose pi (the fake agent: top is the subject, not pi) runs ``sleep 300`` shows as a row
with its activity; Enter shows the run's transcript; ``s`` then ``y`` stops the job; ``q``
quits. Off a terminal, ``top`` prints what ``ps`` prints."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually
from support.cli import cli, invoke
from support.fake import Fake, fake_env

pytestmark = pytest.mark.process

SUBAGENTS = str(Path(sys.executable).parent / "subagents")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def start_job(fake: Fake, steps: list[dict[str, Any]], *args: str) -> str:
    """A background job (top looks at it while it runs) of the fake pi playing ``steps``."""
    proc = cli(["run", "--bg", "--json", *args, "wait a while"], fake_env(fake, steps))
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["jobId"])


class Top:
    """``subagents top`` in an 80x24 tmux session named ``top``; ``shows`` captures the pane
    into ``screen`` (kept for assertion messages) and says whether it holds every text."""

    def __init__(self, tmux: Callable[..., str], home: Path) -> None:
        self.tmux = tmux
        self.screen = ""
        tmux(
            "new-session", "-d", "-s", "top", "-x", "80", "-y", "24",
            "-e", f"SUBAGENTS_HOME={home}", "--", SUBAGENTS, "top",
        )  # fmt: skip

    def shows(self, *texts: str) -> bool:
        self.screen = self.tmux("capture-pane", "-p", "-t", "top")
        return all(t in self.screen for t in texts)


@needs_tmux
def test_top_shows_follows_and_stops_a_running_job(fake: Fake, tmux: Callable[..., str]) -> None:
    home = Path(os.environ["SUBAGENTS_HOME"])
    job_id = start_job(fake, [*pi.start(), *pi.tool_use(command="sleep 300"), {"sleep": 300}])
    job_file = home / "jobs" / job_id / "job.json"

    def sleeping() -> bool:  # the run's `sleep 300` has started
        run_ids = json.loads(job_file.read_text()).get("runIds") or []
        events = home / "runs" / str(run_ids[0]) / "events.jsonl" if run_ids else None
        return events is not None and events.exists() and "sleep 300" in events.read_text()

    assert eventually(sleeping, timeout=60)
    top = Top(tmux, home)

    # The job's row (id, agent, status) and, for the selected row, its activity.
    assert eventually(lambda: top.shows(job_id[:10], "running", "$ sleep 300"), 30), top.screen
    assert all(len(line) <= 80 for line in top.screen.splitlines())
    assert "1 jobs · 1 running" in top.screen, top.screen

    # Enter: the run's transcript, live.
    tmux("send-keys", "-t", "top", "Enter")
    assert eventually(
        lambda: top.shows("transcript · job", "## Started pi", "- $ sleep 300"), 30
    ), top.screen
    tmux("send-keys", "-t", "top", "Escape")
    assert eventually(lambda: top.shows("JOB", "ELAPSED"), 30), top.screen

    # s, then y: the job is stopped.
    tmux("send-keys", "-t", "top", "s")
    assert eventually(lambda: top.shows(f"Stop job {job_id}?"), 30), top.screen
    tmux("send-keys", "-t", "top", "y")

    def stopped() -> bool:
        return json.loads(job_file.read_text()).get("status") == "aborted"

    assert eventually(stopped, timeout=60), job_file.read_text()
    assert eventually(lambda: top.shows("aborted", "0 running"), 30), top.screen

    tmux("send-keys", "-t", "top", "q")
    assert eventually(lambda: "top" not in tmux("list-sessions", "-F", "#S").split(), 30)
    job = json.loads(job_file.read_text())
    (run,) = job["runs"]
    assert run["status"] == "aborted"


def test_top_off_a_terminal_prints_ps(fake: Fake) -> None:
    # (click's runner: stdout is no terminal; a job of the fake pi, since pi is not the point)
    proc = invoke(["top"])
    assert proc.returncode == 0
    assert "no jobs yet" in proc.stderr  # what ps says for an empty home
    done = invoke(["run", "--json", "x"], fake_env(fake, pi.answer("all done")))
    job_id = json.loads(done.stdout)["jobId"]
    out = invoke(["top"]).stdout
    assert "JOB" in out and job_id in out and "completed" in out


@needs_tmux
def test_top_says_a_quiet_run_is_stalled(fake: Fake, tmux: Callable[..., str]) -> None:
    """pi waits on its model with no tool call in flight (the fake, silent after its start),
    so the watchdog (--stall-timeout 1) writes its stall notice, and top says so as ps does."""
    home = Path(os.environ["SUBAGENTS_HOME"])
    job_id = start_job(fake, [*pi.start(), {"sleep": 300}], "--stall-timeout", "1")
    top = Top(tmux, home)

    def row_stalled() -> bool:  # STATUS in the job's row, activity where it is shown
        rows = [line for line in top.screen.splitlines() if job_id[:10] in line]
        return bool(rows) and " stalled " in rows[0]

    assert eventually(lambda: top.shows(job_id[:10], "stalled for ") and row_stalled(), 60), (
        top.screen
    )
    assert "stalled for " in invoke(["ps"]).stdout
    assert invoke(["stop", job_id]).returncode == 0
    assert eventually(lambda: top.shows("aborted", "0 running"), 30), top.screen
    tmux("send-keys", "-t", "top", "q")


def test_top_json_is_one_snapshot_of_the_view_per_job(fake: Fake, tmp_path: Path) -> None:
    env = fake_env(fake, pi.answer("Done."))
    p = invoke(
        ["run", "--json", "--parallel", "--session", "s1", "count files", "read me\nmore"], env
    )
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)
    invoke(["run", "--json", "--session", "other", "elsewhere"], env)
    shown = invoke(["top", "--json", "-s", "s1"])
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)["jobs"]  # this session's job only
    assert row["jobId"] == job["jobId"] and row["status"] == "completed"
    assert row["mode"] == "parallel" and row["startedAt"] == job["startedAt"]
    assert row["elapsed"] == job["durationMs"] / 1000
    assert row["tokens"] == job["usage"]["totalTokens"] and row["cost"] == job["usage"]["cost"]
    assert [r["task"] for r in row["runs"]] == ["count files", "read me"]  # first lines
    for run, result in zip(row["runs"], job["runs"], strict=True):
        assert run["runId"] == result["runId"] and run["status"] == "completed"
        assert run["agent"] is None and run["backend"] == "pi" and run["tools"] == 1
        assert run["transcript"] == result["paths"]["transcript"]
