"""What the commands that start jobs share: binding a job to its parent process, and
starting one in the background."""

from __future__ import annotations

import sys
from typing import Any, NoReturn, TypeVar

import click

from subagents.cli.app import print_json

F = TypeVar("F", bound=Any)

parent_pid_option = click.option(
    "--parent-pid",
    type=int,
    help="Bind the job to process PID: if it ends first (e.g. the program that started "
    "this command died), the job is stopped (status 'aborted'); in the foreground, so it is "
    "if this command is killed.",
)


def run_in_background(job: Any, *, as_json: bool, hint: bool, follow: str = "logs -f") -> NoReturn:
    """Start the job's detached driver and say which job it is: ``{jobId, pid}`` with
    ``--json``, else the id (and, with ``hint``, how to follow it)."""
    from subagents import service

    job_id = service.start_background(job)
    if as_json:
        print_json({"jobId": job_id, "pid": job.driver_pid, "startedAt": job.started_at})
    else:
        click.echo(job_id)
        if hint:
            click.echo(
                f"started in the background; follow with: subagents {follow} {job_id}", err=True
            )
    sys.exit(0)


def gate_options(command: F) -> F:
    """``--verify``, ``--verify-timeout``, ``--verify-attempts``, ``--review``
    (docs/gates.md): kept
    together, so they move as one to wherever a run's options are defined."""
    for option in reversed(
        [
            click.option(
                "--verify",
                metavar="CMD",
                help="An acceptance gate: after a run completes, run CMD (split like a shell"
                " line, never run by one) in its working tree; exit 0 passes, else the child"
                " gets a repair turn, then the run fails (docs/gates.md).",
            ),
            click.option(
                "--verify-timeout",
                type=float,
                help="Seconds the gate's command may take (default 600).",
            ),
            click.option(
                "--verify-attempts",
                type=int,
                help="Checks before the run fails, repair turns between them (default 2).",
            ),
            click.option(
                "--review",
                metavar="AGENT|BACKEND[:MODEL]",
                help="A reviewer gate: a separate run reads the task, the answer and the diff"
                " and approves or lists issues; issues are a repair turn (docs/gates.md).",
            ),
        ]
    ):
        command = option(command)
    return command
