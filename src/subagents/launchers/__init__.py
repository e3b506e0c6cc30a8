"""launchers — how and where a run's supervisor starts: the ``process`` runner (a detached
process, with warm spares), the ``tmux`` runner (a visible window), or a Ray actor on a
cluster node (``ray_relay`` on the caller's side, ``ray_host`` on the node's).

May import: supervisor (its command line), core.
"""

from subagents.errors import LaunchError
from subagents.launchers.base import SUPERVISOR_FILE, Launched, record, supervisor_argv
from subagents.launchers.placement import (
    EXECUTORS,
    RAY_MISSING,
    abandon,
    check,
    launch,
    launch_runner,
    reattach,
    signal_supervisor,
    want_spares,
)

__all__ = [
    "EXECUTORS",
    "RAY_MISSING",
    "SUPERVISOR_FILE",
    "LaunchError",
    "Launched",
    "abandon",
    "check",
    "launch",
    "launch_runner",
    "reattach",
    "record",
    "signal_supervisor",
    "supervisor_argv",
    "want_spares",
]
