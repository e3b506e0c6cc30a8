"""Removing finished jobs: ``subagents rm`` and ``subagents prune``.

A job goes with its runs, its index row and any git worktree a run recorded. Removal is
atomic as the user sees it: the job directory is first renamed aside (one rename: the job is
there or gone, never half there), its runs are moved in with it, worktrees are removed, and
only then is the whole of it deleted. Anything a crash left set aside is finished by the
next removal. A job still running is never removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import paths
from subagents.core.clock import epoch
from subagents.core.files import read_json
from subagents.core.records import is_run_result, list_of, object_of
from subagents.errors import JobBusyError
from subagents.jobs.store import JOB_FILE, TERMINAL, JobStore

if TYPE_CHECKING:
    from subagents.types import JobState, WorktreeRecord

# Set-aside job directories: a leading dot, which no job id has.
TRASH_PREFIX = ".removing-"


@dataclass
class Removed:
    jobs: list[str] = field(default_factory=list)
    runs: int = 0
    worktrees: int = 0
    branches: int = 0  # kept run branches removed on request (``--branches``)
    problems: list[str] = field(default_factory=list)


def _finished(store: JobStore, job_id: str) -> JobState:
    state = store.load(job_id)
    if state.get("status") not in TERMINAL:
        with contextlib.suppress(OSError):
            state = store.recover_if_orphaned(job_id)
    if state.get("status") not in TERMINAL:
        raise JobBusyError(
            f"job {job_id} is {state.get('status') or 'running'}: stop it first "
            f"(subagents stop {job_id})"
        )
    return state


def remove_jobs(store: JobStore, job_ids: list[str], *, branches: bool = False) -> Removed:
    """Remove these finished jobs. Every one is checked before any is touched: one still
    running raises JobBusyError and nothing is removed. With ``branches``, the branches
    isolated runs kept (``subagents/<run-id>``) go too."""
    for job_id in job_ids:
        _finished(store, job_id)
    done = Removed()
    for job_id in dict.fromkeys(job_ids):
        trash = store.dir / f"{TRASH_PREFIX}{job_id}"
        os.rename(store.dir / job_id, trash)
        _empty_trash(store, trash, done, branches)
        done.jobs.append(job_id)
    _forget(store, done.jobs)
    finish_interrupted(store, done)
    return done


def jobs_to_prune(
    store: JobStore, *, older_than: float | None = None, keep: int | None = None
) -> list[str]:
    """Finished jobs that ended before ``older_than`` (epoch seconds) and are not among the
    ``keep`` newest finished jobs. Running jobs are never selected."""
    try:
        names = sorted(
            (e.name for e in os.scandir(store.dir) if e.is_dir() and not e.name.startswith(".")),
            reverse=True,
        )
    except FileNotFoundError:
        return []
    finished: list[tuple[str, float]] = []
    for job_id in names:
        try:
            state = _finished(store, job_id)
        except (JobBusyError, OSError, ValueError):
            continue
        ended = state.get("completedAt")
        when = _epoch(ended) if isinstance(ended, str) else float(state.get("createdAt") or 0)
        finished.append((job_id, when))
    chosen = finished[keep:] if keep is not None else finished
    return [j for j, when in chosen if older_than is None or when < older_than]


def _epoch(iso_time: str) -> float:
    when = epoch(iso_time)
    return time.time() if when is None else when


def finish_interrupted(store: JobStore, done: Removed | None = None) -> None:
    """Complete removals a crash left half-way (a set-aside job directory)."""
    done = done or Removed()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(store.dir):
            if entry.name.startswith(TRASH_PREFIX) and entry.is_dir():
                _empty_trash(store, Path(entry.path), done)
                _forget(store, [entry.name.removeprefix(TRASH_PREFIX)])


def _empty_trash(store: JobStore, trash: Path, done: Removed, branches: bool = False) -> None:
    try:
        state = object_of(read_json(trash / JOB_FILE))
    except (OSError, ValueError):
        state = {}
    run_ids = [r for r in list_of(state.get("runIds")) if isinstance(r, str) and r]
    for run in list_of(state.get("runs")):
        run_id = object_of(run).get("runId")
        if isinstance(run_id, str):
            run_ids.append(run_id)
    for run_id in dict.fromkeys(run_ids):
        run_dir = paths.runs_dir(store.home) / run_id
        if "/" in run_id or run_id.startswith(".") or not run_dir.is_dir():
            continue
        moved = trash / "runs" / run_id
        moved.parent.mkdir(exist_ok=True)
        os.rename(run_dir, moved)
        done.runs += 1
        _remove_worktree(moved, done, branches)
    shutil.rmtree(trash, ignore_errors=True)


def _remove_worktree(run_dir: Path, done: Removed, branches: bool = False) -> None:
    """The git worktree a run recorded (``worktree.path`` in its result), if still there;
    with ``branches``, its kept branch too."""
    try:
        result = read_json(run_dir / "result.json")
    except (OSError, ValueError):
        return
    tree = result.get("worktree") if is_run_result(result) else None
    if branches and isinstance(tree, dict) and _remove_branch(tree, done):
        return
    where = tree.get("path") if isinstance(tree, dict) else None
    if not isinstance(where, str) or not Path(where).exists():
        return
    try:
        proc = subprocess.run(
            ["git", "-C", where, "worktree", "remove", "--force", where],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        done.problems.append(f"worktree {where}: {exc}")
        return
    if proc.returncode == 0:
        done.worktrees += 1
    else:
        last = (proc.stderr.strip().splitlines() or ["git worktree remove failed"])[-1]
        done.problems.append(f"worktree {where}: {last}")


def _remove_branch(tree: WorktreeRecord, done: Removed) -> bool:
    """Remove a kept run branch (and its worktree, if still there); False when the run
    recorded no branch to remove."""
    from subagents.worktree import discard_worktree

    branch, repo = tree.get("branch"), tree.get("repo")
    if not (tree.get("kept") and isinstance(branch, str) and isinstance(repo, str)):
        return False
    try:
        discard_worktree(tree)
        still = subprocess.run(
            ["git", "-C", repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, KeyError) as exc:
        done.problems.append(f"branch {branch}: {exc}")
        return True
    if still.returncode == 0:
        done.problems.append(f"branch {branch}: could not be removed from {repo}")
    else:
        done.branches += 1
    return True


def _forget(store: JobStore, job_ids: list[str]) -> None:
    if not job_ids:
        return
    with contextlib.suppress(sqlite3.Error, OSError):
        db = store.index()
        try:
            db.executemany("delete from jobs where job_id = ?", [(j,) for j in job_ids])
            db.commit()
        finally:
            db.close()
