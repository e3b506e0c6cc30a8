"""Lifecycle records for jobs: the session log entries and the hooks they trigger.

Whoever drives a job calls this: the foreground CLI, or the background job driver,
so a background job records its end after its parent exited. Hooks run detached:
they never change or delay a job's result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core.paths import working_dir
from subagents.jobs.planning import JobPlan
from subagents.jobs.store import JobStore
from subagents.lifecycle import sessionlog
from subagents.lifecycle.hooks import configured_hooks, fire

if TYPE_CHECKING:
    from subagents.config import Settings
    from subagents.types import AgentEvent, JobResult, JobState


class SessionRecorder:
    """A job's lifecycle entries in its session log, and the hooks they trigger: what
    ``Job.run`` tells of the job's start and end (a ``LifecycleSink``)."""

    def __init__(
        self,
        home: Path,
        plan: JobPlan,
        *,
        background: bool,
        session: str,
        settings: Settings | None = None,
    ) -> None:
        self.home = home
        self.plan = plan
        self.background = background
        # Kept in job.json: whoever finds the job's driver gone writes the end here.
        self.session_log = sessionlog.session_path(home, session)
        self.hooks, self.notify = configured_hooks(
            Path(plan.requests[0].cwd or ".") if plan.requests else working_dir(), settings
        )
        self.pid = os.getpid()
        self.store = JobStore(home)

    def started(self, state: JobState) -> None:
        plan = self.plan
        models = [r.model for r in plan.requests if r.model]
        entry = sessionlog.entry(
            "subagent:start",
            job_id=state["jobId"],
            mode=plan.mode,
            agent_name=", ".join(dict.fromkeys(plan.labels())),
            model=", ".join(dict.fromkeys(models)) or None,
            pid=self.pid,
            started_at=state.get("startedAt"),
            summary=f"{plan.mode} job started: {len(plan.requests)} run(s)"
            + (" in the background" if self.background else ""),
        )
        sessionlog.append(self.session_log, entry)
        self._fire(entry)

    def ended(self, result: JobResult) -> None:
        entry = sessionlog.entry_for_job(result, pid=self.pid)
        path = self.session_log
        logged = self.store.append_end_once(result["jobId"], path, entry)
        if logged == "pending":
            raise OSError(f"could not append the end entry to {path}")
        if logged == "was":
            return  # written by whoever found this driver gone: its hooks ran there
        self._fire(entry)

    def _fire(self, entry: AgentEvent) -> None:
        fire(self.home, entry, self.hooks, self.notify)


def lifecycle_for(
    home: Path,
    plan: JobPlan,
    *,
    background: bool,
    env: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> SessionRecorder:
    """The recorder of a job's life for Job.run: ``start`` and ``end`` entries, and hooks
    (``settings``: see ``configured_hooks``)."""
    env = os.environ if env is None else env
    session = plan.session or sessionlog.default_session_id(env)
    return SessionRecorder(home, plan, background=background, session=session, settings=settings)
