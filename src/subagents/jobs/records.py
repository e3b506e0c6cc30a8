"""Lifecycle records for jobs: the session log entries and the hooks they trigger.

Whoever drives a job calls this: the foreground CLI, or the background job driver,
so a background job records its end after its parent exited. Hooks run detached:
they never change or delay a job's result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from subagents.jobs.orchestrator import LifecycleSink
from subagents.jobs.planning import JobPlan
from subagents.lifecycle import sessionlog
from subagents.lifecycle.hooks import configured_hooks, fire


def lifecycle_for(
    home: Path, plan: JobPlan, *, background: bool, env: Mapping[str, str] | None = None
) -> LifecycleSink:
    """A sink for Job.run: ``("start", job state)`` and ``("end", job result)``."""
    env = os.environ if env is None else env
    session = plan.session or sessionlog.default_session_id(env)
    path = sessionlog.session_path(home, session)
    hooks, notify = configured_hooks(
        Path(plan.requests[0].cwd or ".") if plan.requests else Path.cwd()
    )
    pid = os.getpid()
    from subagents.jobs.store import JobStore

    store = JobStore(home)

    def record(kind: str, data: Mapping[str, Any]) -> None:
        if kind == "start":
            models = [r.model for r in plan.requests if r.model]
            entry = sessionlog.entry(
                "subagent:start",
                job_id=data.get("jobId"),
                mode=plan.mode,
                agent_name=", ".join(dict.fromkeys(plan.labels())),
                model=", ".join(dict.fromkeys(models)) or None,
                pid=pid,
                started_at=data.get("startedAt"),
                summary=f"{plan.mode} job started: {len(plan.requests)} run(s)"
                + (" in the background" if background else ""),
            )
        else:
            entry = sessionlog.entry_for_job(data, pid=pid)
        if kind == "start":
            sessionlog.append(path, entry)
        else:
            logged = store.append_end_once(str(data.get("jobId")), path, entry)
            if logged == "pending":
                raise OSError(f"could not append the end entry to {path}")
            if logged == "was":
                return  # written by whoever found this driver gone: its hooks ran there
        fire(home, entry, hooks, notify)

    record.session_log = path  # type: ignore[attr-defined]  # kept in job.json, for recovery
    return record
