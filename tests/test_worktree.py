"""--isolate worktree and `subagents apply`, in real git repositories: runs side by side on
one repository, each in its own worktree and branch, with the user's tree left alone."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake, fake_env
from support.git import git, git_repo

from subagents import api

pytestmark = pytest.mark.process


def snapshot(repo: Path) -> dict[str, Any]:
    """Everything of the user's that a run must not touch: files, index, HEAD, branch."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    return {
        "files": files,
        "index": git(repo, "ls-files", "--stage"),
        "status": git(repo, "status", "--porcelain"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "branch", "--show-current"),
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = git_repo(
        tmp_path / "repo",
        {"app.py": "line 1\nline 2\nline 3\nline 4\nline 5\n", "src/lib.py": "x = 1\n"},
    )
    # The user's own work in progress: one staged change, one unstaged, one untracked file.
    (r / "src" / "lib.py").write_text("x = 2\n")
    git(r, "add", "src/lib.py")
    (r / "app.py").write_text("line 1 (mine)\nline 2\nline 3\nline 4\nline 5\n")
    (r / "notes.txt").write_text("my notes\n")
    return r


def edits(
    app_text: str = "line 1\nline 2\nline 3\nline 4\nline 5 ({task})\n",
) -> list[dict[str, Any]]:
    """A child that edits a tracked file, creates a new one in a new directory, and answers."""
    return [
        {"write": "app.py", "text": app_text},
        {"write": "new/made.txt", "text": "made by {task}\n"},
        *pi.answer("edited"),
    ]


def env_for(fake: Fake, steps: list[dict[str, Any]]) -> dict[str, str]:
    return fake_env(fake, steps)


