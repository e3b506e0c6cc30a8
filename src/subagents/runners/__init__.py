"""Runners launch a run's supervisor; only the launch mechanics differ between them."""

from __future__ import annotations

from pathlib import Path

from subagents.runners.base import SUPERVISOR_FILE, Launched, RunnerError, record, supervisor_argv


def launch(run_dir: Path, runner: str = "process") -> Launched:
    if runner == "process":
        from subagents.runners.process import launch as launch_process

        return launch_process(run_dir)
    if runner == "tmux":
        from subagents.runners.tmux import launch as launch_tmux

        return launch_tmux(run_dir)
    raise RunnerError(f"unknown runner {runner!r} (known: process, tmux)")


def want_spares(owner: object, count: int, runner: str = "process") -> None:
    """Keep ``count`` supervisors started ahead for ``owner``'s next runs (0: none now).
    Only the process runner has spares (runners/spare.py); a tmux run starts its own."""
    if runner != "process" and count > 0:
        return
    from subagents.runners.spare import SPARES

    SPARES.want(owner, count)


__all__ = [
    "SUPERVISOR_FILE",
    "Launched",
    "RunnerError",
    "launch",
    "record",
    "supervisor_argv",
    "want_spares",
]
