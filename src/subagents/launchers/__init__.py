"""launchers — how and where a run's supervisor starts: one ``Launcher`` each for a
detached process here (``process``, with warm spares), a tmux window here (``tmux``), and a
Ray actor on a cluster node (``ray``: ``ray_relay`` on the caller's side, ``ray_host`` and
``ray_keeper`` on the node's). A run's ``Placement`` chooses one; what a launch hands back
(``Launched``) says what the supervisor is, and ``supervisor.json`` records it.

May import: supervisor (its command line), config, core.
"""

from subagents.errors import LaunchError
from subagents.launchers.base import (
    LAUNCHERS,
    RAY_MISSING,
    SUPERVISOR_FILE,
    Launched,
    Launcher,
    Placement,
    supervisor_argv,
)
from subagents.launchers.local import unrecorded
from subagents.launchers.registry import launcher_for, launcher_named, reattach, want_spares

__all__ = [
    "LAUNCHERS",
    "RAY_MISSING",
    "SUPERVISOR_FILE",
    "LaunchError",
    "Launched",
    "Launcher",
    "Placement",
    "launcher_for",
    "launcher_named",
    "reattach",
    "supervisor_argv",
    "unrecorded",
    "want_spares",
]
