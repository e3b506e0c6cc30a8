"""runs — one run from the caller's side: the request (request.py) and its checks
(checks.py), the run directory and ``meta.json`` (rundir.py), starting its supervisor (a
process of its own, ``subagents.supervisor``) through its launcher (launch.py), and the
handle and monitor that follow it and recover from a dead supervisor (handle.py,
monitor.py), messages to its child and its job's budget (control.py), and the installed
version of its CLI (versions.py).

May import: launchers, supervisor, backends, present, worktree, config, core.
"""

from __future__ import annotations

from subagents.core.lazy import names_from
from subagents.errors import UsageError
from subagents.supervisor.result import EXIT_CODES
from subagents.supervisor.spec import RunSpec

TYPE_CHECKING = False  # not typing's: nothing more is imported until a name is asked for
if TYPE_CHECKING:
    from subagents.runs.approvals import PARENT_DECIDER, decide, pending_items
    from subagents.runs.checks import check, check_capabilities, resolve_binary
    from subagents.runs.control import check_message, send, tell_limit
    from subagents.runs.handle import RunHandle
    from subagents.runs.launch import keep_warm, resume, start, start_prepared, stop_run
    from subagents.runs.monitor import RunMonitor
    from subagents.runs.request import RunRequest
    from subagents.runs.rundir import prepare, runs_naming
    from subagents.runs.versions import installed_version, parse_version, read_version

# Where each name lives: its module is imported when the name is first used.
_WHERE = {
    "PARENT_DECIDER": "approvals",
    "decide": "approvals",
    "pending_items": "approvals",
    "check": "checks",
    "check_capabilities": "checks",
    "resolve_binary": "checks",
    "check_message": "control",
    "send": "control",
    "tell_limit": "control",
    "RunHandle": "handle",
    "keep_warm": "launch",
    "resume": "launch",
    "start": "launch",
    "start_prepared": "launch",
    "stop_run": "launch",
    "RunMonitor": "monitor",
    "RunRequest": "request",
    "prepare": "rundir",
    "runs_naming": "rundir",
    "installed_version": "versions",
    "parse_version": "versions",
    "read_version": "versions",
}
__getattr__ = names_from(__name__, _WHERE)

__all__ = [
    "EXIT_CODES",
    "PARENT_DECIDER",
    "RunHandle",
    "RunMonitor",
    "RunRequest",
    "RunSpec",
    "UsageError",
    "check",
    "check_capabilities",
    "check_message",
    "decide",
    "installed_version",
    "keep_warm",
    "parse_version",
    "pending_items",
    "prepare",
    "read_version",
    "resolve_binary",
    "resume",
    "runs_naming",
    "send",
    "start",
    "start_prepared",
    "stop_run",
    "tell_limit",
]
