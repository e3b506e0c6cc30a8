"""A job result as the store records it, for tests that finish jobs by hand."""

from __future__ import annotations

from typing import Any


def job_result(job_id: str, **fields: Any) -> Any:
    """A completed single job's result with no runs (``fields``: what it holds instead)."""
    return {
        "jobId": job_id,
        "mode": "single",
        "status": "completed",
        "startedAt": None,
        "completedAt": None,
        "durationMs": 1,
        "usage": None,
        "runs": [],
        "finalText": None,
        **fields,
    }
