"""The job commands: ``ps``, ``show``, ``logs``, ``wait``, ``stop``."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from subagents.cli.app import echo_child_text, emit_answer, fail, main, print_json

# ---- job commands ------------------------------------------------------------


def _store() -> Any:
    from subagents.jobs import JobStore

    return JobStore()


def _resolve(store: Any, job_id: str) -> str:
    from subagents.jobs import JobIdError

    try:
        resolved: str = store.resolve(job_id)
    except JobIdError as exc:
        fail(str(exc))
    return resolved


def _elapsed(item: dict[str, Any]) -> str:
    if item.get("durationMs") is not None:
        seconds = item["durationMs"] / 1000
    elif item.get("createdAt"):
        seconds = time.time() - float(item["createdAt"])
    else:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


@main.command()
@click.option("--limit", "-n", default=20, show_default=True, help="How many jobs, newest first.")
@click.option("--session", "-s", help="Only the jobs of this lifecycle session.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table.")
def ps(limit: int, session: str | None, as_json: bool) -> None:
    """Running and recent jobs: id, agents, status, elapsed, current activity."""
    from subagents import api

    items = api.list_jobs(limit, session=session)
    if as_json:
        for item in items:
            click.echo(json.dumps(item, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("JOB", "MODE", "AGENTS", "STATUS", "ELAPSED", "ACTIVITY"):
        table.add_column(col, overflow="ellipsis", no_wrap=col != "ACTIVITY")
    for item in items:
        table.add_row(
            item["jobId"],
            item.get("mode") or "",
            ",".join(item.get("agents") or []) or "-",
            item.get("status") or "",
            _elapsed(item),
            item.get("activity") or "",
        )
    if not items:
        click.echo("no jobs yet", err=True)
        return
    Console().print(table)


@main.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="The whole job.json.")
def show(job_id: str, as_json: bool) -> None:
    """A job's result, or its state while it runs."""
    store = _store()
    from subagents import api

    state = api.job_state(store, _resolve(store, job_id))
    if as_json:
        print_json(state)
        return
    echo_child_text(api.describe_job(state))
    from subagents.jobs import TERMINAL

    if state.get("status") not in TERMINAL:
        activity = api.current_activity(store.home, state.get("runIds") or [])
        if activity:
            echo_child_text(f"now: {activity}")


@main.command()
@click.argument("job_id")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing as the job goes on, until it ends."
)
def logs(job_id: str, follow: bool) -> None:
    """The transcript of a job's runs."""
    store = _store()
    from subagents import api

    try:
        for chunk in api.job_transcript(store, _resolve(store, job_id), follow=follow):
            echo_child_text(chunk, nl=False)
    except KeyboardInterrupt:
        sys.exit(130)


@main.command()
@click.argument("job_id")
@click.option(
    "--timeout", type=float, help="Give up after this many seconds (exit 124, the job runs on)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the job result.")
def wait(job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for a job to end; the exit code is the job's status code."""
    store = _store()
    from subagents import api
    from subagents.jobs import exit_code

    jid = _resolve(store, job_id)
    try:
        result = api.wait_job(store, jid, timeout)
    except KeyboardInterrupt:
        sys.exit(130)
    if result is None:
        fail(f"job {jid} is still running after {timeout:g}s", 124)
    if as_json:
        print_json(result)
    else:
        emit_answer(result)
    sys.exit(exit_code(result))


@main.command()
@click.argument("job_id")
def stop(job_id: str) -> None:
    """Stop a job: every run's process group is killed; the job ends 'aborted'."""
    store = _store()
    from subagents import api

    result = api.stop_job(store, _resolve(store, job_id))
    click.echo(f"{result['jobId']}: {result['status']}")
