"""Lifecycle records: ``history`` and ``watch``."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from subagents.cli.app import echo_child_text, fail, main
from subagents.core.childtext import neutralize
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
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="How many entries, newest first (0: all).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON lines, as stored.")
def history(
    session: str | None,
    status: str | None,
    agent: str | None,
    since: str | None,
    all_events: bool,
    limit: int,
    as_json: bool,
) -> None:
    """What ran in a session, newest first: when, for whom, at what cost, and how it ended."""
    from subagents.lifecycle import history

    try:
        since_ts = history.parse_since(since) if since else None
    except ValueError as exc:
        fail(str(exc))
    from subagents.core import paths

    # One entry at a time, from reading to printing: through the index, only the entries
    # shown are read from the log, and one damaged or huge entry costs no more than its line.
    ends = None if all_events else ["subagent:complete", "subagent:error", "subagent:aborted"]
    chosen = history.newest(
        paths.state_home(),
        _session_file(session),
        limit=limit or None,
        status=status,
        agent=agent,
        since=since_ts,
        event_types=ends,
    )
    if as_json:
        for e in chosen:
            echo_child_text(json.dumps(e, ensure_ascii=False, allow_nan=False))
        return
    import shutil

    layout = HistoryLayout(shutil.get_terminal_size().columns)
    shown = 0
    for e in chosen:
        if not shown:
            click.echo(layout.line(layout.headers))
        click.echo(layout.line(_history_cells(e, layout.wide)))
        shown += 1
    if not shown:
        click.echo("no entries", err=True)


class HistoryLayout:
    """History's columns for a terminal ``width``: each (header, width) fixed, so entries
    are printed as they are read, however many; the summary takes what is left of the line,
    or a line of its own below where too little is."""

    NARROW = (("TIME", 11), ("JOB", 19), ("EVENT", 8), ("AGENT", 10), ("TOOK", 6), ("COST", 8))
    WIDE = (
        ("TIME", 16),
        ("JOB", 19),
        ("EVENT", 8),
        ("AGENT", 16),
        ("DURATION", 8),
        ("TOKENS", 7),
        ("COST", 8),
    )
    WIDE_ROOM = 30  # the least the summary gets beside the wide columns
    ROOM = 20  # the least it gets beside the narrow ones; else it has a line of its own

    def __init__(self, width: int) -> None:
        self.width = width
        used = sum(size + 2 for _, size in self.WIDE)
        self.wide = width - used >= self.WIDE_ROOM
        self.columns = self.WIDE if self.wide else self.NARROW
        self.room = width - sum(size + 2 for _, size in self.columns)
        self.headers = [h for h, _ in self.columns] + ["SUMMARY"]

    def line(self, cells: list[str]) -> str:
        out = [
            cell.ljust(size) if len(cell) <= size else cell[: size - 1] + "…"
            for cell, (_, size) in zip(cells, self.columns, strict=False)
        ]
        last, room, joiner = cells[-1], self.room, "  "
        if room < self.ROOM:
            room, joiner, out = self.width - 2, "\n  ", ["  ".join(out).rstrip()]
        return joiner.join([*out, last if len(last) <= room else last[: room - 1] + "…"]).rstrip()


def _history_cells(e: Mapping[str, object], wide: bool) -> list[str]:
    """An entry's cells, whatever its fields hold (a damaged entry's may be anything)."""
    from subagents.present.figures import tokens

    def text(value: object, limit: int = 200) -> str:
        return neutralize(value[: limit * 2] if isinstance(value, str) else "")[:limit]

    found = e.get("usage")
    usage: Mapping[str, object] = found if isinstance(found, dict) else {}
    took = e.get("durationMs")
    stamp = text(e.get("timestamp"), 19).replace("T", " ")
    cells = [
        stamp[:16] if wide else stamp[5:16],  # "YYYY-MM-DD HH:MM", "MM-DD HH:MM"
        text(e.get("jobId"), 40),
        text(e.get("eventType"), 40).removeprefix("subagent:"),
        text(e.get("agentName"), 60) or "-",
        f"{took / 1000:.1f}s" if isinstance(took, int | float) and took is not True else "",
    ]
    if wide:
        total = usage.get("totalTokens")
        cells.append(tokens(total) if isinstance(total, int) and total else "")
    cells += [money(usage.get("cost"), unknown=""), text(e.get("summary"))]
    return cells


@main.command()
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
def watch(session: str | None) -> None:
    """Print each new lifecycle entry as it is appended, until interrupted."""
    from subagents.lifecycle import history

    path = _session_file(session)
    try:
        for e in history.follow(path):
            echo_child_text(json.dumps(e, ensure_ascii=False, allow_nan=False))
    except KeyboardInterrupt:
        sys.exit(130)
