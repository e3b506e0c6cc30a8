"""Continuing a run: a new single-run job whose child resumes the earlier child's own
conversation (``subagents continue RUN TEXT``), and the chain of runs that led to a run.

The new run repeats the earlier run's request (backend, model, agent, tools, system prompt,
environment, isolation) from its job's plan, with the follow-up as its task; how the child
resumes is the backend's business (``Backend.resume_point``), and an isolated run goes on in
its own worktree branch (``runs.launch``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.config import Settings
from subagents.core import ids, paths
from subagents.core.records import is_run_result
from subagents.core.upgrade import read_meta, read_result
from subagents.errors import FieldProblem, PlanError, UsageError
from subagents.jobs.planning import JobPlan
from subagents.jobs.store import JobStore, unknown_id
from subagents.runs import RunRequest, check

if TYPE_CHECKING:
    from subagents.types import JsonObject, RunResult


def resolve_run(home: Path, prefix: str) -> str:
    """A full run id from any unambiguous prefix (``PlanError`` otherwise)."""
    prefix = prefix.strip().lower()
    if not ids.is_valid_id_prefix(prefix):
        raise PlanError(str(unknown_id(prefix)))  # one wording for any id that names nothing
    try:
        names = sorted(
            e.name for e in os.scandir(paths.runs_dir(home)) if e.name.startswith(prefix)
        )
    except FileNotFoundError:
        names = []
    if not names:
        return _run_of_job(home, prefix)
    if len(names) > 1:
        raise PlanError(f"ambiguous run id {prefix!r}: matches {len(names)} runs")
    return names[0]


def _run_of_job(home: Path, prefix: str) -> str:
    """The run a job id names where a run id is asked for: a job of one run, its run."""
    store = JobStore(home)
    try:
        job_id = store.resolve(prefix)
    except UsageError:
        raise PlanError(str(unknown_id(prefix))) from None
    try:
        run_ids = [r for r in store.load(job_id).get("runIds") or [] if r]
    except (OSError, ValueError) as exc:
        raise PlanError(str(exc)) from None
    if len(run_ids) == 1:
        return str(run_ids[0])
    if not run_ids:
        raise PlanError(f"job {job_id} has no run yet")
    raise PlanError(
        f"{prefix!r} is job {job_id}, which has {len(run_ids)} runs: give one of them "
        f"({', '.join(run_ids)})"
    )


def read_run(home: Path, run_id: str) -> tuple[JsonObject, RunResult | None]:
    """A run's ``meta.json`` and its ``result.json`` (None while it runs)."""
    run_dir = paths.runs_dir(home) / run_id
    try:
        meta = read_meta(run_dir)
    except (OSError, ValueError):
        meta = None
    if not isinstance(meta, dict):
        raise PlanError(f"run {run_id}: its meta.json is missing or unreadable")
    try:
        result = read_result(run_dir)
    except FileNotFoundError:
        return meta, None
    except (OSError, ValueError):
        result = None
    if not is_run_result(result):
        raise PlanError(f"run {run_id}: its result.json is unreadable")
    return meta, result


def _original(store: JobStore, run_id: str, meta: JsonObject) -> tuple[RunRequest, JobPlan]:
    """The request that started ``run_id``, and the plan of its job."""
    job_id = meta.get("jobId")
    try:
        state = store.load(str(job_id))
        index = list(state.get("runIds") or []).index(run_id)
        earlier = JobPlan.from_record(state["plan"])
        return earlier.requests[index], earlier
    except (OSError, ValueError, KeyError, IndexError, TypeError, FieldProblem, UsageError):
        raise PlanError(
            f"run {run_id}: the job that started it ({job_id}) is gone or unreadable"
        ) from None


def continuation_plan(
    store: JobStore, run: str, task: str, settings: Settings, session: str | None = None
) -> JobPlan:
    """The plan of a run continuing ``run`` with ``task``, under ``settings``, started where
    ``run`` was (its job's placement); every problem is a ``PlanError``."""
    from subagents.backends import get_backend

    if not task.strip():
        raise PlanError("the follow-up task is empty")
    run_id = resolve_run(store.home, run)
    meta, result = read_run(store.home, run_id)
    if result is None:
        raise PlanError(
            f"run {run_id} has not ended yet; wait for it first (subagents wait {run_id})"
        )
    name = str(meta.get("backend"))
    backend = get_backend(name)
    if not backend.can_continue:
        raise PlanError(f"{name} cannot continue a run")
    if backend.resume_point(str(paths.runs_dir(store.home) / run_id), result) is None:
        raise PlanError(f"run {run_id} left no {name} session to continue")
    tree = result.get("worktree") or meta.get("worktree")
    if isinstance(tree, dict):
        from subagents.worktree import busy, in_use_by

        holder = in_use_by(tree)
        if holder is not None:
            raise PlanError(busy(tree, holder))
    earlier, earlier_plan = _original(store, run_id, meta)
    req = replace(earlier, task=task, job_id=None, continue_from=run_id, watch=[])
    check(req, settings, os.environ, earlier_plan.placement)
    return JobPlan("single", [req], settings, earlier_plan.placement, 1, session)


def chain_of(home: Path, run_id: str, limit: int = 50) -> list[str]:
    """The runs that led to ``run_id`` through ``continue``, oldest first, ending with it."""
    chain = [run_id]
    while len(chain) < limit:
        try:
            meta = read_meta(paths.runs_dir(home) / chain[0])
        except (OSError, ValueError):
            break
        earlier = meta.get("continuedFrom") if isinstance(meta, dict) else None
        if not isinstance(earlier, str) or earlier in chain:
            break
        chain.insert(0, earlier)
    return chain
