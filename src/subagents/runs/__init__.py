"""runs — one run from the caller's side: the request and its checks, the run directory and
``meta.json``, starting its supervisor (a process of its own, ``subagents.supervisor``)
through ``launchers``, the handle and monitor that follow it and recover from a dead
supervisor, and worktree isolation.

May import: launchers, supervisor, backends, present, config, core.
"""

from subagents.errors import UsageError
from subagents.runs.launch import (
    Limits,
    RunHandle,
    RunRequest,
    check,
    keep_warm,
    limits_from_settings,
    prepare,
    resolve_binary,
    resume,
    start,
    start_prepared,
)
from subagents.runs.monitor import RunMonitor
from subagents.supervisor.result import EXIT_CODES
from subagents.supervisor.spec import RunSpec

__all__ = [
    "EXIT_CODES",
    "Limits",
    "RunHandle",
    "RunMonitor",
    "RunRequest",
    "RunSpec",
    "UsageError",
    "check",
    "keep_warm",
    "limits_from_settings",
    "prepare",
    "resolve_binary",
    "resume",
    "start",
    "start_prepared",
]
