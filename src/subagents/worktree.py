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
# The changes as recorded, written before the worktree is tidied (see finalize).
RECORD_FILE = "changes.json"
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
    from subagents.core.files import locked

    with locked(_common_dir(root) / LOCK_FILE):
        yield


def _common_dir(root: Path) -> Path:
    """The repository's git directory (shared by all its worktrees)."""
    common = Path(out(["rev-parse", "--git-common-dir"], root))
    return common if common.is_absolute() else root / common


def branch_name(run_id: str) -> str:
    return BRANCH_PREFIX + run_id


def _start_point(cwd: Path) -> tuple[Path, str]:
    """The repository holding ``cwd`` and its ``HEAD`` commit, where an isolated run starts.
    WorktreeError (one line) for a directory outside a repository or one with no commit."""
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


def _committed_subdir(root: Path, base: str, cwd: Path) -> str:
    """``cwd``'s place in the repository at ``root``, which commit ``base`` must hold (a
    worktree made here is made from it). WorktreeError (one line) when it does not."""
    subdir = os.path.relpath(cwd.resolve(), root.resolve())
    if subdir != "." and git(["cat-file", "-e", f"{base}:{subdir}"], root, check=False).returncode:
        raise WorktreeError(
            f"--isolate worktree starts from the last commit of {root}, which has no {subdir}/ "
            "(commit it first, or give a --cwd that is committed)"
        )
    return subdir


def isolation_problem(cwd: Path, *, travels: bool = False) -> str | None:
    """Why a run in ``cwd`` cannot be isolated in a worktree, or None (checked before
    anything is created). A repository that ``travels`` takes its uncommitted changes
    along (``ship``), so ``cwd`` need not be committed then."""
    try:
        root, base = _start_point(cwd)
        if not travels:
            _committed_subdir(root, base, cwd)
    except WorktreeError as exc:
        return str(exc)
    return None


def create(cwd: Path, run_id: str, run_dir: Path) -> WorktreeSpec:
    """A new worktree for a run on branch ``subagents/<run-id>`` from ``HEAD``.

    Returns the spec's worktree record: ``repo, path, branch, base, subdir`` (``subdir``: where
    ``cwd`` sits inside the repository, so the child starts at the same place in its copy).
    A failure (a full disk half-way) leaves neither the branch nor the worktree behind."""
    root, base = _start_point(cwd)
    subdir = _committed_subdir(root, base, cwd)
    path = run_dir / WORKTREE_DIR
    branch = branch_name(run_id)
    with repo_lock(root):
        try:
            git(["worktree", "add", "--quiet", "-b", branch, str(path), base], root)
        except WorktreeError as exc:
            _remove(root, str(path), branch)
            raise WorktreeError(f"{exc}{_space_note(run_dir)}") from None
    return {"repo": str(root), "path": str(path), "branch": branch, "base": base, "subdir": subdir}


def _remove(root: Path, path: str, branch: str | None) -> None:
    """A worktree and its branch gone, whatever is left of them (the repository lock held)."""
    if Path(path).is_dir():
        git(["worktree", "remove", "--force", path], root, check=False)
    git(["worktree", "prune"], root, check=False)
    if branch is not None:
        git(["branch", "-D", "--quiet", branch], root, check=False)


def _space_note(where: Path) -> str:
    """Why a git command may have failed there: its disk is full (git rarely says so)."""
    try:
        free = os.statvfs(where if where.exists() else where.parent)
    except OSError:
        return ""
    if free.f_bavail * free.f_frsize < 1024 * 1024:
        return f" (no space left on device: {where})"
    return ""


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


def in_use_by(record: Mapping[str, object]) -> str | None:
    """The run working in this worktree now (a continuation that has not ended), or None."""
    try:
        return _live_claim(_claim_file(Path(str(record["repo"])), str(record["branch"])))
    except (WorktreeError, KeyError, OSError):
        return None


def busy(record: Mapping[str, object], run_id: str) -> str:
    return (
        f"the worktree of branch {record['branch']} is in use by run {run_id}, which has not "
        f"ended: wait for it (subagents wait {run_id}), then continue that run"
    )


def reopen(record: WorktreeSpec | WorktreeRecord, run_id: str, run_dir: Path) -> WorktreeSpec:
    """The worktree of an earlier run again, on its branch, at its path (a continued run
    works where the earlier one did; some CLIs find their sessions by directory), claimed
    for run ``run_id`` (in ``run_dir``) until it ends (:func:`finalize` lets go).
    WorktreeError when another run works in it now, or its branch is gone although the
    earlier run kept one (removed: its work cannot be continued)."""
    root, path, branch = Path(record["repo"]), Path(record["path"]), record["branch"]
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
    return {
        "repo": record["repo"],
        "path": record["path"],
        "branch": branch,
        "base": record["base"],
        "subdir": record["subdir"],
    }


