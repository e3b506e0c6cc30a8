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
import functools
import os
import re
import subprocess
import tempfile
from pathlib import Path

from subagents.errors import WorktreeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
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
    except (FileNotFoundError, NotADirectoryError):
        if not os.path.isdir(cwd):  # (what Popen reports for a missing cwd too)
            raise WorktreeError(f"{cwd} no longer exists (moved or deleted?)") from None
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


def repository_of(run: Mapping[str, Any]) -> str | None:
    """The repository a run worked on (its ``meta.json`` or ``result.json``): an isolated
    run's own, else the top of the git working tree holding its cwd; None outside one."""
    worktree = run.get("worktree")
    if isinstance(worktree, dict) and isinstance(worktree.get("repo"), str):
        return str(worktree["repo"])
    cwd = run.get("cwd")
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
    from subagents.core.files import locked

    with locked(_common_dir(root) / LOCK_FILE):
        yield


def _common_dir(root: Path) -> Path:
    """The repository's git directory (shared by all its worktrees)."""
    common = Path(out(["rev-parse", "--git-common-dir"], root))
    return common if common.is_absolute() else root / common


def branch_name(run_id: str) -> str:
    return BRANCH_PREFIX + run_id


def create(cwd: Path, run_id: str, run_dir: Path) -> dict[str, Any]:
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


# A continued run's worktree is one run's at a time: its claim (in the repository's git
# directory, ``subagents-claims/<branch's run id>``) names the run working in it until that
# run has a result (or never got a run directory).
CLAIMS_DIR = "subagents-claims"


def _claim_file(root: Path, branch: str) -> Path:
    return _common_dir(root) / CLAIMS_DIR / branch.removeprefix(BRANCH_PREFIX)


def _live_claim(claim: Path) -> str | None:
    """The run id a claim names while that run may still work in the worktree."""
    import json

    try:
        data = json.loads(claim.read_bytes())
        run_id, run_dir = str(data["run"]), Path(data["runDir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not run_dir.is_dir() or (run_dir / "result.json").exists():
        return None
    return run_id


def in_use_by(record: Mapping[str, Any]) -> str | None:
    """The run working in this worktree now (a continuation that has not ended), or None."""
    try:
        return _live_claim(_claim_file(Path(record["repo"]), str(record["branch"])))
    except (WorktreeError, KeyError, OSError):
        return None


def busy(record: Mapping[str, Any], run_id: str) -> str:
    return (
        f"the worktree of branch {record['branch']} is in use by run {run_id}, which has not "
        f"ended: wait for it (subagents wait {run_id}), then continue that run"
    )


def reopen(record: dict[str, Any], run_id: str, run_dir: Path) -> dict[str, Any]:
    """The worktree of an earlier run again, on its branch, at its path (a continued run
    works where the earlier one did; some CLIs find their sessions by directory), claimed
    for run ``run_id`` (in ``run_dir``) until it ends (:func:`finalize` lets go).
    WorktreeError when another run works in it now, or its branch is gone although the
    earlier run kept one (removed: its work cannot be continued)."""
    root, path, branch = Path(record["repo"]), Path(record["path"]), record["branch"]
    keys = ("repo", "path", "branch", "base", "subdir")
    if not root.is_dir():
        raise WorktreeError(f"the repository {root} is gone (moved or deleted?)")
    with repo_lock(root):
        claim = _claim_file(root, branch)
        holder = _live_claim(claim)
        if holder is not None:
            raise WorktreeError(busy(record, holder))
        has_branch = git(["rev-parse", "--verify", "--quiet", branch], root, check=False)
        if has_branch.returncode != 0 and record.get("kept"):
            raise WorktreeError(
                f"branch {branch}, which holds the earlier run's changes, no longer exists"
                " (removed?); continuing would start again from the base commit"
            )
        if not path.is_dir():
            git(["worktree", "prune"], root)
            if has_branch.returncode == 0:
                git(["worktree", "add", "--quiet", str(path), branch], root)
            else:  # nothing changed in the earlier run, so its branch went: start it again
                git(["worktree", "add", "--quiet", "-b", branch, str(path), record["base"]], root)
        claim.parent.mkdir(mode=0o700, exist_ok=True)
        from subagents.core.files import write_json_atomic

        write_json_atomic(claim, {"run": run_id, "runDir": str(run_dir)})
    return {k: record[k] for k in keys if k in record}


def release(record: Mapping[str, Any], run_id: str) -> None:
    """Let go of the worktree's claim, if ``run_id`` holds it (its run has ended)."""
    import json

    try:
        claim = _claim_file(Path(record["repo"]), str(record["branch"]))
        if json.loads(claim.read_bytes()).get("run") == run_id:
            claim.unlink()
    except (OSError, ValueError, KeyError, AttributeError, WorktreeError):
        pass


def child_cwd(record: dict[str, Any]) -> str:
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
        release(record, run_dir.name)
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
