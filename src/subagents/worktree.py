"""A git worktree per run (``--isolate worktree``), through the git CLI (argv lists only).

A run's worktree is made from the current ``HEAD`` of the repository that holds its cwd, on a
new branch ``subagents/<run-id>``, at ``<run dir>/worktree``. When the run ends, ``finalize``
commits whatever the child changed there (new files too) on that branch, writes
``changes.patch`` and ``changes.stat`` into the run directory, and removes the worktree
directory (and the branch too when nothing changed). ``apply_changes`` brings a run's changes into
the user's working tree with a 3-way merge computed aside, so a conflict changes nothing.

The user's working tree and index are never touched, except by ``apply_changes``, which changes only
the working tree. Mutations of the repository's worktree list and refs hold a lock file in
the repository's git directory, so parallel runs on one repository never collide.

Standard library only: the supervisor imports it when an isolated run ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import subprocess
import tempfile
from pathlib import Path

from subagents.errors import WorktreeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from subagents.types import WorktreeRecord, WorktreeSpec

BRANCH_PREFIX = "subagents/"
WORKTREE_DIR = "worktree"
PATCH_FILE = "changes.patch"
STAT_FILE = "changes.stat"
LOCK_FILE = "subagents-worktree.lock"
# Who commits a run's changes when the repository names nobody.
FALLBACK_IDENTITY = ("-c", "user.name=subagents", "-c", "user.email=subagents@localhost")


def git(
    args: list[str],
    cwd: Path | str,
    *,
    check: bool = True,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    # Hooks and signing belong to the user's own commits, not to a run's bookkeeping.
    argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", *args]
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env={**os.environ, **(env or {}), "GIT_TERMINAL_PROMPT": "0"},
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=300,
        )
    except FileNotFoundError:
        raise WorktreeError("git is not installed (needed for --isolate worktree)") from None
    except subprocess.TimeoutExpired:
        raise WorktreeError(f"git {args[0]} did not finish in 300 s") from None
    if check and done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise WorktreeError(f"git {args[0]} failed: {why[-1] if why else done.returncode}")
    return done


def out(args: list[str], cwd: Path | str, **kw: Any) -> str:
    return git(args, cwd, **kw).stdout.decode("utf-8", "replace").strip()


def repo_root(cwd: Path) -> Path | None:
    """The top of the git working tree that holds ``cwd``, or None outside one."""
    try:
        done = git(["rev-parse", "--show-toplevel"], cwd, check=False)
    except WorktreeError:
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    return Path(text) if done.returncode == 0 and text else None


def repository_of(cwd: str | None, worktree: WorktreeSpec | None = None) -> str | None:
    """The repository a run worked on (as its ``meta.json`` or ``result.json`` says): an
    isolated run's own, else the top of the git working tree holding its cwd; None outside
    one."""
    # (read from a record on disk: checked as it is read)
    repo = worktree.get("repo") if isinstance(worktree, dict) else None
    if isinstance(repo, str):
        return repo
    return _root_of(cwd) if isinstance(cwd, str) and cwd else None


@functools.lru_cache(maxsize=1024)
def _root_of(cwd: str) -> str | None:
    """:func:`repo_root` remembered: views and reports ask it for every run they show."""
    if not os.path.isdir(cwd):
        return None
    root = repo_root(Path(cwd))
    return None if root is None else str(root)


@contextlib.contextmanager
def repo_lock(root: Path) -> Iterator[None]:
    """Serialize changes to one repository's worktree list and branches across processes."""
    common = Path(out(["rev-parse", "--git-common-dir"], root))
    if not common.is_absolute():
        common = root / common
    fd = os.open(common / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def branch_name(run_id: str) -> str:
    return BRANCH_PREFIX + run_id


def create(cwd: Path, run_id: str, run_dir: Path) -> WorktreeSpec:
    """A new worktree for a run on branch ``subagents/<run-id>`` from ``HEAD``.

    Returns the spec's worktree record: ``repo, path, branch, base, subdir`` (``subdir``: where
    ``cwd`` sits inside the repository, so the child starts at the same place in its copy)."""
    root = repo_root(cwd)
    if root is None:
        raise WorktreeError(f"--isolate worktree needs a git repository, and {cwd} is not in one")
    try:
        base = out(["rev-parse", "--verify", "HEAD^{commit}"], root)
    except WorktreeError:
        raise WorktreeError(
            f"--isolate worktree needs a commit to start from; {root} has none yet"
        ) from None
    subdir = os.path.relpath(cwd.resolve(), root.resolve())
    path = run_dir / WORKTREE_DIR
    branch = branch_name(run_id)
    with repo_lock(root):
        git(["worktree", "add", "--quiet", "-b", branch, str(path), base], root)
    return {"repo": str(root), "path": str(path), "branch": branch, "base": base, "subdir": subdir}


def reopen(record: WorktreeSpec) -> WorktreeSpec:
    """The worktree of an earlier run again, on its branch, at its path (a continued run
    works where the earlier one did; some CLIs find their sessions by directory)."""
    root, path, branch = Path(record["repo"]), Path(record["path"]), record["branch"]
    again: WorktreeSpec = {
        "repo": record["repo"],
        "path": record["path"],
        "branch": branch,
        "base": record["base"],
        "subdir": record.get("subdir", "."),
    }
    if path.is_dir():
        return again
    with repo_lock(root):
        git(["worktree", "prune"], root)
        has_branch = git(["rev-parse", "--verify", "--quiet", branch], root, check=False)
        if has_branch.returncode == 0:
            git(["worktree", "add", "--quiet", str(path), branch], root)
        else:  # nothing changed in the earlier run, so its branch went: start it again
            git(["worktree", "add", "--quiet", "-b", branch, str(path), record["base"]], root)
    return again


def child_cwd(record: WorktreeSpec) -> str:
    return str(Path(record["path"]) / record.get("subdir", "."))


_SHORTSTAT = re.compile(
    r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?"
)


def finalize(
    record: WorktreeSpec, run_dir: Path, *, message: str, keep: bool = False
) -> WorktreeRecord:
    """Commit what the run changed, write its patch and diffstat, tidy the worktree away.

    Returns ``result.json``'s ``worktree``: ``path, branch, base, commit, filesChanged,
    insertions, deletions, kept`` (``kept``: the branch remains)."""
    root, path, branch, base = (
        Path(record["repo"]),
        Path(record["path"]),
        record["branch"],
        record["base"],
    )
    if git(["status", "--porcelain", "--untracked-files=all"], path).stdout.strip():
        git(["add", "-A"], path)
        identity = () if out(["config", "user.email"], path, check=False) else FALLBACK_IDENTITY
        git([*identity, "commit", "--quiet", "--no-verify", "-m", message], path)
    commit = out(["rev-parse", "HEAD"], path)
    patch = git(["diff", "--binary", base, commit], path).stdout
    stat = git(["diff", "--stat", base, commit], path).stdout
    from subagents.core.files import open_private

    with open_private(run_dir / PATCH_FILE, "wb") as f:
        f.write(patch)
    with open_private(run_dir / STAT_FILE, "wb") as f:
        f.write(stat)
    m = _SHORTSTAT.search(out(["diff", "--shortstat", base, commit], path))
    files, ins, dels = (int(g or 0) for g in m.groups()) if m else (0, 0, 0)
    changed = commit != base
    with repo_lock(root):
        if not (keep and changed):
            git(["worktree", "remove", "--force", str(path)], root)
        if not changed:
            git(["branch", "-D", "--quiet", branch], root)
    return {
        "path": str(path),
        "branch": branch,
        "base": base,
        "commit": commit,
        "filesChanged": files,
        "insertions": ins,
        "deletions": dels,
        "kept": changed,
        "repo": str(root),
        "subdir": record.get("subdir", "."),
        "patch": str(run_dir / PATCH_FILE) if changed else None,
    }


def discard_worktree(worktree: WorktreeRecord) -> None:
    """Remove a run's worktree (if still there) and its branch (for ``rm``/``prune``)."""
    root = Path(worktree["repo"])
    with repo_lock(root):
        if Path(worktree["path"]).is_dir():
            git(["worktree", "remove", "--force", worktree["path"]], root, check=False)
        git(["worktree", "prune"], root, check=False)
        git(["branch", "-D", "--quiet", worktree["branch"]], root, check=False)


def apply_changes(worktree: WorktreeRecord, cwd: Path) -> list[str]:
    """Bring a run's changes into the working tree at ``cwd``: a 3-way merge of the run's
    branch (from its base) into the working tree as it is now, uncommitted changes and all.

    The merge is computed aside (a temporary index, ``git merge-tree``); only a clean result
    is written, and only to the working tree (the index is left as it was). Returns the
    files changed. Raises ``WorktreeError`` naming the conflicting files, having changed
    nothing, on conflict."""
    root = repo_root(cwd)
    if root is None:
        raise WorktreeError(f"{cwd} is not in a git repository")
    base, commit = worktree["base"], worktree["commit"]
    if commit == base:
        return []
    for rev in (base, commit):
        if git(["cat-file", "-e", f"{rev}^{{commit}}"], root, check=False).returncode != 0:
            raise WorktreeError(
                f"commit {rev[:12]} of this run is not in the repository at {root} "
                f"(apply {worktree.get('patch') or 'changes.patch'} with git apply instead)"
            )
    with tempfile.TemporaryDirectory(prefix="subagents-apply-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        # The working tree as it is now, as a tree object: the "ours" side.
        if git(["rev-parse", "--verify", "--quiet", "HEAD"], root, check=False).returncode == 0:
            git(["read-tree", "HEAD"], root, env=index)
        git(["add", "-A", "--", ":/"], root, env=index)
        ours_tree = out(["write-tree"], root, env=index)
        # A commit on the run's base, so the merge's base is exactly where the run began.
        ours = out(
            [*FALLBACK_IDENTITY, "commit-tree", ours_tree, "-p", base, "-m", "working tree"], root
        )
        merged = git(
            ["merge-tree", "--write-tree", "--name-only", "--no-messages", ours, commit],
            root,
            check=False,
        )
        lines = merged.stdout.decode("utf-8", "replace").splitlines()
        if merged.returncode == 1:
            names = sorted({n for n in lines[1:] if n})
            raise WorktreeError(
                f"the run's changes conflict with the working tree in {', '.join(names)}; nothing was changed"
            )
        if merged.returncode != 0 or not lines:
            why = merged.stderr.decode("utf-8", "replace").strip()
            raise WorktreeError(f"git merge-tree failed: {why or merged.returncode}")
        result_tree = lines[0]
        changed = out(["diff", "--name-only", ours_tree, result_tree], root).splitlines()
        patch = git(["diff", "--binary", ours_tree, result_tree], root).stdout
        if patch:
            # All or nothing: git apply checks every hunk before it writes any.
            git(["apply", "--whitespace=nowarn", "-"], root, input=patch)
    return changed
