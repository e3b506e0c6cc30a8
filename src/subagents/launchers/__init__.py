"""launchers — how and where a run's supervisor starts: one ``Launcher`` each for a
detached process here (``process``, with warm spares), a tmux window here (``tmux``), and a
run on a Ray cluster's node (``ray``: ``ray_relay``, ``ray_pool`` and ``ray_ship`` on the
caller's side, ``ray_host`` and ``ray_keeper`` on the node's, ``ray_node`` the names
both share). A run's ``Placement`` chooses one; what a launch hands back (``Launched``)
says what the supervisor is, and ``supervisor.json`` records it.

May import: supervisor (its command line), worktree, config, core.
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
from subagents.launchers.registry import (
    describe_ray_status,
    launcher_for,
    launcher_named,
    let_go_spares_ahead,
    ray_down,
    ray_status,
    reattach,
    start_spare_early,
    want_spares,
)

__all__ = [
    "LAUNCHERS",
    "RAY_MISSING",
    "SUPERVISOR_FILE",
    "LaunchError",
    "Launched",
    "Launcher",
    "Placement",
    "describe_ray_status",
    "launcher_for",
    "launcher_named",
    "let_go_spares_ahead",
    "ray_down",
    "ray_status",
    "reattach",
    "start_spare_early",
    "supervisor_argv",
    "unrecorded",
    "want_spares",
]
