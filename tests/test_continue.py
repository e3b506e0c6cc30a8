"""Continuing a run with the real pi, claude and codex CLIs against the mock model: the
resumed child's request really carries the earlier conversation (the mock sees it).

Gemini and opencode take no input while they run: their follow-up is a continuation in a
new process, through the same backend resume as ``continue`` (``Backend.resume_point``, the
session flags of ``build_argv``), and test_live checks it there with their real CLIs."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.cli import cli, invoke
from support.fake import Fake, fake_env
from support.git import git_repo

import subagents
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script

pytestmark = pytest.mark.e2e

FIRST = "list files MARKER-FIRST-TASK"
FOLLOW_UP = "now count them MARKER-FOLLOW-UP"
ANSWER = "Listed: a.txt, b.py."

CONFIGS: dict[str, tuple[str, Callable[[Path, str], dict[str, str]]]] = {
    "pi": ("mock/mock-model", lambda d, url: mm.write_pi_config(d, url)),
    "claude": (mm.CLAUDE_MODEL, lambda d, url: mm.write_claude_config(d, url, max_retries=0)),
    "codex": (mm.CODEX_MODEL, lambda d, url: mm.write_codex_config(d, url)),
}


def params() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                shutil.which(name) is None, reason=f"the {name} CLI is not installed"
            ),
        )
        for name in CONFIGS
    ]


def work_dir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    return work


@pytest.mark.parametrize("name", params())
def test_continue_resumes_the_childs_own_conversation(tmp_path: Path, name: str) -> None:
    work = work_dir(tmp_path)
    model, writer = CONFIGS[name]
    with MockModelServer(Script(final_text="Listed: {tool_output}.")) as srv:
        env = writer(tmp_path / f"{name}-config", srv.url)
        first = subagents.run(FIRST, backend=name, model=model, cwd=work, env=env)
        stderr = Path(first["paths"]["stderr"]).read_text()[-2000:]
        assert first["status"] == "completed", (first["errorMessage"], stderr)
        assert first["finalText"] == ANSWER
        seen_before = len(srv.requests)
        second = subagents.continue_run(first["runId"][:14], FOLLOW_UP)
        resumed = [json.dumps(body) for body in srv.requests[seen_before:]]
    stderr = Path(second["paths"]["stderr"]).read_text()[-2000:]
    assert second["status"] == "completed", (second["errorMessage"], stderr)
    assert second["continuedFrom"] == first["runId"] and second["runId"] != first["runId"]
    assert second["backend"] == name and second["cwd"] == first["cwd"]
    # The model saw, in one request of the continued run: the first task, the first
    # answer, and the follow-up -- the child resumed its own conversation.
    assert any(FIRST in body and ANSWER in body and FOLLOW_UP in body for body in resumed), resumed[
        :1
    ]


@pytest.mark.skipif(shutil.which("pi") is None, reason="the pi CLI is not installed")
def test_continue_from_the_cli_and_show_lists_the_chain(tmp_path: Path) -> None:
    work = work_dir(tmp_path)
    with MockModelServer(Script(final_text="Listed: {tool_output}.")) as srv:
        env = mm.write_pi_config(tmp_path / "pi", srv.url)
        p = invoke(
            ["run", "--json", "-q", "-b", "pi", "-m", "mock/mock-model", "--cwd", str(work), FIRST],
            env,
            bound=120,
        )
        assert p.returncode == 0, p.stderr
        r1 = json.loads(p.stdout)
        p = invoke(["continue", "--json", "-q", r1["runId"], "second"], env, bound=120)
        assert p.returncode == 0, p.stderr
        r2 = json.loads(p.stdout)
        p = cli(["continue", "--bg", "--json", r2["runId"], FOLLOW_UP], env)
        assert p.returncode == 0, p.stderr
        job_id = json.loads(p.stdout)["jobId"]
        waited = invoke(["wait", "--json", "--timeout", "120", job_id])
        assert waited.returncode == 0, waited.stderr
        r3 = json.loads(waited.stdout)["runs"][0]
        # pi's session forks from run to run: the third request holds all three turns.
        assert any(FIRST in json.dumps(b) and FOLLOW_UP in json.dumps(b) for b in srv.requests)
    assert (r2["continuedFrom"], r3["continuedFrom"]) == (r1["runId"], r2["runId"])
    shown = invoke(["show", job_id]).stdout
    assert f"continues: {r1['runId']} → {r2['runId']} → {r3['runId']}" in shown


def test_a_run_that_left_no_session_cannot_be_continued(fake: Fake) -> None:
    # The fake speaks pi's stream to a gemini run: no gemini session id, nothing to resume.
    env = {**fake_env(fake, pi.answer("x")), "SUBAGENTS_GEMINI_BIN": str(fake.launcher)}
    p = invoke(["run", "--json", "-b", "gemini", "x"], env)
    run_id = json.loads(p.stdout)["runId"]
    cont = invoke(["continue", run_id, "more"], env)
    assert cont.returncode == 2
    assert cont.stderr.strip() == f"subagents: run {run_id} left no gemini session to continue"


def test_continue_checks_its_input(fake: Fake) -> None:
    assert invoke(["continue", "zzzz", "more"]).returncode == 2
    assert "no job or run with id" in invoke(["continue", "0000", "more"]).stderr
    p = invoke(["run", "--json", "x"], fake_env(fake, pi.answer("x")))
    run_id = json.loads(p.stdout)["runId"]
    empty = invoke(["continue", run_id, "  "])
    assert empty.returncode == 2 and "empty" in empty.stderr


def test_an_isolated_run_continues_in_its_own_branch(fake: Fake, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    # The fake stands in for pi and keeps a session file where pi would.
    env = fake_env(
        fake, [{"session": True}, {"write": "one.txt", "text": "1\n"}, *pi.answer("one")]
    )
    p = invoke(["run", "--json", "--isolate", "worktree", "--cwd", str(repo), "first"], env)
    r1 = json.loads(p.stdout)
    env = fake_env(
        fake, [{"session": True}, {"write": "two.txt", "text": "2\n"}, *pi.answer("two")]
    )
    p = invoke(["continue", "--json", r1["runId"], "second"], env)
    assert p.returncode == 0, p.stderr
    r2 = json.loads(p.stdout)
    assert r2["worktree"]["branch"] == r1["worktree"]["branch"]
    assert r2["worktree"]["path"] == r1["worktree"]["path"]  # reopened where it was
    assert r2["worktree"]["base"] == r1["worktree"]["base"] and r2["worktree"]["filesChanged"] == 2
    log = subprocess.run(
        ["git", "log", "--format=%s", r2["worktree"]["branch"]],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert len(log) == 3 and log[-1] == "init"  # both runs' commits, on one branch
    # The continued child forked the earlier run's session.
    forked = json.loads(
        (Path(r2["paths"]["events"]).parent / "session" / "fake-session.jsonl").read_text()
    )
    assert forked["forkedFrom"] == str(
        Path(r1["paths"]["events"]).parent / "session" / "fake-session.jsonl"
    )
