"""How a job ended, from its runs, and the job result that says so: one rule and one record
for the driver that saw the job through and for whoever records the end of a job whose
driver died."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from subagents.core import events as ev
from subagents.core.clock import iso
from subagents.core.records import is_run_status

if TYPE_CHECKING:
    from subagents.types import JobMode, JobResult, JobRun, JobStatus, RunStatus, Usage


def job_result(
    job_id: str,
    mode: JobMode,
    status: RunStatus,
    runs: list[JobRun],
    started: float,
    *,
    started_at: str | None = None,
    error: str | None = None,
    completed: float | None = None,
) -> JobResult:
    """The job result (job.json's, and what ``--json`` prints), ended ``completed`` (epoch
    seconds; default now). ``started`` is when the job started (epoch seconds);
    ``started_at`` its recorded ISO time, if any."""
    completed = time.time() if completed is None else completed
    result: JobResult = {
        "jobId": job_id,
        "mode": mode,
        "status": status,
        "startedAt": started_at or iso(started),
        "completedAt": iso(completed),
        "durationMs": round((completed - started) * 1000),
        "usage": sum_usage(runs),
        "runs": runs,
        "finalText": final_text(mode, status, runs),
    }
    if error is None:
        return result
    # Why it ended comes right after how (as job.json has always said it).
    return {"jobId": job_id, "mode": mode, "status": status, "errorMessage": error, **result}


def sum_usage(runs: Sequence[JobRun]) -> Usage:
    """A job's usage: the sum of its runs' usage."""
    total = ev.empty_usage()
    for r in runs:
        ev.add_usage(total, r.get("usage") or ev.empty_usage())
    return ev.priced(total)


def job_status(planned: int, runs: Sequence[JobRun], cancelled: bool) -> RunStatus:
    """``completed`` only when every planned run completed; else the first run's failure
    (``failed`` for a status no run can have: a damaged result.json)."""
    statuses = [r.get("status") for r in runs]
    if runs and len(runs) == planned and all(s == "completed" for s in statuses):
        return "completed"
    if cancelled:
        return "aborted"
    return next((s for s in statuses if s != "completed" and is_run_status(s)), "failed")


def final_text(mode: JobMode, status: JobStatus, runs: Sequence[JobRun]) -> str | None:
    """single: the run's answer; chain: the last step's (when it completed); parallel: none."""
    if mode == "single" and runs:
        text = runs[0].get("finalText")
        return text if isinstance(text, str) else None
    if mode == "chain" and status == "completed":
        text = runs[-1].get("finalText")
        return text if isinstance(text, str) else None
    return None
