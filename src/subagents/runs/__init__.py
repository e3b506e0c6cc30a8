"""runs — one run end to end: the request and its checks, the run directory, the supervisor
that owns the child (``python -m subagents.runs.supervisor RUN_DIR``, standard library only),
completion, ``result.json``, and the monitor that follows a run and recovers from a dead
supervisor.

May import: core, config, backends, runners, present.
"""

from subagents.core.lazy import exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.runs.launch import InputError as InputError
    from subagents.runs.launch import Limits as Limits
    from subagents.runs.launch import RunHandle as RunHandle
    from subagents.runs.launch import RunRequest as RunRequest
    from subagents.runs.launch import check as check
    from subagents.runs.launch import keep_warm as keep_warm
    from subagents.runs.launch import limits_from_settings as limits_from_settings
    from subagents.runs.launch import prepare as prepare
    from subagents.runs.launch import resolve_binary as resolve_binary
    from subagents.runs.launch import resume as resume
    from subagents.runs.launch import start as start
    from subagents.runs.launch import start_prepared as start_prepared
    from subagents.runs.monitor import RunMonitor as RunMonitor
    from subagents.runs.result import EXIT_CODES as EXIT_CODES
    from subagents.runs.result import iso as iso
    from subagents.runs.result import sum_usage as sum_usage
    from subagents.runs.spec import RunSpec as RunSpec
    from subagents.runs.worktree import WorktreeError as WorktreeError
    from subagents.runs.worktree import apply_changes as apply_changes
    from subagents.runs.worktree import discard_worktree as discard_worktree

_NAMES = {
    "discard_worktree": "worktree",
    "apply_changes": "worktree",
    "WorktreeError": "worktree",
    "InputError": "launch",
    "Limits": "launch",
    "RunHandle": "launch",
    "RunRequest": "launch",
    "check": "launch",
    "keep_warm": "launch",
    "limits_from_settings": "launch",
    "prepare": "launch",
    "resolve_binary": "launch",
    "resume": "launch",
    "start": "launch",
    "start_prepared": "launch",
    "RunMonitor": "monitor",
    "EXIT_CODES": "result",
    "iso": "result",
    "sum_usage": "result",
    "RunSpec": "spec",
}
__all__ = [
    "EXIT_CODES",
    "InputError",
    "Limits",
    "RunHandle",
    "RunMonitor",
    "RunRequest",
    "RunSpec",
    "WorktreeError",
    "apply_changes",
    "check",
    "discard_worktree",
    "iso",
    "keep_warm",
    "limits_from_settings",
    "prepare",
    "resolve_binary",
    "resume",
    "start",
    "start_prepared",
    "sum_usage",
]
if not TYPE_CHECKING:
    __getattr__ = exports(__name__, _NAMES)