def release(record: Mapping[str, object], run_id: str) -> None:
    """Let go of the worktree's claim, if ``run_id`` holds it (its run has ended)."""
    import json

    try:
        claim = _claim_file(Path(str(record["repo"])), str(record["branch"]))
        if json.loads(claim.read_bytes()).get("run") == run_id:
            claim.unlink()
    except (OSError, ValueError, KeyError, AttributeError, WorktreeError):
        pass


def child_cwd(record: WorktreeSpec) -> str:
    return str(Path(record["path"]) / record["subdir"])


_SHORTSTAT = re.compile(
    r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?"
)


def finalize(
    record: WorktreeSpec, run_dir: Path, *, message: str, keep: bool = False
) -> WorktreeRecord:
    """Commit what the run changed, write its patch and diffstat, tidy the worktree away.

    Returns ``result.json``'s ``worktree``: ``path, branch, base, commit, filesChanged,
    insertions, deletions, kept`` (``kept``: the branch remains). What a commit cannot hold
    (changes inside a submodule, a repository the child made inside its copy) is listed in
    ``uncommitted``, and the worktree directory is kept so that nothing is lost. Commits the
    child made itself end up on the branch even where it left ``HEAD`` (detached).

    The record is written to the run's directory before the worktree is tidied away, so a
    finisher killed after that point leaves the next one (a reader that found it dead, under
    the run's lock) the record to finish with, rather than a worktree that no longer exists."""
    done = _recorded(record, run_dir)
    if done is None:
        done = _record_changes(record, run_dir, message)
        # (no room for it: the record still goes into result.json; only a finisher killed
        # in the next moments loses it)
        with contextlib.suppress(OSError):
            from subagents.core.files import write_json_atomic

            write_json_atomic(run_dir / RECORD_FILE, done)
    _tidy(record, run_dir.name, done, keep=keep)
    return done


