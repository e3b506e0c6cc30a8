"""A job started again from the page: **Re-run** (the same plan, as a new job) and
**Continue** (a finished run's child resumes its conversation with a new message, as
``subagents continue``). Each is a new background job; the page goes to it."""

from __future__ import annotations

from subagents import service
from subagents.errors import UsageError
from subagents.service import JobPlan, JobStore


def rerun(store: JobStore, job_id: str) -> str:
    """A new job of ``job_id``'s plan, started in the background: its id."""
    state = store.load(job_id)
    if state.get("status") not in ("completed", "failed", "aborted", "timeout"):
        raise UsageError(f"job {job_id} is still running: stop it or wait for it first")
    plan = JobPlan.from_record(state["plan"])
    new = store.create(plan.to_record(), agents=plan.labels(), background=True)
    return service.start_background(service.PreparedJob(store, new, plan))


def carry_on(run_id: str, text: str) -> str:
    """A new job continuing ``run_id`` with ``text``, started in the background: its id."""
    return service.start_background(service.prepare_continuation(run_id, text, background=True))
