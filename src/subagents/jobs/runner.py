"""What runs a job: a map's rows (mapjob.py), or the job's runs (orchestrator.py). The
map's machinery (its row log, input and results files) is imported for a map only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.jobs.orchestrator import Job

if TYPE_CHECKING:
    from subagents.jobs.planning import JobPlan
    from subagents.jobs.store import JobStore
    from subagents.types import JobState


def job_for(store: JobStore, job_id: str, job_plan: JobPlan, state: JobState | None = None) -> Job:
    """What runs a job: a map's rows, or the job's runs (``state``: see ``Job``)."""
    if job_plan.mode == "map":
        from subagents.jobs.mapjob import MapJob

        return MapJob(store, job_id, job_plan)
    return Job(store, job_id, job_plan, state=state)
