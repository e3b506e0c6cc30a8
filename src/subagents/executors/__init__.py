"""executors — where a run's supervisor executes: ``local`` (this machine, through a runner)
or ``ray`` (a Ray actor on a cluster node; the optional extra ``subagents[ray]``).

Either way the caller gets a ``Launched`` whose run directory is the source of truth: the
ray executor relays the node's artifacts and ``result.json`` into it as they are written.

May import: runners, core.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from subagents.core import procs
from subagents.runners import Launched, RunnerError
from subagents.runners import launch as launch_runner

EXECUTORS = ("local", "ray")
RAY_MISSING = "the ray executor needs Ray: pip install 'subagents[ray]'"


def check(executor: str) -> None:
    """Raise ``RunnerError`` (one line) when ``executor`` cannot be used here."""
    if executor not in EXECUTORS:
        raise RunnerError(f"unknown executor {executor!r} (known: {', '.join(EXECUTORS)})")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise RunnerError(RAY_MISSING) from None


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
        from subagents.executors.ray_relay import launch as launch_ray

        return launch_ray(run_dir, backend, address)
    return launch_runner(run_dir, runner)


def reattach(run_dir: Path, address: str | None = None) -> Launched:
    """Follow again a ray run started by a process that is gone (found by its actor's name)."""
    check("ray")
    from subagents.executors.ray_relay import reattach as reattach_ray

    return reattach_ray(run_dir, address)


def signal_supervisor(run_dir: Path, ident: dict[str, Any], sig: int) -> None:
    """Signal a run's supervisor as ``supervisor.json`` records it, wherever it runs: a
    local one by pid (checked with its start time), a ray one through its actor. A ray run
    whose relay died with its driver gets a relay here first, so its result still comes
    back and its actor (and the node's unit it holds) is released."""
    where = ident.get("executor")
    if isinstance(where, dict) and where.get("kind") == "ray":
        check("ray")
        from subagents.executors.ray_relay import reattach as reattach_ray
        from subagents.executors.ray_relay import signal_run

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
        from subagents.executors.ray_relay import abandon as abandon_ray

        killed = abandon_ray(where)
    except RunnerError as exc:
        return f"its Ray actor {where.get('actor')} could not be reached: {exc}"
    return f"its Ray actor {where.get('actor')} was " + ("killed" if killed else "already gone")


__all__ = [
    "EXECUTORS",
    "RAY_MISSING",
    "abandon",
    "check",
    "launch",
    "reattach",
    "signal_supervisor",
]
