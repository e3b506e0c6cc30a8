"""A repository that travels (worktree.py's pack, unpack, uncommitted_patch,
cache_repository, worktree_from), end to end in real git repositories without Ray: the
caller's history and uncommitted changes reach a cache repository, a run's worktree is
made there and finalized as for a local run, and its branch comes back to the caller's
repository, where `apply` merges it. The user's working tree and index are never touched."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.git import git, git_repo

from subagents import worktree as wt
from subagents.errors import WorktreeError

pytestmark = pytest.mark.process


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = git_repo(tmp_path / "caller", {"app.py": "a = 1\n", "lib/util.py": "u = 1\n"})
    (r / "app.py").write_text("a = 2\n")  # unstaged
    (r / "lib" / "util.py").write_text("u = 2\n")
    git(r, "add", "lib/util.py")  # staged
    (r / "notes.txt").write_text("mine\n")  # untracked
    (r / "data.bin").write_bytes(bytes(range(256)))  # untracked, binary
    (r / ".gitignore").write_text("*.log\n")
    (r / "debug.log").write_text("ignored\n")
    return r


def user_state(r: Path) -> tuple[str, str, str]:
    return (
        git(r, "status", "--porcelain", "--untracked-files=all"),
        git(r, "ls-files", "--stage"),
        git(r, "rev-parse", "HEAD"),
    )


def test_a_run_travels_and_its_branch_comes_back(repo: Path, tmp_path: Path) -> None:
    before = user_state(repo)
    record = wt.ship(repo / "lib", "run1", tmp_path / "run1")
    assert record["shipped"] is True and record["subdir"] == "lib"
    assert not Path(record["path"]).exists()  # nothing is made on the caller's side
    commit = record["base"]
    patch = wt.uncommitted_patch(repo)
    assert user_state(repo) == before  # computed with a copy of the index
    assert b"notes.txt" in patch and b"data.bin" in patch and b"debug.log" not in patch
    # The node: a cache repository, the history sent once, a worktree with the patch.
    cache = wt.cache_repository(tmp_path / "node" / "repo.git")
    assert not wt.has_commit(cache, commit)
    wt.unpack(cache, wt.pack(repo, commit), f"refs/sent/{commit}", commit)
    assert wt.has_commit(cache, commit)
    node_tree = tmp_path / "node" / "run1" / "worktree"
    base = wt.worktree_from(cache, commit, node_tree, record["branch"], patch)
    assert base != commit  # the uncommitted changes are a commit of their own
    assert (node_tree / "app.py").read_text() == "a = 2\n"
    assert (node_tree / "notes.txt").read_text() == "mine\n"
    assert (node_tree / "data.bin").read_bytes() == bytes(range(256))
    assert not (node_tree / "debug.log").exists()
    # The run changes a file; the supervisor finalizes as for a local run.
    (node_tree / "lib" / "util.py").write_text("u = 3\n")
    node_record = {**record, "repo": str(cache), "path": str(node_tree), "base": base}
    done = wt.finalize(node_record, tmp_path / "node" / "run1", message="run1")
    assert (done["filesChanged"], done["kept"]) == (1, True)
    # Its branch comes back: only what the caller lacks (the changes' commit and the run's).
    back = wt.pack(cache, done["commit"], exclude=commit)
    assert len(back) < 2000
    wt.unpack(repo, back, f"refs/heads/{record['branch']}", done["commit"], new=True)
    assert git(repo, "rev-parse", record["branch"]).strip() == done["commit"]
    assert user_state(repo) == before
    with pytest.raises(WorktreeError, match="update-ref"):  # never overwrites a branch
        wt.unpack(repo, back, f"refs/heads/{record['branch']}", done["commit"], new=True)
    # `apply` merges the run's change into the tree as it is, the user's edits kept.
    local = {**done, "repo": str(repo), "path": record["path"]}
    assert wt.apply_changes(local, repo) == ["lib/util.py"]
    assert (repo / "lib" / "util.py").read_text() == "u = 3\n"
    assert (repo / "app.py").read_text() == "a = 2\n"
    # `rm --branches` removes it as for a local run.
    wt.discard_worktree(local)
    assert record["branch"] not in git(repo, "branch", "--list")


def test_a_clean_tree_travels_without_a_patch(tmp_path: Path) -> None:
    r = git_repo(tmp_path / "clean", {"a.txt": "a\n"})
    assert wt.uncommitted_patch(r) == b""
    commit = git(r, "rev-parse", "HEAD").strip()
    cache = wt.cache_repository(tmp_path / "repo.git")
    wt.unpack(cache, wt.pack(r, commit), f"refs/sent/{commit}", commit)
    assert wt.worktree_from(cache, commit, tmp_path / "w", "subagents/x", None) == commit


def test_the_cache_repository_is_made_once_by_racing_hosts(tmp_path: Path) -> None:
    path = tmp_path / "node" / "repo.git"
    errors: list[BaseException] = []

    def make() -> None:
        try:
            wt.cache_repository(path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert git(path, "config", "gc.auto").strip() == "0"
    assert sorted(p.name for p in path.parent.iterdir()) == [".repo.git.lock", "repo.git"]
