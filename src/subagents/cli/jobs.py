"""The job commands: ``ps``, ``show``, ``logs``, ``wait``, ``send``, ``stop``, ``rm``, ``prune``."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from subagents.cli.app import (
    WIDE,
    echo_child_text,
    emit_answer,
    fail,
    main,
    print_json,
)
from subagents.core.childtext import neutralize

if TYPE_CHECKING:
    from subagents.cli.grid import Grid
    from subagents.types import JobRow

# ---- job commands ------------------------------------------------------------


def _store() -> Any:
    from subagents.service import JobStore

    return JobStore()


def _resolve(store: Any, job_id: str) -> str:
    from subagents.errors import JobIdError

    try:
        resolved: str = store.resolve(job_id)
    except JobIdError as exc:
        fail(str(exc))
    return resolved


def _elapsed(item: JobRow) -> str:
    took, created = item.get("durationMs"), item.get("createdAt")
    if took is not None:
        seconds = took / 1000
    elif created:
        seconds = time.time() - float(created)
    else:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def jobs_table(items: list[JobRow], wide: bool) -> Grid:
    """The rows ``ps`` shows: id, who runs it (agents, else backends), status, elapsed,
    tokens, cost and the task; what a running job does now. Narrow, a running job's last
    cell is what it does now instead of its task."""
    from subagents.cli.grid import Column, Grid
    from subagents.present.figures import money, tokens

    running = any(item.get("activity") for item in items)
    columns = [Column("JOB", min_width=19)]
    if wide:
        columns.append(Column("MODE"))
    columns += [
        Column("AGENTS", max_width=24 if wide else 12),
        Column("STATUS", min_width=9),
        Column("ELAPSED", min_width=7),
    ]
    if wide:
        columns.append(Column("TOKENS", justify="right"))
    columns.append(Column("COST", justify="right"))
    columns += [Column("TASK", ratio=1)]
    if wide and running:
        columns.append(Column("NOW", ratio=1))
    grid = Grid(columns)
    for item in items:
        task = neutralize(str(item.get("task") or ""))
        activity = neutralize(str(item.get("activity") or ""))
        cells = [item["jobId"]]
        if wide:
            cells.append(item.get("mode") or "")
        cells += [
            ",".join(dict.fromkeys(item.get("agents") or [])) or "-",
            "waiting" if item.get("waiting") else item.get("status") or "",
            _elapsed(item),
        ]
        if wide:
            total = item.get("totalTokens")
            cells.append(tokens(total) if total is not None else "-")
        cells.append(money(item.get("cost")))
        if wide and running:
            cells += [task, activity]
        else:
            cells.append(activity if not wide and activity else task)
        grid.add_row(*cells)
    return grid


@main.command()
@click.option("--limit", "-n", default=20, show_default=True, help="How many jobs, newest first.")
@click.option("--session", "-s", help="Only the jobs of this lifecycle session.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table.")
def ps(limit: int, session: str | None, as_json: bool) -> None:
    """Running and recent jobs: id, agents, status, elapsed, tokens, cost, task, and what a
    running job does now.

    \b
    Examples:
      subagents ps                 # the 20 newest jobs
      subagents ps -n 100 -s ci    # the newest 100 of session 'ci'
      subagents ps --json          # one JSON object a line
    """
    from subagents import service

    damaged: list[str] = []
    items = service.list_jobs(limit, session=session, damaged=damaged)
    for problem in damaged:
        click.echo(f"subagents: warning: {problem}", err=True)
    if as_json:
        for item in items:
            click.echo(json.dumps(item, ensure_ascii=False, allow_nan=False))
        return
    if not items:
        click.echo("no jobs yet", err=True)
        return
    width = shutil.get_terminal_size().columns
    click.echo("\n".join(jobs_table(items, width >= WIDE).lines(width)))


@main.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="The whole job.json.")
@click.option(
    "--rows", is_flag=True, help="A map's rows as results lines (done ones, the others pending)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default="jsonl",
    show_default=True,
    help="With --rows: JSON lines or CSV.",
)
def show(job_id: str, as_json: bool, rows: bool, fmt: str) -> None:
    """A job's result, or its state while it runs; a map's rows with --rows."""
    store = _store()
    from subagents import service

    if rows:
        from subagents import maps

        maps.write_rows(store, _resolve(store, job_id), sys.stdout, fmt)
        return
    state = service.job_state(store, _resolve(store, job_id))
    if as_json:
        print_json(state)
        return
    echo_child_text(service.describe_job(state))
    council = state.get("council")
    if isinstance(council, dict):  # the answers side by side
        from subagents.present.council import council_table

        echo_child_text(council_table(council, shutil.get_terminal_size().columns))
    from subagents.service import TERMINAL

    if state.get("status") not in TERMINAL and state.get("mode") == "map":
        from subagents.service import MapWatch, progress_line

        watch = MapWatch(store.dir / state["jobId"], state["jobId"])
        echo_child_text(f"now: {progress_line(watch.progress.record())}")
    elif state.get("status") not in TERMINAL:
        activity = service.current_activity(store.home, state.get("runIds") or [])
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
    from subagents import service

    try:
        for chunk in service.job_transcript(store, _resolve(store, job_id), follow=follow):
            echo_child_text(chunk, nl=False)
            if follow:  # a reader through a pipe (the pi package's viewer) sees it as it comes
                sys.stdout.flush()
    except KeyboardInterrupt:
        sys.exit(130)


@main.command()
@click.argument("job_id")
@click.option(
    "--timeout", type=float, help="Give up after this many seconds (exit 124, the job runs on)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the job result.")
@click.option(
    "--progress",
    type=click.Choice(["jsonl"]),
    help="While waiting, the job's progress on stderr as JSON records, as `run --progress "
    "jsonl` gives them (from each run's first event).",
)
def wait(job_id: str, timeout: float | None, as_json: bool, progress: str | None) -> None:
    """Wait for a job to end; the exit code is the job's status code."""
    store = _store()
    from subagents import service
    from subagents.service import exit_code

    jid = _resolve(store, job_id)
    stop = threading.Event()
    follower = None
    if progress == "jsonl" and store.load(jid).get("mode") == "map":
        from subagents.cli.mapcmd import follow_map

        follower = threading.Thread(
            target=follow_map, args=(store.dir / jid, jid, stop), daemon=True
        )
        follower.start()
    elif progress == "jsonl":
        from subagents.cli.delegate import progress_feed
        from subagents.service import follow_events

        feed = progress_feed(store, jid)
        feed.started()
        follower = threading.Thread(
            target=follow_events, args=(store, jid, feed.event, stop), daemon=True
        )
        follower.start()
    try:
        result = service.wait_job(store, jid, timeout)
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        stop.set()
        if follower is not None:
            follower.join(timeout=10)  # the last events before the result
    if result is None:
        fail(f"job {jid} is still running after {timeout:g}s", 124)
    if follower is not None and result.get("mode") == "map":
        from subagents.present.answer import map_answer

        sys.stderr.write(json.dumps(map_answer(result), ensure_ascii=False) + "\n")
    elif follower is not None:
        feed.ended(result)
    if as_json:
        print_json(result)
    else:
        emit_answer(result)
    sys.exit(exit_code(result))


