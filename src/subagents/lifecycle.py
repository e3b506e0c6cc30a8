"""Lifecycle records for jobs: the session log entries and the hooks they trigger.

Whoever drives a job calls this: the foreground CLI, or the background job driver,
so a background job records its end after its parent exited.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagents.orchestrator import JobPlan


def lifecycle_for(home: Path, plan: JobPlan, *, background: bool) -> Callable[[str, dict[str, Any]], None] | None:
    """The lifecycle sink for a job (None while the session log is not wired)."""
    return None
