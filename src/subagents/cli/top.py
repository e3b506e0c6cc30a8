"""``subagents top``: the live view of running and recent jobs (``ps`` off a terminal)."""

from __future__ import annotations

import sys

import click

from subagents.cli.app import main
from subagents.cli.jobs import ps


@main.command()
@click.option("--session", "-s", help="Only the jobs of this lifecycle session.")
@click.option("--limit", "-n", default=50, show_default=True, help="How many jobs, newest first.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print what the view shows once, as JSON: each job with its runs.",
)
@click.pass_context
def top(ctx: click.Context, session: str | None, limit: int, as_json: bool) -> None:
    """A live full-screen view of running and recent jobs, one row per run.

    Keys: ↑/↓ select, Enter follows the selected run's transcript (Esc goes back),
    s stops the selected job (after y to confirm), q quits. Off a terminal it prints
    what `subagents ps` prints; with --json, one snapshot of the view for programs.
    """
    if as_json:
        from subagents.cli.app import print_json
        from subagents.service import LiveJobs

        live = LiveJobs(session=session, limit=limit)
        print_json({"jobs": live.fleet()})
        for problem in live.damaged:
            click.echo(f"subagents: warning: {problem}", err=True)
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        ctx.invoke(ps, limit=limit, session=session, as_json=False)
        return
    from subagents.cli.topview import run_top
    from subagents.service import LiveJobs

    run_top(LiveJobs(session=session, limit=limit))
