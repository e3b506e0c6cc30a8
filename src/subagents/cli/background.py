"""What the commands that start jobs share: binding a job to its parent process, and
starting one in the background."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from subagents.cli.app import print_json

parent_pid_option = click.option(
    "--parent-pid",
    type=int,
    help="Bind the job to process PID: if it ends first (e.g. the program that started "
    "this command died), the job is stopped (status 'aborted'); in the foreground, so it is "
    "if this command is killed.",
)


def run_in_background(job: Any, *, as_json: bool, hint: bool, follow: str = "logs -f") -> NoReturn:
    """Start the job's detached driver and say which job it is: ``{jobId, pid, startedAt,
    steps}`` with ``--json`` (``steps`` as the progress feed's ``job`` record says them: the
    model an agent picks is known from the start), else the id (and, with ``hint``, how to
    follow it)."""
    from subagents import service
    from subagents.present.feed import steps_of

    job_id = service.start_background(job)
    if as_json:
        steps = steps_of(job.store.load(job_id)["plan"])
        print_json(
            {"jobId": job_id, "pid": job.driver_pid, "startedAt": job.started_at, "steps": steps}
        )
    else:
        click.echo(job_id)
        if hint:
            click.echo(
                f"started in the background; follow with: subagents {follow} {job_id}", err=True
            )
    sys.exit(0)
