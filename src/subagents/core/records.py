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

    from subagents.types import (
        AgentEvent,
        Event,
        JobState,
        JsonObject,
        JsonValue,
        ProcessIdentity,
        RunResult,
        RunStatus,
        WorktreeSpec,
    )

# Each record's version, as it writes it (core/upgrade.py reads every earlier one as today's).
JOB_VERSION = 1
META_VERSION = 1
RESULT_VERSION = 1

RUN_STATUSES = ("completed", "failed", "aborted", "timeout")
JOB_MODES = ("single", "parallel", "chain", "council", "map")
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
    """A ``job.json``: an object naming its job, with a job's status and mode, and its
    plan."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("jobId"), str)
        and data.get("status") in JOB_STATUSES
        and data.get("mode") in JOB_MODES
        and isinstance(data.get("plan"), dict)
    )


def is_event(data: object) -> TypeGuard[Event]:
    """A line of ``events.jsonl``: an object of a canonical event type."""
    return isinstance(data, dict) and data.get("type") in EVENT_TYPES


def is_worktree_spec(data: JsonValue) -> TypeGuard[WorktreeSpec]:
    """An isolated run's worktree as its ``meta.json`` records it (its repository, path,
    branch and base; an older record is given its ``subdir`` by ``core.upgrade``)."""
    return isinstance(data, dict) and all(
        isinstance(data.get(key), str) for key in ("repo", "path", "branch", "base")
    )


def is_agent_event(data: object) -> TypeGuard[AgentEvent]:
    """A session log's lifecycle entry (``type: agent_event`` with a known ``eventType``)."""
    return (
        isinstance(data, dict)
        and data.get("type") == "agent_event"
        and data.get("eventType") in LIFECYCLE_EVENT_TYPES
    )


def process_identity(data: JsonValue) -> ProcessIdentity | None:
    """A process as a record names it (``{pid, createTime}``), or None where it names none."""
    if not isinstance(data, dict):
        return None
    pid, created = data.get("pid"), data.get("createTime")
    if type(pid) is not int or not isinstance(created, (int, float)) or isinstance(created, bool):
        return None
    return {"pid": pid, "createTime": float(created)}


# Narrowing a JSON value read from another program (or an old file) where any shape may
# come: the value when it has the shape asked for, else an empty one.


def object_of(value: JsonValue) -> JsonObject:
    """``value`` when it is a JSON object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def list_of(value: JsonValue) -> list[JsonValue]:
    """``value`` when it is a JSON array, else ``[]``."""
    return value if isinstance(value, list) else []


def text_of(value: JsonValue) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None
