"""Where a record read back from disk becomes its type: each check here says "this JSON value
is a ``result.json``" (or a job's state, a canonical event, a session-log entry) once, so its
readers get a :mod:`subagents.types` record, and a damaged file is told apart from a record.

The checks look at what tells a record from anything else (its identity and its status or
kind), not at every field: a record is written whole by subagents, and the readers of its
other fields stay as careful as before. Standard library only (the supervisor reads results
back): ``typing`` is imported only for the type checker.
"""

from __future__ import annotations

from subagents.core.events import EVENT_TYPES

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from typing import TypeGuard

    from subagents.types import AgentEvent, Event, JobResult, JobState, RunResult, RunStatus

RUN_STATUSES = ("completed", "failed", "aborted", "timeout")
JOB_STATUSES = ("pending", "running", *RUN_STATUSES)
LIFECYCLE_EVENT_TYPES = (
    "subagent:start",
    "subagent:complete",
    "subagent:error",
    "subagent:aborted",
)


def is_run_status(value: object) -> TypeGuard[RunStatus]:
    return value in RUN_STATUSES


def is_run_result(data: object) -> TypeGuard[RunResult]:
    """A ``result.json``: an object naming its run, with a run's status."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("runId"), str)
        and data.get("status") in RUN_STATUSES
    )


def is_job_state(data: object) -> TypeGuard[JobState]:
    """A ``job.json``: an object naming its job, with a job's status."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("jobId"), str)
        and data.get("status") in JOB_STATUSES
    )


def is_job_result(data: object) -> TypeGuard[JobResult]:
    """A job result: an object naming its job, with a run's status and the list of runs."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("jobId"), str)
        and data.get("status") in RUN_STATUSES
        and isinstance(data.get("runs"), list)
    )


def is_event(data: object) -> TypeGuard[Event]:
    """A line of ``events.jsonl``: an object of a canonical event type."""
    return isinstance(data, dict) and data.get("type") in EVENT_TYPES


def is_agent_event(data: object) -> TypeGuard[AgentEvent]:
    """A session log's lifecycle entry (``type: agent_event`` with a known ``eventType``)."""
    return (
        isinstance(data, dict)
        and data.get("type") == "agent_event"
        and data.get("eventType") in LIFECYCLE_EVENT_TYPES
    )
