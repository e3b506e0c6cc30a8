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
from subagents.core.records import list_of, object_of
from subagents.core.upgrade import read_meta
from subagents.errors import DamagedRecord, JobBusyError
from subagents.jobs.store import JOB_FILE, MAKING_PREFIX, TERMINAL, JobStore

if TYPE_CHECKING:
    from subagents.types import JobState

# Set-aside job directories: a leading dot, which no job id has.
TRASH_PREFIX = ".removing-"


@dataclass
class Removed:
    jobs: list[str] = field(default_factory=list)
    runs: int = 0
    worktrees: int = 0
    branches: int = 0  # kept run branches removed on request (``--branches``)
    problems: list[str] = field(default_factory=list)


def _finished(store: JobStore, job_id: str) -> JobState | None:
    """The job's state once it has ended (JobBusyError while it runs); None for a job whose
    job.json is damaged, which can go once none of its runs is still going."""
    try:
        state = store.load(job_id)
    except DamagedRecord:
        _runs_over(store, job_id)
        return None
    if state.get("status") not in TERMINAL:
        with contextlib.suppress(OSError):
            state = store.recover_if_orphaned(job_id)
    if state.get("status") not in TERMINAL:
        raise JobBusyError(
            f"job {job_id} is {state.get('status') or 'running'}: stop it first "
            f"(subagents stop {job_id})"
        )
    return state


def _runs_over(store: JobStore, job_id: str) -> None:
    """JobBusyError while a run of the job (its meta.json names it) is still going."""
    from subagents.runs import RunMonitor

    for run_id in _runs_naming(store, job_id):
        monitor = RunMonitor(paths.runs_dir(store.home) / run_id)
        if monitor.result() is None and monitor.supervisor_alive():
            raise JobBusyError(
                f"job {job_id} (its job.json is damaged) has run {run_id} still going: "
                f"stop it first (subagents stop {job_id})"
            )


def _not_in_use(store: JobStore, state: JobState | None) -> None:
    """JobBusyError when a run of another job works in one of this job's worktrees now (a
    continuation: the worktree lives in the first run's directory)."""
    from subagents.worktree import in_use_by

    for run_id in (state.get("runIds") or []) if state is not None else []:
        if not run_id:
            continue
        with contextlib.suppress(OSError, ValueError, AttributeError):
            tree = object_of(read_meta(paths.runs_dir(store.home) / run_id)).get("worktree")
            user = in_use_by(tree) if isinstance(tree, dict) else None
            if user is not None:
                raise JobBusyError(
                    f"run {run_id}'s worktree is in use by run {user}, which has not ended:"
                    f" wait for it (subagents wait {user})"
                )


def remove_jobs(store: JobStore, job_ids: list[str], *, branches: bool = False) -> Removed:
    """Remove these finished jobs. Every one is checked before any is touched: one still
    running raises JobBusyError and nothing is removed. With ``branches``, the branches
    isolated runs kept (``subagents/<run-id>``) go too."""
    for job_id in job_ids:
        _not_in_use(store, _finished(store, job_id))
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
        if state is None:  # damaged: as old as its file
            with contextlib.suppress(OSError):
                finished.append((job_id, store.path(job_id).stat().st_mtime))
            continue
        ended = state.get("completedAt")
        when = _epoch(ended) if isinstance(ended, str) else float(state.get("createdAt") or 0)
        finished.append((job_id, when))
    chosen = finished[keep:] if keep is not None else finished
    return [j for j, when in chosen if older_than is None or when < older_than]


def _epoch(iso_time: str) -> float:
    when = epoch(iso_time)
    return time.time() if when is None else when


# A job directory still being made after this long was left by a process killed making it.
MAKING_LEFT = 60.0


def finish_interrupted(store: JobStore, done: Removed | None = None) -> None:
    """Complete removals a crash left half-way (a set-aside job directory), and remove the
    job directories a killed process left half-made (never a job: no run started from one)."""
    done = done or Removed()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(store.dir):
            if entry.name.startswith(TRASH_PREFIX) and entry.is_dir():
                _empty_trash(store, Path(entry.path), done)
                _forget(store, [entry.name.removeprefix(TRASH_PREFIX)])
            elif entry.name.startswith(MAKING_PREFIX) and entry.is_dir():
                with contextlib.suppress(OSError):
                    if time.time() - entry.stat().st_mtime > MAKING_LEFT:
                        import shutil

                        shutil.rmtree(entry.path, ignore_errors=True)


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
    if not run_ids:  # a damaged job.json: its runs name the job instead
        run_ids = _runs_naming(store, trash.name.removeprefix(TRASH_PREFIX))
    leaving = set(run_ids)
    for run_id in dict.fromkeys(run_ids):
        run_dir = paths.runs_dir(store.home) / run_id
        if "/" in run_id or run_id.startswith(".") or not run_dir.is_dir():
            continue
        # Its worktree first, while the path git recorded for it still holds it.
        _remove_worktree(store, run_dir, done, branches, leaving)
        moved = trash / "runs" / run_id
        moved.parent.mkdir(exist_ok=True)
        os.rename(run_dir, moved)
        done.runs += 1
    shutil.rmtree(trash, ignore_errors=True)


def _runs_naming(store: JobStore, job_id: str) -> list[str]:
    """The runs whose ``meta.json`` names this job (for a job whose own record is lost)."""
    from subagents.runs import runs_naming

    return runs_naming(store.home, job_id)


def _remove_worktree(
    store: JobStore, run_dir: Path, done: Removed, branches: bool, leaving: set[str]
) -> None:
    """The git worktree a run recorded (its result's, else its meta's), if still there,
    and git's record of it; with ``branches``, its kept branch too, unless a run that stays
    (a continuation, in another job) still works on it."""
    from subagents.errors import WorktreeError
    from subagents.worktree import discard_worktree

    tree = None
    for name in ("result.json", "meta.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            tree = object_of(read_json(run_dir / name)).get("worktree")
        if isinstance(tree, dict):
            break
    if not isinstance(tree, dict) or not all(
        isinstance(tree.get(k), str) for k in ("repo", "path", "branch")
    ):
        return
    branch = str(tree["branch"])
    drop = branches and bool(tree.get("kept"))
    if drop and (users := _other_users(store, branch, leaving)):
        done.problems.append(f"branch {branch} kept: run {users[0]} (another job) works on it")
        drop = False
    existed = Path(str(tree["path"])).exists()
    try:
        discard_worktree(tree, branch=drop)
    except WorktreeError as exc:
        done.problems.append(f"worktree of run {run_dir.name}: {exc}")
        return
    if existed and not Path(str(tree["path"])).exists():
        done.worktrees += 1
    if drop:
        if _has_branch(Path(str(tree["repo"])), branch):
            done.problems.append(f"branch {branch}: could not be removed from {tree['repo']}")
        else:
            done.branches += 1


def _other_users(store: JobStore, branch: str, leaving: set[str]) -> list[str]:
    """Runs not being removed whose worktree is on ``branch`` (continuations of its run)."""
    users = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(paths.runs_dir(store.home)):
            if entry.name in leaving:
                continue
            with contextlib.suppress(OSError, ValueError, AttributeError):
                tree = object_of(read_meta(Path(entry.path))).get("worktree")
                if isinstance(tree, dict) and tree.get("branch") == branch:
                    users.append(entry.name)
    return users


def _has_branch(repo: Path, branch: str) -> bool:
    try:
        return (
            subprocess.run(
                ["git", "-C", str(repo), "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"],
                capture_output=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


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