def _recorded(record: WorktreeSpec, run_dir: Path) -> WorktreeRecord | None:
    """The record an earlier finisher of this run wrote before it tidied (None: none did)."""
    import json

    try:
        raw = json.loads((run_dir / RECORD_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    ok = isinstance(raw, dict) and isinstance(raw.get("commit"), str)
    done: WorktreeRecord | None = raw if ok and raw.get("branch") == record["branch"] else None
    return done


def _record_changes(record: WorktreeSpec, run_dir: Path, message: str) -> WorktreeRecord:
    """The run's changes committed on its branch, its patch and diffstat written."""
    root, path, branch, base = (
        Path(record["repo"]),
        Path(record["path"]),
        record["branch"],
        record["base"],
    )
    uncommitted = _beyond_a_commit(path)
    if git(["status", "--porcelain", "--untracked-files=all"], path).stdout.strip():
        git(["add", "-A", "--", ":/", *(f":(exclude,top){p}" for p in uncommitted)], path)
        if git(["diff", "--cached", "--quiet"], path, check=False).returncode:
            ident = () if out(["config", "user.email"], path, check=False) else FALLBACK_IDENTITY
            git([*ident, "commit", "--quiet", "--no-verify", "-m", message], path)
    commit = out(["rev-parse", "HEAD"], path)
    on = git(["symbolic-ref", "--quiet", "HEAD"], path, check=False).stdout.decode().strip()
    if on != f"refs/heads/{branch}":
        # The child left its branch (a detached HEAD, another branch): its work goes on ours.
        git(["update-ref", f"refs/heads/{branch}", commit], path)
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
    done: WorktreeRecord = {
        "path": str(path),
        "branch": branch,
        "base": base,
        "commit": commit,
        "filesChanged": files,
        "insertions": ins,
        "deletions": dels,
        "kept": changed or bool(uncommitted),
        "repo": str(root),
        "subdir": record["subdir"],
        "patch": str(run_dir / PATCH_FILE) if changed else None,
    }
    if uncommitted:
        done["uncommitted"] = uncommitted
    return done


def _tidy(record: WorktreeSpec, run_id: str, done: WorktreeRecord, *, keep: bool) -> None:
    """The worktree removed (unless kept, or holding what a commit cannot), the branch
    deleted when it holds nothing, the claim let go: whatever of that is still to do."""
    root, path, branch = Path(record["repo"]), record["path"], record["branch"]
    changed = done.get("commit") != record["base"]
    with repo_lock(root):
        if not (keep and changed) and not done.get("uncommitted"):
            if Path(path).is_dir():
                git(["worktree", "remove", "--force", path], root)
            git(["worktree", "prune"], root, check=False)
        if not done.get("kept"):
            git(["branch", "-D", "--quiet", branch], root, check=False)
        release(record, run_id)


def _beyond_a_commit(path: Path) -> list[str]:
    """What a commit of the worktree at ``path`` cannot hold: submodules with changes of
    their own (their files, their commits: kept in the worktree's own git directory, which
    goes with it), and git repositories the child made inside its copy."""
    status = git(["status", "--porcelain=v2", "-z", "--untracked-files=all"], path).stdout
    found = []
    for entry in status.split(b"\0"):
        fields = entry.split(b" ", 8)
        # "1 XY S<c><m><u> ..." (a changed entry; S: a submodule, then what changed in it)
        if fields[0] == b"1" and len(fields) == 9 and fields[2].startswith(b"S"):
            if fields[2] != b"S...":
                found.append(fields[8].decode("utf-8", "replace"))
        elif fields[0] == b"?" and entry.endswith(b"/"):  # an untracked repository
            found.append(entry[2:-1].decode("utf-8", "replace"))
    return found


def discard_worktree(worktree: Mapping[str, object], *, branch: bool = True) -> None:
    """Remove a run's worktree (if still there, and git's record of it either way) and,
    with ``branch``, its branch (for ``rm``/``prune``). WorktreeError when the repository
    is gone (moved or deleted)."""
    root = Path(str(worktree["repo"]))
    if not root.is_dir():
        raise WorktreeError(f"the repository {root} is gone (moved or deleted?)")
    with repo_lock(root):
        _remove(root, str(worktree["path"]), str(worktree["branch"]) if branch else None)


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
        # (a repository inside the working tree is none of the run's business, and one
        # without a commit would stop git add)
        nested = [f":(exclude,top){p}" for p in _nested_repositories(root)]
        git(["add", "-A", "--", ":/", *nested], root, env=index)
        ours_tree = out(["write-tree"], root, env=index)
        # A commit on the run's base, so the merge's base is exactly where the run began.
        ours = out(
            [*FALLBACK_IDENTITY, "commit-tree", ours_tree, "-p", base, "-m", "working tree"], root
        )
        merged = git(
            ["merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, commit],
            root,
            check=False,
        )
        lines = _names(merged.stdout)
        if merged.returncode == 1:
            names = sorted({n for n in lines[1:] if n})
            raise WorktreeError(
                f"the run's changes conflict with the working tree in {', '.join(names)}; nothing was changed"
            )
        if merged.returncode != 0 or not lines:
            why = merged.stderr.decode("utf-8", "replace").strip()
            raise WorktreeError(f"git merge-tree failed: {why or merged.returncode}")
        result_tree = lines[0]
        changed = _names(git(["diff", "-z", "--name-only", ours_tree, result_tree], root).stdout)
        patch = git(["diff", "--binary", ours_tree, result_tree], root).stdout
        if patch:
            # All or nothing: git apply checks every hunk before it writes any.
            git(["apply", "--whitespace=nowarn", "-"], root, input=patch)
    return changed


def _names(listing: bytes) -> list[str]:
    """Paths git listed with ``-z``, as they are (never C-quoted)."""
    return [n.decode("utf-8", "replace") for n in listing.split(b"\0") if n]


def _nested_repositories(root: Path) -> list[str]:
    """Untracked git repositories inside the working tree at ``root`` (paths from its top)."""
    listed = git(["ls-files", "--others", "--exclude-standard", "-z"], root).stdout
    return [n[:-1] for n in _names(listed) if n.endswith("/")]


# ---- a repository that travels (a Ray node without a shared filesystem) ---------------
#
# The caller sends the node its repository's history up to the run's base commit as one git
# pack (the objects a bundle carries; the node caches it per commit), plus the user's
# uncommitted changes as a patch. The node makes the run's worktree from them
# (``worktree_from``), the supervisor finalizes it there as for a local run, and the branch
# comes back the same way: a pack the caller stores in its repository (``unpack``).

ZERO_OID = "0" * 40


def ship(cwd: Path, run_id: str, run_dir: Path) -> WorktreeSpec:
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
    from subagents.core.files import locked

    with locked(path.parent / f".{path.name}.lock"):
        if not (path / "HEAD").exists():
            fresh = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
            git(["init", "--quiet", "--bare", str(fresh)], fresh)
            # Nothing is collected behind the back of the runs' worktrees.
            git(["config", "gc.auto", "0"], fresh)
            os.rename(fresh, path)
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
