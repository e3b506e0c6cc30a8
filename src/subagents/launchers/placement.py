"""Where and how a run's supervisor starts: the ``process`` or ``tmux`` runner on this
machine, or a Ray actor on a cluster node (the optional extra ``subagents[ray]``).

Either way the caller gets a ``Launched`` whose run directory is the source of truth: the
ray executor relays the node's artifacts and ``result.json`` into it as they are written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from subagents.core import procs
from subagents.errors import LaunchError, SubagentsError, UsageError
from subagents.launchers.base import Launched

EXECUTORS = ("local", "ray")
RAY_MISSING = "the ray executor needs Ray: pip install 'subagents[ray]'"


def check(executor: str) -> None:
    """Raise ``UsageError`` (one line) when ``executor`` cannot be used here."""
    if executor not in EXECUTORS:
        raise UsageError(
            f"unknown executor {executor!r} (known: {', '.join(EXECUTORS)})", "executor"
        )
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError(RAY_MISSING, "executor") from None


def launch_runner(run_dir: Path, runner: str = "process") -> Launched:
    if runner == "process":
        from subagents.launchers.process import launch as launch_process

        return launch_process(run_dir)
    if runner == "tmux":
        from subagents.launchers.tmux import launch as launch_tmux

        return launch_tmux(run_dir)
    raise LaunchError(f"unknown runner {runner!r} (known: process, tmux)")


def want_spares(owner: object, count: int, runner: str = "process") -> None:
    """Keep ``count`` supervisors started ahead for ``owner``'s next runs (0: none now).
    Only the process runner has spares (launchers/spares.py); a tmux run starts its own."""
    if runner != "process" and count > 0:
        return
    from subagents.launchers.spares import SPARES

    SPARES.want(owner, count)


def launch(
    run_dir: Path,
    *,
    backend: str,
    runner: str = "process",
    executor: str = "local",
    address: str | None = None,
) -> Launched:
    """Start the supervisor of the run prepared in ``run_dir``."""
    check(executor)
    if executor == "ray":
        from subagents.launchers.ray_relay import launch as launch_ray

        return launch_ray(run_dir, backend, address)
    return launch_runner(run_dir, runner)


def reattach(run_dir: Path, address: str | None = None) -> Launched:
    """Follow again a ray run started by a process that is gone (found by its actor's name)."""
    check("ray")
    from subagents.launchers.ray_relay import reattach as reattach_ray

    return reattach_ray(run_dir, address)


def signal_supervisor(run_dir: Path, ident: dict[str, Any], sig: int) -> None:
    """Signal a run's supervisor as ``supervisor.json`` records it, wherever it runs: a
    local one by pid (checked with its start time), a ray one through its actor. A ray run
    whose relay died with its driver gets a relay here first, so its result still comes
    back and its actor (and the node's unit it holds) is released."""
    where = ident.get("executor")
    if isinstance(where, dict) and where.get("kind") == "ray":
        check("ray")
        from subagents.launchers.ray_relay import reattach as reattach_ray
        from subagents.launchers.ray_relay import signal_run

        address = str(where.get("address") or "") or None
        if not procs.is_alive(ident):
            reattach_ray(run_dir, address)
        signal_run(where, sig)
    elif procs.is_alive(ident):
        os.kill(int(ident["pid"]), sig)


def abandon(ident: dict[str, Any]) -> str | None:
    """A remote run whose supervisor's host (the relay) is gone: end it where it runs, so
    nothing is left on a node; returns what was done, for the run's error message."""
    where = ident.get("executor")
    if not (isinstance(where, dict) and where.get("kind") == "ray"):
        return None
    try:
        check("ray")
        from subagents.launchers.ray_relay import abandon as abandon_ray

        killed = abandon_ray(where)
    except SubagentsError as exc:  # Ray gone from here, or the cluster unreachable
        return f"its Ray actor {where.get('actor')} could not be reached: {exc}"
    return f"its Ray actor {where.get('actor')} was " + ("killed" if killed else "already gone")
