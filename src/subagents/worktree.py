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
import shutil
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


def create(cwd: Path, run_id: str, run_dir: Path) -> dict[str, Any]:
    """A new worktree for a run on branch ``subagents/<run-id>`` from ``HEAD``.

    Returns the spec's worktree record: ``repo, path, branch, base, subdir`` (``subdir``: where
    ``cwd`` sits inside the repository, so the child starts at the same place in its copy)."""
    root, base = _start_point(cwd)
    path = run_dir / WORKTREE_DIR
    branch = branch_name(run_id)
    with repo_lock(root):
        git(["worktree", "add", "--quiet", "-b", branch, str(path), base], root)
    return {
        "repo": str(root),
        "path": str(path),
        "branch": branch,
        "base": base,
        "subdir": os.path.relpath(cwd.resolve(), root.resolve()),
    }


def _start_point(cwd: Path) -> tuple[Path, str]:
    """The repository holding ``cwd`` and its ``HEAD`` commit, where an isolated run starts."""
    root = repo_root(cwd)
    if root is None:
        raise WorktreeError(f"--isolate worktree needs a git repository, and {cwd} is not in one")
    try:
        base = out(["rev-parse", "--verify", "HEAD^{commit}"], root)
    except WorktreeError:
        raise WorktreeError(
            f"--isolate worktree needs a commit to start from; {root} has none yet"
        ) from None
    return root, base


def reopen(record: dict[str, Any]) -> dict[str, Any]:
    """The worktree of an earlier run again, on its branch, at its path (a continued run
    works where the earlier one did; some CLIs find their sessions by directory)."""
    root, path, branch = Path(record["repo"]), Path(record["path"]), record["branch"]
    keys = ("repo", "path", "branch", "base", "subdir")
    if path.is_dir():
        return {k: record[k] for k in keys if k in record}
    with repo_lock(root):
        git(["worktree", "prune"], root)
        has_branch = git(["rev-parse", "--verify", "--quiet", branch], root, check=False)
        if has_branch.returncode == 0:
            git(["worktree", "add", "--quiet", str(path), branch], root)
        else:  # nothing changed in the earlier run, so its branch went: start it again
            git(["worktree", "add", "--quiet", "-b", branch, str(path), record["base"]], root)
    return {k: record[k] for k in keys if k in record}


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


# ---- a repository that travels (a Ray node without a shared filesystem) ---------------
#
# The caller sends the node its repository's history up to the run's base commit as one git
# pack (the objects a bundle carries; the node caches it per commit), plus the user's
# uncommitted changes as a patch. The node makes the run's worktree from them
# (``worktree_from``), the supervisor finalizes it there as for a local run, and the branch
# comes back the same way: a pack the caller stores in its repository (``unpack``).

ZERO_OID = "0" * 40


def ship(cwd: Path, run_id: str, run_dir: Path) -> dict[str, Any]:
    """The worktree record of a run whose repository travels to the machine that runs it:
    as ``create`` says, but nothing is made here (``shipped``: its launcher sends it)."""
    root, base = _start_point(cwd)
    return {
        "repo": str(root),
        "path": str(run_dir / WORKTREE_DIR),
        "branch": branch_name(run_id),
        "base": base,
        "subdir": os.path.relpath(cwd.resolve(), root.resolve()),
        "shipped": True,
    }


def uncommitted_patch(root: Path) -> bytes:
    """The working tree's changes from ``HEAD`` (staged or not, new files too, binary ones
    included) as one patch. Computed with a copy of the index: the user's is not touched."""
    git_dir = Path(out(["rev-parse", "--git-dir"], root))
    index = (git_dir if git_dir.is_absolute() else root / git_dir) / "index"
    with tempfile.TemporaryDirectory(prefix="subagents-ship-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            # A copy keeps the index's file stats: only what changed is hashed again.
            shutil.copyfile(index, env["GIT_INDEX_FILE"])
        except FileNotFoundError:
            git(["read-tree", "HEAD"], root, env=env)
        git(["add", "-A", "--", ":/"], root, env=env)
        return git(["diff", "--cached", "--binary", "HEAD"], root, env=env).stdout


def pack(root: Path, commit: str, exclude: str | None = None) -> bytes:
    """The objects of ``commit``'s history as one git pack; without those of ``exclude``'s
    history when given (the receiver has them)."""
    revs = commit + "\n" + (f"^{exclude}\n" if exclude else "")
    # No search for new deltas (--window=0): the deltas the repository's own packs hold are
    # reused, and what is loose goes whole; searching costs seconds on big files (5.4 s
    # against 1.1 s for 50 MiB of binaries) for nothing on a cluster's network.
    argv = ["pack-objects", "--revs", "--stdout", "-q", "--window=0"]
    return git(argv, root, input=revs.encode()).stdout


def unpack(repo: Path, data: bytes, ref: str, commit: str, *, new: bool = False) -> None:
    """Store a pack made by ``pack`` in ``repo`` and point ``ref`` at ``commit`` (``new``:
    only if ``ref`` does not exist yet)."""
    with repo_lock(repo):
        git(["index-pack", "--stdin"], repo, input=data)
        git(["update-ref", ref, commit, *([ZERO_OID] if new else [])], repo)


def has_commit(repo: Path, commit: str) -> bool:
    return git(["cat-file", "-e", f"{commit}^{{commit}}"], repo, check=False).returncode == 0


def cache_repository(path: Path) -> Path:
    """A bare repository at ``path`` that keeps what packs bring (made when missing, by
    one process at a time: the hosts of a machine's nodes share it)."""
    if (path / "HEAD").exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not (path / "HEAD").exists():
            fresh = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
            git(["init", "--quiet", "--bare", str(fresh)], fresh)
            # Nothing is collected behind the back of the runs' worktrees.
            git(["config", "gc.auto", "0"], fresh)
            os.rename(fresh, path)
    finally:
        os.close(fd)
    return path


def worktree_from(repo: Path, commit: str, path: Path, branch: str, patch: bytes | None) -> str:
    """A worktree of ``repo`` at ``path`` on a new ``branch`` from ``commit``, with ``patch``
    (the caller's uncommitted changes) applied and committed on it. Returns the commit the
    run starts from: the one holding the patch, else ``commit``."""
    with repo_lock(repo):  # only the worktree list and the branch: checked out after
        git(["worktree", "add", "--quiet", "--no-checkout", "-b", branch, str(path), commit], repo)
    git(["reset", "--quiet", "--hard"], path)
    if not patch:
        return commit
    git(["apply", "--whitespace=nowarn", "-"], path, input=patch)
    git(["add", "-A"], path)
    message = "the uncommitted changes of the tree this run was started from"
    git([*FALLBACK_IDENTITY, "commit", "--quiet", "--no-verify", "-m", message], path)
    return out(["rev-parse", "HEAD"], path)