@main.command()
@click.argument("target", metavar="RUN|JOB")
@click.argument("text")
@click.option(
    "--mode",
    type=click.Choice(["steer", "follow-up"]),
    default="steer",
    show_default=True,
    help="steer: into the running conversation, as soon as the child's CLI allows (after"
    " its current tool calls); follow-up: when the child would otherwise end (the run goes on).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
def send(target: str, text: str, mode: str, as_json: bool) -> None:
    """Send TEXT to a running child (TEXT '-' reads it from stdin). RUN|JOB is the run's id,
    or its job's while one run of the job is going. Prints the receipt: queued (the child
    takes it at the next point it can) or delivered; a message that cannot be taken is
    refused with one line, exit 2, and nothing is sent (docs/live-control.md).

    \b
    Examples:
      subagents send 01m84w "Stop: only fix the tokenizer, then report"
      subagents send --mode follow-up 01m84w "Now add a test for it"
      git diff | subagents send 01m84w -            # the text from stdin
    """
    from subagents import api

    if text == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            fail(f"text: not valid UTF-8 text (byte 0x{data[exc.start]:02x}) at byte {exc.start}")
    receipt = api.send(target, text, "follow-up" if mode == "follow-up" else "steer")
    if as_json:
        print_json(receipt)
        return
    line = f"{receipt['receipt']}: {receipt['mode']} {receipt['id']} to run {receipt['runId']}"
    reason = receipt.get("reason")
    click.echo(line + (f" ({reason})" if reason else ""))


@main.command()
@click.argument("job_id")
def stop(job_id: str) -> None:
    """Stop a job: every run's process group is killed; the job ends 'aborted'."""
    store = _store()
    from subagents import service

    result = service.stop_job(store, _resolve(store, job_id))
    click.echo(f"{result['jobId']}: {result['status']}")


def _report_removed(done: Any) -> None:
    for problem in done.problems:
        click.echo(f"subagents: warning: {problem}", err=True)
    noun = "job" if len(done.jobs) == 1 else "jobs"
    extra = f", {done.worktrees} worktree(s)" if done.worktrees else ""
    extra += f", {done.branches} branch(es)" if done.branches else ""
    click.echo(f"removed {len(done.jobs)} {noun} ({done.runs} run(s){extra})")


BRANCHES = click.option(
    "--branches",
    is_flag=True,
    help="Also delete the branches isolated runs kept (subagents/<run-id>).",
)


@main.command(name="rm")
@click.argument("job_ids", nargs=-1, required=True)
@BRANCHES
def rm(job_ids: tuple[str, ...], branches: bool) -> None:
    """Remove finished jobs with their runs, index rows and worktrees.

    A job still running is refused (stop it first), and then nothing is removed."""
    from subagents.errors import JobBusyError
    from subagents.service import remove_jobs

    store = _store()
    resolved = [_resolve(store, j) for j in job_ids]
    try:
        done = remove_jobs(store, resolved, branches=branches)
    except JobBusyError as exc:
        fail(str(exc))
    _report_removed(done)


@main.command()
@click.option(
    "--older-than",
    default="7d",
    show_default=True,
    help="Remove finished jobs that ended longer ago than this (30m, 12h, 7d, 2w).",
)
@click.option("--keep", type=click.IntRange(min=0), help="Always keep the N newest finished jobs.")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@BRANCHES
def prune(older_than: str, keep: int | None, dry_run: bool, branches: bool) -> None:
    """Remove old finished jobs with their runs, index rows and worktrees (never a running one)."""
    from subagents.lifecycle import history
    from subagents.service import jobs_to_prune, remove_jobs

    try:
        cutoff = history.parse_since(older_than)
    except ValueError as exc:
        fail(f"--older-than: {exc}")
    store = _store()
    chosen = jobs_to_prune(store, older_than=cutoff, keep=keep)
    if dry_run:
        for job_id in chosen:
            click.echo(job_id)
        return
    _report_removed(remove_jobs(store, chosen, branches=branches))
