"""Working on real repositories: ``subagents continue`` and ``subagents apply``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from subagents.cli.app import fail, main
from subagents.cli.background import parent_pid_option
from subagents.cli.delegate import progress_option


@main.command(name="continue")
@click.argument("run_id")
@click.argument("task")
@click.option(
    "--bg", is_flag=True, help="Run in the background: print the job id and return at once."
)
@click.option("--json", "as_json", is_flag=True, help="Print the new run's result.json on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option(
    "--session",
    help="Session to record lifecycle entries in (default: $SUBAGENTS_SESSION or 'default').",
)
@progress_option
@parent_pid_option
def continue_(
    run_id: str,
    task: str,
    bg: bool,
    as_json: bool,
    quiet: bool,
    session: str | None,
    progress: str,
    parent_pid: int | None,
) -> None:
    """Continue a finished run: its child resumes its own conversation with TASK.

    A new run (and job) that records `continuedFrom`; an isolated run goes on in its own
    worktree branch (one run at a time). TASK '-' reads the task from stdin. RUN_ID is any
    unique prefix, or the id of a job of one run.

    \b
    Examples:
      subagents run --json -b claude "Find where retries are configured"
      subagents continue 01m84w "Now make the delay configurable"
      subagents continue --bg --json 01m84x "And add a test"   # {"jobId": ...}
    """
    from subagents import api, service
    from subagents.cli.background import run_in_background
    from subagents.cli.delegate import run_in_foreground

    if task == "-":
        task = sys.stdin.read()
    try:
        watch = None if parent_pid is None else service.bound_to(parent_pid, foreground=not bg)
        job = service.prepare_continuation(
            run_id, task, background=bg, session=session, watch=watch, drive_here=not bg
        )
    except api.BadRequest as exc:
        fail(str(exc))
    if bg:
        run_in_background(job, as_json=as_json, hint=False)
    run_in_foreground(job, as_json=as_json, quiet=quiet, progress=progress)


@main.command()
@click.argument("run_id")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path),
    help="The working tree to apply to (default: the current directory).",
)
@click.option(
    "--partial",
    is_flag=True,
    help="Apply the changes of a run that did not complete (failed, timed out, aborted).",
)
def apply(run_id: str, cwd: Path | None, partial: bool) -> None:
    """Apply an isolated run's changes to the working tree (a 3-way merge).

    Only the working tree changes (the index is left as it is). On a conflict nothing is
    changed and the conflicting files are named (exit 1). RUN_ID is any unique prefix
    (or the id of a job of one run). A run that did not complete is applied only with
    --partial.

    \b
    Example:
      subagents run --isolate worktree "fix the flaky test"   # prints the run's answer
      subagents apply 01m84v                                   # its changes, here
    """
    from subagents import api
    from subagents.errors import WorktreeError

    try:
        changed = api.apply_run(run_id, cwd, partial=partial)
    except api.BadRequest as exc:
        fail(str(exc))
    except WorktreeError as exc:
        fail(str(exc), code=1)
    if not changed:
        click.echo(f"nothing to apply: {_why_nothing(run_id)}", err=True)
        return
    click.echo(f"applied {len(changed)} file(s): {', '.join(changed)}", err=True)


def _why_nothing(run_id: str) -> str:
    """Why applying a run changed nothing: it changed nothing, or it is applied already."""
    from subagents.core import paths
    from subagents.service import read_run, resolve_run

    home = paths.state_home()
    _meta, result = read_run(home, resolve_run(home, run_id))
    tree = result.get("worktree") if result else None
    if tree is None or tree.get("commit") == tree.get("base"):
        return "the run changed no files"
    return "the working tree already has the run's changes"
