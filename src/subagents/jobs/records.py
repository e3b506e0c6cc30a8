"""Lifecycle records for jobs: the session log entries and the hooks they trigger.

Whoever drives a job calls this: the foreground CLI, or the background job driver,
so a background job records its end after its parent exited. Hooks run detached:
they never change or delay a job's result.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from subagents.jobs.orchestrator import JobPlan
from subagents.lifecycle import sessionlog
from subagents.lifecycle.hooks import desktop_notice_hook, hooks_log_path, run_hooks_detached


def _hooks(cwd: Path) -> tuple[list[Any], bool]:
    from subagents.config import ConfigError, load_settings

    try:
        settings = load_settings(cwd)
    except ConfigError:
        return [], False  # the job was planned with valid config; never fail a job over hooks
    return list(settings.hooks), settings.notify_desktop


def lifecycle_for(
    home: Path, plan: JobPlan, *, background: bool, env: Mapping[str, str] | None = None
) -> Callable[[str, dict[str, Any]], None]:
    """A sink for Job.run: ``("start", job state)`` and ``("end", job result)``."""
    env = os.environ if env is None else env
    session = plan.session or sessionlog.default_session_id(env)
    path = sessionlog.session_path(home, session)
    hooks, notify = _hooks(Path(plan.requests[0].cwd or ".") if plan.requests else Path.cwd())
    pid = os.getpid()
    from subagents.jobs.store import JobStore

    store = JobStore(home)

    def record(kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            models = [r.model for r in plan.requests if r.model]
            agents = [r.agent or r.backend or plan.limits.default_backend for r in plan.requests]
            entry = sessionlog.entry(
                "subagent:start",
                job_id=data.get("jobId"),
                mode=plan.mode,
                agent_name=", ".join(dict.fromkeys(agents)),
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
        elif not store.log_end_once(str(data.get("jobId")), path, entry):
            raise OSError(f"could not append the end entry to {path}")
        to_run = list(hooks)
        if notify and kind == "end":
            notice = desktop_notice_hook(entry)
            if notice is not None:
                to_run.append(notice)
        if to_run:
            with contextlib.suppress(Exception):
                run_hooks_detached(entry, to_run, hooks_log_path(home))

    record.session_log = path  # type: ignore[attr-defined]  # kept in job.json, for recovery
    return record
