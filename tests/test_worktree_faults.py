"""Issue 27, worktree isolation under faults: one finisher per run, one run at a time in a
worktree, nothing a run changed silently lost, cleanup that leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import CLI, cli, invoke, no_traceback
from support.fake import Fake, fake_env
from support.git import git, git_repo

from subagents import api

pytestmark = pytest.mark.process

# The fake stands in for pi and keeps a session file where pi would (so runs continue).
SESSION: list[dict[str, Any]] = [{"session": True}]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"app.py": "one\n", "src/lib.py": "x = 1\n"})


def run_isolated(fake: Fake, repo: Path, steps: list[dict[str, Any]]) -> dict[str, Any]:
    p = cli(
        ["run", "--json", "--isolate", "worktree", "--cwd", str(repo), "T"], fake_env(fake, steps)
    )
    assert p.returncode == 0, p.stderr
    result: dict[str, Any] = json.loads(p.stdout)
    return result


# ---- item 4: two readers that find a supervisor dead ------------------------------------


def test_racing_readers_of_a_dead_isolated_run_commit_its_changes_once(
    fake: Fake, repo: Path, isolated_state: Path
) -> None:
    for trial in range(4):
        pidfile = fake.dir / f"child{trial}.pid"
        steps = [
            *pi.start(),
            {"write": f"made{trial}.txt", "text": "work\n"},
            {"pidfile": str(pidfile)},
            {"sleep": 60},
        ]
        started = cli(
            ["run", "--bg", "--json", "--isolate", "worktree", "--cwd", str(repo), "T"],
            fake_env(fake, steps),
        )
        assert started.returncode == 0, started.stderr
        job_id = json.loads(started.stdout)["jobId"]
        assert eventually(pidfile.exists)
        job_dir = isolated_state / "jobs" / job_id
        state = json.loads((job_dir / "job.json").read_text())
        run_dir = isolated_state / "runs" / state["runIds"][0]
        # Nobody left to finish the run: its driver, then its supervisor, killed outright.
        driver = int(state["driver"]["pid"])
        os.kill(driver, signal.SIGKILL)
        assert eventually(lambda d=driver: not pid_alive(d), 10)  # type: ignore[misc]
        supervisor = json.loads((run_dir / "supervisor.json").read_text())["pid"]
        os.kill(supervisor, signal.SIGKILL)
        readers = [
            subprocess.Popen(
                [*CLI, "wait", "--json", job_id],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        outs = [r.communicate(timeout=120) for r in readers]
        for (out, err), reader in zip(outs, readers, strict=True):
            assert reader.returncode == 1 and "Traceback" not in err, err
            run = json.loads(out)["runs"][0]
            assert run["status"] == "failed" and "supervisor died" in run["errorMessage"]
            tree = run["worktree"]
            assert "error" not in tree, tree
            assert tree["commit"] != tree["base"] and tree["filesChanged"] == 1
        assert git(repo, "show", f"{tree['branch']}:made{trial}.txt") == "work\n"
        assert not pid_alive(int(pidfile.read_text()))
        applied = invoke(["apply", "--partial", run["runId"], "--cwd", str(repo)])
        assert applied.returncode == 0, applied.stderr
        assert (repo / f"made{trial}.txt").read_text() == "work\n"


# ---- item 2: concurrent continues of one isolated run -----------------------------------


def test_a_worktree_in_use_by_a_continuation_is_refused_to_another(
    fake: Fake, repo: Path, isolated_state: Path
) -> None:
    first = run_isolated(fake, repo, [*SESSION, {"write": "a.txt", "text": "a\n"}, *pi.answer("A")])
    gate = fake.dir / "gate"
    busy_steps = [
        *SESSION,
        *pi.start(),
        {"write": "b.txt", "text": "half"},
        {"wait_for": str(gate)},
        {"write": "b.txt", "text": "b, whole\n"},
        *pi.answer("B")[2:],
    ]
    env = fake_env(fake, busy_steps)
    started = cli(["continue", "--bg", "--json", first["runId"], "go on"], env)
    assert started.returncode == 0, started.stderr
    job_b = json.loads(started.stdout)["jobId"]
    state = isolated_state / "jobs" / job_b / "job.json"
    assert eventually(lambda: json.loads(state.read_text()).get("runIds"))
    run_b = json.loads(state.read_text())["runIds"][0]
    assert eventually((isolated_state / "runs" / run_b / "events.jsonl").exists)
    jobs_before = sorted(p.name for p in (isolated_state / "jobs").iterdir())
    second = invoke(["continue", "--json", first["runId"], "and another"], env)
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip() == (
        f"subagents: the worktree of branch subagents/{first['runId']} is in use by run "
        f"{run_b}, which has not ended: wait for it (subagents wait {run_b}), then continue "
        "that run"
    )
    assert sorted(p.name for p in (isolated_state / "jobs").iterdir()) == jobs_before
    gate.touch()
    waited = invoke(["wait", "--json", job_b])
    run = json.loads(waited.stdout)["runs"][0]
    assert run["status"] == "completed", run["errorMessage"]
    branch = run["worktree"]["branch"]
    assert git(repo, "show", f"{branch}:b.txt") == "b, whole\n"
    # Once it has ended, the branch is free to go on.
    third = cli(
        ["continue", "--json", run["runId"], "more"], fake_env(fake, [*SESSION, *pi.answer("C")])
    )
    assert third.returncode == 0, third.stderr


def test_continues_that_race_past_the_check_take_the_worktree_one_at_a_time(
    fake: Fake, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_isolated(fake, repo, [*SESSION, {"write": "a.txt", "text": "a\n"}, *pi.answer("A")])
    gate = fake.dir / "gate"
    steps = [
        *SESSION,
        *pi.start(),
        {"write": "made.txt", "text": "{task}\n"},
        {"wait_for": str(gate)},
    ]
    for k, v in fake_env(fake, [*steps, *pi.answer("done")[2:]]).items():
        monkeypatch.setenv(k, v)
    # Both pass the check before either has started its run.
    jobs = [api.prepare_continuation(first["runId"], name) for name in ("left", "right")]
    results: list[Any] = [None, None]

    def drive(i: int) -> None:
        results[i] = api.drive(jobs[i])

    threads = [threading.Thread(target=drive, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    refused = eventually(lambda: any(r is not None for r in results), 60)
    gate.touch()
    for t in threads:
        t.join(120)
    assert refused
    runs = [r["runs"][0] for r in results]
    done = [r for r in runs if r["status"] == "completed"]
    other = [r for r in runs if r["status"] != "completed"]
    assert len(done) == 1 and len(other) == 1, [r.get("errorMessage") for r in runs]
    assert "is in use by run" in other[0]["errorMessage"]
    name = done[0]["task"]
    branch = done[0]["worktree"]["branch"]
    # The branch holds the one run's work, whole (the other never started in it).
    assert git(repo, "show", f"{branch}:made.txt") == f"{name}\n"
    assert len(git(repo, "log", "--format=%s", branch).splitlines()) == 3


# ---- item 3 and what a commit cannot hold ----------------------------------------------


GIT_ID = ["-c", "user.name=child", "-c", "user.email=child@example.com"]


@pytest.fixture
def with_submodule(tmp_path: Path) -> Path:
    lib = git_repo(tmp_path / "lib", {"lib.txt": "lib\n"})
    top = git_repo(tmp_path / "top", {"app.py": "one\n"})
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(top, "commit", "-q", "-m", "lib as a submodule")
    return top


def test_edits_inside_a_submodule_are_kept_and_said(
    fake: Fake, with_submodule: Path, isolated_state: Path
) -> None:
    steps = [
        {"run": ["git", "-c", "protocol.file.allow=always", "submodule", "update", "--init"]},
        {"write": "lib/lib.txt", "text": "changed in the submodule\n"},
        {"write": "app.py", "text": "two\n"},
        *pi.answer("edited"),
    ]
    result = run_isolated(fake, with_submodule, steps)
    tree = result["worktree"]
    assert tree["uncommitted"] == ["lib"]
    assert tree["kept"] is True
    # The commit holds what it can; the submodule's edit is still there, in the worktree.
    assert git(with_submodule, "show", f"{tree['branch']}:app.py") == "two\n"
    assert (Path(tree["path"]) / "lib" / "lib.txt").read_text() == "changed in the submodule\n"
    show = invoke(["show", result["jobId"]])
    assert (
        f"lib: changes a commit cannot hold (a submodule's, a nested repository's), kept in {tree['path']}"
        in show.stdout
    )


def test_a_repository_the_child_made_is_kept_not_lost(fake: Fake, repo: Path) -> None:
    steps = [
        {"run": ["git", "init", "-q", "inner"]},
        {"write": "inner/notes.txt", "text": "the child's own repository\n"},
        {"write": "outer.txt", "text": "outer\n"},
        *pi.answer("made"),
    ]
    result = run_isolated(fake, repo, steps)
    tree = result["worktree"]
    assert "error" not in tree, tree
    assert tree["uncommitted"] == ["inner"]
    assert git(repo, "show", f"{tree['branch']}:outer.txt") == "outer\n"
    assert (Path(tree["path"]) / "inner" / "notes.txt").exists()


def test_commits_on_a_detached_head_end_up_on_the_runs_branch(fake: Fake, repo: Path) -> None:
    steps = [
        {"run": ["git", "checkout", "-q", "--detach"]},
        {"write": "detached.txt", "text": "work\n"},
        {"run": ["git", "add", "detached.txt"]},
        {"run": ["git", *GIT_ID, "commit", "-q", "-m", "the child's own commit"]},
        {"write": "after.txt", "text": "more\n"},
        *pi.answer("done"),
    ]
    result = run_isolated(fake, repo, steps)
    branch = result["worktree"]["branch"]
    assert git(repo, "show", f"{branch}:detached.txt") == "work\n"
    assert git(repo, "show", f"{branch}:after.txt") == "more\n"
    assert git(repo, "rev-parse", branch).strip() == result["worktree"]["commit"]


# ---- apply ---------------------------------------------------------------------------------


def test_apply_says_what_it_did_with_names_as_they_are(fake: Fake, repo: Path) -> None:
    name = "d ir/fi le é.txt"
    result = run_isolated(fake, repo, [{"write": name, "text": "x\n"}, *pi.answer("ok")])
    # An empty repository inside the working tree is none of apply's business.
    subprocess.run(["git", "init", "-q", str(repo / "scratch")], check=True)
    first = invoke(["apply", result["runId"], "--cwd", str(repo)])
    assert first.returncode == 0, first.stderr
    assert first.stderr.strip() == f"applied 1 file(s): {name}"
    assert (repo / name).read_text() == "x\n"
    again = invoke(["apply", result["runId"], "--cwd", str(repo)])
    assert again.returncode == 0, again.stderr
    assert (
        again.stderr.strip() == "nothing to apply: the working tree already has the run's changes"
    )


def test_apply_of_a_run_that_did_not_complete_needs_partial(fake: Fake, repo: Path) -> None:
    steps = [{"write": "half.txt", "text": "half\n"}, *pi.start(), {"exit": 3}]
    p = cli(
        ["run", "--json", "--isolate", "worktree", "--cwd", str(repo), "T"], fake_env(fake, steps)
    )
    result = json.loads(p.stdout)
    assert result["status"] == "failed"
    refused = invoke(["apply", result["runId"], "--cwd", str(repo)])
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"subagents: run {result['runId']} ended failed, so its changes may be half done; "
        "apply them anyway with --partial"
    )
    assert not (repo / "half.txt").exists()
    asked = invoke(["apply", "--partial", result["runId"], "--cwd", str(repo)])
    assert asked.returncode == 0, asked.stderr
    assert (repo / "half.txt").read_text() == "half\n"


# ---- item 10: bad input creates nothing ---------------------------------------------------


def test_isolation_that_cannot_be_is_refused_before_anything_exists(
    fake: Fake, tmp_path: Path, repo: Path, isolated_state: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    (repo / "untracked" / "deeper").mkdir(parents=True)
    env = fake_env(fake, pi.answer("never"))
    cases = {
        empty: f"--isolate worktree needs a commit to start from; {empty} has none yet",
        repo / "untracked" / "deeper": (
            f"--isolate worktree starts from the last commit of {repo}, which has no "
            "untracked/deeper/ (commit it first, or give a --cwd that is committed)"
        ),
    }
    for cwd, message in cases.items():
        for bg in ([], ["--bg"]):
            p = invoke(["run", *bg, "--isolate", "worktree", "--cwd", str(cwd), "T"], env)
            assert p.returncode == 2, p.stderr
            assert p.stderr.strip() == f"subagents: {message}"
    assert not (isolated_state / "jobs").exists() or not list((isolated_state / "jobs").iterdir())
    assert "subagents/" not in git(repo, "branch", "--list")


def test_git_in_a_directory_that_is_gone_says_so_not_that_git_is_missing(tmp_path: Path) -> None:
    # (what a run whose worktree was removed under it used to report: "git is not installed")
    from subagents import worktree
    from subagents.errors import WorktreeError

    with pytest.raises(WorktreeError) as caught:
        worktree.git(["status"], tmp_path / "gone")
    assert str(caught.value) == f"{tmp_path / 'gone'} no longer exists (moved or deleted?)"


# ---- items 6 and 9: removal leaves nothing behind, and takes nothing still in use -------


def test_rm_branches_of_a_chains_first_job_keeps_the_branch_its_continuation_uses(
    fake: Fake, repo: Path, isolated_state: Path
) -> None:
    first = run_isolated(fake, repo, [*SESSION, {"write": "a.txt", "text": "a\n"}, *pi.answer("A")])
    second = cli(
        ["continue", "--json", first["runId"], "more"],
        fake_env(fake, [*SESSION, {"write": "b.txt", "text": "b\n"}, *pi.answer("B")]),
    )
    assert second.returncode == 0, second.stderr
    later = json.loads(second.stdout)
    branch = first["worktree"]["branch"]
    removed = invoke(["rm", "--branches", first["jobId"]])
    no_traceback(removed)
    assert removed.returncode == 0, removed.stderr
    assert f"branch {branch} kept: run {later['runId']} (another job) works on it" in removed.stderr
    assert branch in git(repo, "branch", "--list")
    # The chain goes on where it was, not from the base commit.
    third = cli(
        ["continue", "--json", later["runId"], "again"],
        fake_env(fake, [*SESSION, {"write": "c.txt", "text": "c\n"}, *pi.answer("C")]),
    )
    assert third.returncode == 0, third.stderr
    assert git(repo, "show", f"{branch}:a.txt") == "a\n"
    assert git(repo, "show", f"{branch}:c.txt") == "c\n"


def test_a_continue_whose_branch_was_removed_is_refused_not_restarted(
    fake: Fake, repo: Path, isolated_state: Path
) -> None:
    first = run_isolated(fake, repo, [*SESSION, {"write": "a.txt", "text": "a\n"}, *pi.answer("A")])
    git(repo, "branch", "-D", first["worktree"]["branch"])
    p = cli(
        ["continue", "--json", first["runId"], "more"], fake_env(fake, [*SESSION, *pi.answer("B")])
    )
    no_traceback(p)
    assert p.returncode == 1, p.stderr
    run = json.loads(p.stdout)
    assert "no longer exists" in run["errorMessage"], run["errorMessage"]
    assert first["worktree"]["branch"] not in git(repo, "branch", "--list")


def test_rm_of_a_kept_worktree_leaves_no_stale_worktree_nor_branch(
    fake: Fake, repo: Path, tmp_path: Path, isolated_state: Path
) -> None:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text("keep_worktree = true\n")
    result = run_isolated(fake, repo, [{"write": "a.txt", "text": "a\n"}, *pi.answer("A")])
    assert Path(result["worktree"]["path"]).is_dir()
    removed = invoke(["rm", result["jobId"]])
    assert removed.returncode == 0, removed.stderr
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    branch = result["worktree"]["branch"]
    assert branch in git(repo, "branch", "--list")  # kept (plain rm), and deletable:
    git(repo, "branch", "-D", branch)


def test_rm_branches_after_the_repository_moved_says_so_and_removes_the_job(
    fake: Fake, repo: Path, tmp_path: Path, isolated_state: Path
) -> None:
    result = run_isolated(fake, repo, [{"write": "a.txt", "text": "a\n"}, *pi.answer("A")])
    repo.rename(tmp_path / "moved")
    removed = invoke(["rm", "--branches", result["jobId"]])
    no_traceback(removed)
    assert removed.returncode == 0, removed.stderr
    assert f"the repository {repo} is gone (moved or deleted?)" in removed.stderr
    assert list((isolated_state / "jobs").iterdir()) == []  # no .removing-<id> left


def test_a_full_disk_while_making_the_worktree_leaks_no_branch_and_says_why(
    fake: Fake, tmp_path: Path, small_disk: Path
) -> None:
    # The state directory fits a job and a run, not the checkout of the repository.
    big = git_repo(tmp_path / "big", {"small.txt": "s\n"})
    (big / "big.bin").write_bytes(os.urandom(2_500_000))
    git(big, "add", "big.bin")
    git(big, "commit", "-q", "-m", "big")
    home = small_disk / "home"
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(bytes(free.f_bavail * free.f_frsize - 1_000_000))
    env = {**fake_env(fake, pi.answer("never")), "SUBAGENTS_HOME": str(home)}
    p = cli(["run", "--json", "--isolate", "worktree", "--cwd", str(big), "T"], env)
    no_traceback(p)
    assert p.returncode != 0
    assert "no space left on device" in (p.stdout + p.stderr).lower(), (p.stdout, p.stderr)
    assert "subagents/" not in git(big, "branch", "--list")
    assert git(big, "worktree", "list", "--porcelain").count("worktree ") == 1


# ---- a finisher killed half-way: the next one takes over ---------------------------------


@pytest.mark.parametrize("changes", [True, False], ids=["changed", "unchanged"])
def test_a_finisher_killed_after_tidying_the_worktree_leaves_the_next_one_its_record(
    repo: Path, tmp_path: Path, changes: bool
) -> None:
    """The supervisor commits the run's changes, removes the worktree, and is killed before it
    publishes: the reader that finishes the run after it gets the same record (commit, patch,
    counts), not "no longer exists" (chaos: a supervisor SIGKILLed while it finished)."""
    from subagents.worktree import create as make_worktree
    from subagents.worktree import finalize

    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    record = make_worktree(repo, "r1", run_dir)
    if changes:
        (Path(record["path"]) / "made.txt").write_text("made\n")
    first = finalize(record, run_dir, message="m")
    assert not Path(record["path"]).exists()
    patch = (run_dir / "changes.patch").read_bytes()
    again = finalize(record, run_dir, message="m")
    assert again == first
    assert (run_dir / "changes.patch").read_bytes() == patch
    if changes:
        assert first["filesChanged"] == 1 and first["kept"]
        assert git(repo, "show", f"{record['branch']}:made.txt") == "made\n"
    else:
        assert first["commit"] == record["base"] and not first["kept"]
        assert git(repo, "branch", "--list", record["branch"]) == ""
