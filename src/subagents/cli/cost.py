"""``subagents cost``: tokens and cost totalled from the session logs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from subagents.cli.app import fail, main

if TYPE_CHECKING:
    from subagents.types import KeyedCostRow


def runs_of_jobs() -> Any:
    """``runs_of(job_id)``: a finished job's run results from its job directory, or None."""
    from subagents.jobs import JobStore

    store = JobStore()

    def runs_of(job_id: str) -> list[Mapping[str, Any]] | None:
        try:
            runs = store.load(job_id).get("runs")
        except (OSError, ValueError):
            return None
        return [r for r in runs if isinstance(r, Mapping)] if isinstance(runs, list) else None

    return runs_of


@main.command()
@click.option("--session", "-s", help="Only this session (default: every session).")
@click.option("--since", help="Only jobs that ended since: 45s, 30m, 2h, 1d, 2w or an ISO date.")
@click.option(
    "--by",
    type=click.Choice(["agent", "backend", "model", "day"]),
    help="One row per agent, backend, model or day (by run for the first three).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="The totals as one JSON object (with a `summary` line)."
)
def cost(session: str | None, since: str | None, by: str | None, as_json: bool) -> None:
    """Tokens and cost of finished jobs, from the session logs.

    A cost a CLI did not report is never guessed: those runs are counted as unpriced.
    """
    from subagents.core import paths
    from subagents.lifecycle import cost as costs
    from subagents.lifecycle import history

    try:
        since_ts = history.parse_since(since) if since else None
        entries = costs.end_entries(paths.state_home(), session, since_ts)
    except ValueError as exc:
        fail(str(exc))
    report = costs.totals(entries, by=by, runs_of=runs_of_jobs() if by else None)
    if as_json:
        # The total in words too, for integrations that show it (the pi package's /subagents).
        report["summary"] = costs.describe(report["total"])
        click.echo(json.dumps(report, ensure_ascii=False))
        return
    if not entries:
        click.echo("no finished jobs", err=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in (by.upper() if by else "", "JOBS", "RUNS", "INPUT", "OUTPUT", "CACHE R/W"):
        table.add_column(col, justify="left" if col == (by or "").upper() else "right")
    table.add_column("TOKENS", justify="right")
    table.add_column("COST", justify="right")
    total: KeyedCostRow = {**report["total"], "key": "total"}
    rows = [*report["rows"], total] if by else [total]
    for row in rows:
        table.add_row(
            row["key"],
            str(row["jobs"]),
            str(row["runs"]),
            str(row["input"]),
            str(row["output"]),
            f"{row['cacheRead']}/{row['cacheWrite']}",
            str(row["totalTokens"]),
            costs.money(row["cost"], row["unpriced"]),
            end_section=by is not None and row is rows[-2],
        )
    Console().print(table)
