"""How a job ended, from its runs: one rule for the driver that saw the job through and for
whoever records the end of a job whose driver died."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from subagents.core.records import RUN_STATUSES

if TYPE_CHECKING:
    from subagents.types import JobMode

# The runs are a job's records of them (result.json, or the record of a run never started),
# read key by key: a job result read back from job.json, or one being built.
Runs = Sequence[Mapping[str, Any]]


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
