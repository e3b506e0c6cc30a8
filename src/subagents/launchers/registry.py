"""The one place a launcher is chosen by name: from a run's ``Placement`` to start it, from
its ``supervisor.json`` to find it again. A launcher's module is imported only when a run
uses it (Ray's client side, tmux's)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from subagents.errors import UsageError
from subagents.launchers.base import (
    LAUNCHERS,
    Launched,
    Launcher,
    Placement,
    read_record,
)

if TYPE_CHECKING:
    from subagents.types import RayClusterStatus, RayDown


def launcher_named(name: str, ray_address: str | None = None) -> Launcher:
    if name == "process":
        from subagents.launchers.process import ProcessLauncher

        return ProcessLauncher()
    if name == "tmux":
        from subagents.launchers.tmux import TmuxLauncher

        return TmuxLauncher()
    if name == "ray":
        from subagents.launchers.ray_relay import RayLauncher

        return RayLauncher(ray_address)
    raise UsageError(f"unknown launcher {name!r} (known: {', '.join(LAUNCHERS)})", "runner")


def launcher_for(placement: Placement) -> Launcher:
    return launcher_named(placement.launcher, placement.ray_address)


def reattach(run_dir: Path, *, follow: bool = True) -> Launched | None:
    """The supervisor of a run started by another process, as its ``supervisor.json``
    says, from the launcher that started it (see ``Launcher.reattach``; ``LaunchError``
    when ``follow`` cannot be done). None while the run has no record (or an unreadable
    one): its supervisor was never started, or is starting."""
    record = read_record(run_dir)
    if record is None:
        return None
    try:
        launcher = launcher_named(str(record.get("runner")))
        return launcher.reattach(run_dir, record, follow=follow)
    except (UsageError, KeyError, TypeError, ValueError):  # a record this version cannot read
        return None


# A job with this many runs that may start next is served by a supervisor template.
TEMPLATE_FROM = 2


def want_spares(owner: object, count: int, placement: Placement) -> None:
    """Keep ``count`` supervisors started ahead for ``owner``'s next runs (0: none now):
    spares, or for several runs a template that forks one per run (launchers/template.py).
    Only a launcher that keeps spares has them; a tmux or a ray run starts its own."""
    if count > 0 and not launcher_for(placement).keeps_spares:
        return
    from subagents.launchers.spares import SPARES

    SPARES.want(owner, count, template=count >= TEMPLATE_FROM)


def start_spare_early(fork: bool = False, ahead: bool = False) -> None:
    """Start one supervisor now, ahead of the run a command is about to launch here (see
    ``SparePool.start_early``): its start goes on beside the command's own. ``fork``: this
    process has the supervisor's modules imported and runs no other thread (a warm command
    server's worker): the supervisor is forked from it, with no interpreter to start.
    ``ahead``: before this process knows its command (a warm server's standby worker)."""
    from subagents.launchers.spares import SPARES

    SPARES.start_early(fork, ahead)


def let_go_spares_ahead() -> None:
    """A command that launches nothing here: the spare its standby worker forked ahead
    leaves (``SparePool.let_go_ahead``)."""
    from subagents.launchers.spares import SPARES

    SPARES.let_go_ahead()


# `subagents ray status` and `ray down`: Ray's client side is imported only when asked.


def ray_status(address: str | None) -> RayClusterStatus:
    """The cluster's nodes (what each offers and has free), its subagents hosts with their
    runs, and the units held (see ray_pool.cluster_status)."""
    from subagents.launchers.ray_pool import cluster_status

    return cluster_status(address)


def ray_down(address: str | None, *, force: bool = False) -> RayDown:
    """Remove the cluster's subagents hosts (refused while runs run, unless ``force``)."""
    from subagents.launchers.ray_pool import cluster_down

    return cluster_down(address, force=force)


def describe_ray_status(status: RayClusterStatus) -> str:
    from subagents.launchers.ray_pool import describe_status

    return describe_status(status)