def test_parallel_isolated_runs_never_collide(
    fake: Fake, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(repo)
    for k, v in env_for(fake, edits()).items():
        monkeypatch.setenv(k, v)
    tasks = [f"task{i}" for i in range(4)]
    job = api.prepare_job(
        {
            "mode": "parallel",
            "concurrency": 4,
            "tasks": [{"task": t, "isolate": "worktree"} for t in tasks],
        },
        cwd=repo,
    )
    result = api.drive(job)
    assert result["status"] == "completed", [r.get("errorMessage") for r in result["runs"]]
    branches = set()
    for task, run in zip(tasks, result["runs"], strict=True):
        wt = run["worktree"]
        assert wt["branch"] == f"subagents/{run['runId']}"
        assert wt["base"] == before["head"].strip() and wt["commit"] != wt["base"]
        assert (wt["filesChanged"], wt["insertions"], wt["deletions"]) == (2, 2, 1)
        assert wt["kept"] is True and not Path(wt["path"]).exists()  # branch kept, dir gone
        # Each branch holds its own run's edit, committed (the new file too).
        assert git(repo, "show", f"{wt['branch']}:app.py").endswith(f"line 5 ({task})\n")
        assert git(repo, "show", f"{wt['branch']}:new/made.txt") == f"made by {task}\n"
        run_dir = Path(run["paths"]["events"]).parent
        patch = (run_dir / "changes.patch").read_text()
        assert f"+line 5 ({task})" in patch and "new/made.txt" in patch
        assert "2 files changed" in (run_dir / "changes.stat").read_text()
        branches.add(wt["branch"])
    assert len(branches) == 4
    assert snapshot(repo) == before  # the user's tree, index, HEAD and branch untouched
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_run_that_changes_nothing_leaves_no_branch(fake: Fake, repo: Path) -> None:
    p = invoke(
        ["run", "--json", "--isolate", "worktree", "--cwd", str(repo / "src"), "look"],
        env_for(fake, pi.answer("nothing to do")),
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    wt = result["worktree"]
    assert result["cwd"] == str(Path(wt["path"]) / "src")  # the child started in its copy of src/
    assert wt["commit"] == wt["base"] and wt["filesChanged"] == 0 and wt["kept"] is False
    assert "subagents/" not in git(repo, "branch", "--list")
    assert not Path(wt["path"]).exists()


def test_apply_merges_into_the_users_uncommitted_work(fake: Fake, repo: Path) -> None:
    p = invoke(
        ["run", "--json", "--isolate", "worktree", "--cwd", str(repo), "T"], env_for(fake, edits())
    )
    assert p.returncode == 0, p.stderr
    run_id = json.loads(p.stdout)["runId"]
    index_before = git(repo, "ls-files", "--stage")
    applied = invoke(["apply", run_id[:12]], cwd=repo)
    assert applied.returncode == 0, applied.stderr
    assert "applied 2 file(s)" in applied.stderr
    # 3-way: the user's unstaged line 1 and the run's line 5 are both there.
    assert (repo / "app.py").read_text() == "line 1 (mine)\nline 2\nline 3\nline 4\nline 5 (T)\n"
    assert (repo / "new" / "made.txt").read_text() == "made by T\n"
    assert (repo / "notes.txt").read_text() == "my notes\n"
    assert git(repo, "ls-files", "--stage") == index_before  # the index is left as it was


def test_apply_conflict_changes_nothing(fake: Fake, repo: Path) -> None:
    # The run rewrites line 1, which the user changed too.
    steps = edits("line 1 (theirs)\nline 2\nline 3\nline 4\nline 5\n")
    p = invoke(
        ["run", "--json", "--isolate", "worktree", "--cwd", str(repo), "T"], env_for(fake, steps)
    )
    assert p.returncode == 0, p.stderr
    run_id = json.loads(p.stdout)["runId"]
    before = snapshot(repo)
    applied = invoke(["apply", run_id], cwd=repo)
    assert applied.returncode == 1
    assert (
        applied.stderr.count("\n") == 1
        and "conflict" in applied.stderr
        and "app.py" in applied.stderr
    )
    assert "nothing was changed" in applied.stderr
    assert snapshot(repo) == before  # not even the run's new file


def test_isolate_outside_a_repository_is_bad_input(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    p = invoke(
        ["run", "--isolate", "worktree", "--cwd", str(plain), "T"], env_for(fake, pi.answer("x"))
    )
    assert p.returncode == 2
    assert (
        p.stderr.strip().count("\n") == 0 and "not in" in p.stderr and "git repository" in p.stderr
    )
    assert not (isolated_state / "runs").exists() or not any((isolated_state / "runs").iterdir())


def test_apply_of_a_run_without_a_worktree_is_bad_input(fake: Fake, repo: Path) -> None:
    p = invoke(["run", "--json", "--cwd", str(repo), "T"], env_for(fake, pi.answer("x")))
    run_id = json.loads(p.stdout)["runId"]
    applied = invoke(["apply", run_id], cwd=repo)
    assert applied.returncode == 2 and "own worktree" in applied.stderr


def test_agent_frontmatter_isolation(fake: Fake, repo: Path, tmp_path: Path) -> None:
    agents = tmp_path / "config" / "agents"
    agents.mkdir(parents=True)
    (agents / "iso.md").write_text(
        "---\nname: iso\ndescription: isolated\nisolation: worktree\n---\nWork.\n"
    )
    p = invoke(["run", "--json", "--agent", "iso", "--cwd", str(repo), "T"], env_for(fake, edits()))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["worktree"]["filesChanged"] == 2
    assert os.path.isdir(repo)


def test_rm_keeps_a_runs_branch_unless_asked_to_remove_it(fake: Fake, repo: Path) -> None:
    branches = []
    for _ in range(2):
        p = invoke(
            ["run", "--json", "--isolate", "worktree", "--cwd", str(repo), "T"],
            env_for(fake, edits()),
        )
        assert p.returncode == 0, p.stderr
        result = json.loads(p.stdout)
        assert result["worktree"]["kept"] is True
        branches.append((result["jobId"], result["worktree"]["branch"]))
    (kept_job, kept_branch), (gone_job, gone_branch) = branches
    plain = invoke(["rm", kept_job])
    assert plain.returncode == 0, plain.stderr
    assert kept_branch in git(repo, "branch", "--list")  # the work is still there to apply
    asked = invoke(["rm", "--branches", gone_job])
    assert asked.returncode == 0, asked.stderr
    assert "1 branch(es)" in asked.stdout
    listed = git(repo, "branch", "--list")
    assert gone_branch not in listed and kept_branch in listed
