"""How a job ended, from its runs, and the job result that says so: one rule and one record
for the driver that saw the job through and for whoever records the end of a job whose
driver died."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from subagents.core import events as ev
from subagents.core.clock import iso
from subagents.core.records import RUN_STATUSES

if TYPE_CHECKING:
    from subagents.types import JobMode, Usage

# The runs are a job's records of them (result.json, or the record of a run never started),
# read key by key: a job result read back from job.json, or one being built.
Runs = Sequence[Mapping[str, Any]]


def job_result(
    job_id: str,
    mode: str,
    status: str,
    runs: list[dict[str, Any]],
    started: float,
    *,
    started_at: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The job result (job.json's, and what ``--json`` prints), ended now. ``started`` is
    when the job started (epoch seconds); ``started_at`` its recorded ISO time, if any."""
    completed = time.time()
    result: dict[str, Any] = {"jobId": job_id, "mode": mode, "status": status}
    if error is not None:
        result["errorMessage"] = error
    result.update(
        startedAt=started_at or iso(started),
        completedAt=iso(completed),
        durationMs=round((completed - started) * 1000),
        usage=sum_usage(runs),
        runs=runs,
        finalText=final_text(mode, status, runs),
    )
    return result


def sum_usage(runs: Runs) -> Usage:
    """A job's usage: the sum of its runs' usage."""
    total = ev.empty_usage()
    for r in runs:
        ev.add_usage(total, r.get("usage") or {})
    return ev.priced(total)


def job_status(planned: int, runs: Runs, cancelled: bool) -> str:
    """``completed`` only when every planned run completed; else the first run's failure
    (``failed`` for a status no run can have: a damaged result.json). A RunStatus; typed
    str while JobStore.recover_if_orphaned, which may put its own in its place, is not."""
    statuses = [r.get("status") for r in runs]
    if runs and len(runs) == planned and all(s == "completed" for s in statuses):
        return "completed"
    if cancelled:
        return "aborted"
    return next((str(s) for s in statuses if s != "completed" and s in RUN_STATUSES), "failed")


def final_text(mode: JobMode | str, status: str, runs: Runs) -> str | None:
    """single: the run's answer; chain: the last step's (when it completed); parallel: none."""
    if mode == "single" and runs:
        text = runs[0].get("finalText")
        return text if isinstance(text, str) else None
    if mode == "chain" and status == "completed":
        text = runs[-1].get("finalText")
        return text if isinstance(text, str) else None
    return None
