"""Lifecycle records: ``history`` and ``watch``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from subagents.cli.app import WIDE, ColumnOptions, echo_child_text, fail, main, table
from subagents.core.childtext import neutralize
from subagents.core.events import number
from subagents.core.records import object_of
from subagents.present.figures import money

# ---- lifecycle records -------------------------------------------------------------


def _session_file(session: str | None) -> Path:
    from subagents.core import paths
    from subagents.lifecycle import sessionlog

    try:
        return sessionlog.session_path(
            paths.state_home(), session or sessionlog.default_session_id()
        )
    except ValueError as exc:
        fail(str(exc))


@main.command()
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
@click.option(
    "--status",
    type=click.Choice(["completed", "failed", "aborted"]),
    help="Only jobs that ended so.",
)
@click.option("--agent", help="Only jobs that ran this agent.")
@click.option("--since", help="Only entries since: 45s, 30m, 2h, 1d, 2w or an ISO date/time.")
@click.option("--all", "all_events", is_flag=True, help="Start entries too, not only ends.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, as stored.")
def history(
    session: str | None,
    status: str | None,
    agent: str | None,
    since: str | None,
    all_events: bool,
    as_json: bool,
) -> None:
    """What ran in a session: when, for whom, at what cost, and how it ended."""
    from subagents.lifecycle import history, sessionlog

    try:
        since_ts = history.parse_since(since) if since else None
    except ValueError as exc:
        fail(str(exc))
    entries = sessionlog.read(_session_file(session))
    ends = None if all_events else ["subagent:complete", "subagent:error", "subagent:aborted"]
    entries = history.select(entries, status=status, agent=agent, since=since_ts, event_types=ends)
    if as_json:
        for e in entries:
            echo_child_text(json.dumps(e, ensure_ascii=False))
        return
    if not entries:
        click.echo("no entries", err=True)
        return
    from rich.console import Console

    wide = Console().width >= WIDE
    columns: list[tuple[str, ColumnOptions]] = [
        ("TIME", {"min_width": 19 if wide else 11}),
        ("JOB", {"min_width": 19}),
        ("EVENT", {"min_width": 8}),
        ("AGENT", {"max_width": 20 if wide else 10}),
        ("DURATION" if wide else "TOOK", {}),
    ]
    if wide:
        columns.append(("TOKENS", {}))
    columns += [("COST", {}), ("SUMMARY", {"ratio": 1})]
    console, grid = table(columns)
    for e in entries:
        usage = object_of(e.get("usage"))
        cost = usage.get("cost")
        took = number(e.get("durationMs"))
        stamp = str(e.get("timestamp", ""))[:19].replace("T", " ")
        cells = [
            stamp if wide else stamp[5:16],  # "MM-DD HH:MM"
            str(e.get("jobId") or ""),
            str(e.get("eventType", "")).removeprefix("subagent:"),
            neutralize(str(e.get("agentName") or "-")),
            f"{took / 1000:.1f}s" if took is not None else "",
        ]
        if wide:
            cells.append(str(usage.get("totalTokens") or ""))
        cells += [
            money(cost, unknown=""),
            neutralize(str(e.get("summary") or "")),
        ]
        grid.add_row(*cells)
    console.print(grid)


@main.command()
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
def watch(session: str | None) -> None:
    """Print each new lifecycle entry as it is appended, until interrupted."""
    from subagents.lifecycle import history

    path = _session_file(session)
    try:
        for e in history.follow(path):
            echo_child_text(json.dumps(e, ensure_ascii=False))
    except KeyboardInterrupt:
        sys.exit(130)
