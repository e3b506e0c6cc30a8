"""Every job and run id a request names, resolved in one place: a job by its store, a run
only as one of its job's own runs. A run id is a name in the runs directory, never a path:
``..``, ``/``, ``\\`` or anything but an id's characters names nothing (JobIdError, 404)."""

from __future__ import annotations

from dataclasses import dataclass

from subagents.core import ids, paths
from subagents.core.files import read_json
from subagents.errors import JobIdError, PlanError
from subagents.service import JobStore, job_runs, resolve_run


@dataclass(frozen=True)
class Target:
    job_id: str
    run_id: str | None


def _clean(value: str, what: str) -> str:
    prefix = value.strip().lower()
    if not ids.is_valid_id_prefix(prefix):
        raise JobIdError(f"no {what} {value!r}: an id is letters, digits and '-'")
    return prefix


def target(store: JobStore, job: str | None = None, run: str | None = None) -> Target:
    """The job ``job`` names (a prefix), and ``run`` as one of that job's runs; with no job,
    the job ``run`` is a run of. JobIdError for anything that names no such job or run."""
    if job is None:
        if run is None:
            raise JobIdError("no job or run named")
        try:
            run_id = resolve_run(store.home, _clean(run, "run"))
        except PlanError as exc:
            raise JobIdError(str(exc)) from None
        try:
            meta = read_json(paths.runs_dir(store.home) / run_id / "meta.json")
        except (OSError, ValueError):
            meta = None
        owner = meta.get("jobId") if isinstance(meta, dict) else None
        if not isinstance(owner, str):
            raise JobIdError(f"run {run_id} belongs to no job")
        return target(store, owner, run_id)
    job_id = store.resolve(_clean(job, "job"))
    if run is None:
        return Target(job_id, None)
    prefix = _clean(run, "run")
    # (A map's runs are in its row log: one per row and attempt.)
    runs = [r for r in job_runs(store, store.load(job_id)) if r.startswith(prefix)]
    if len(runs) != 1:
        raise JobIdError(f"no run {run!r} in job {job_id}")
    return Target(job_id, runs[0])
