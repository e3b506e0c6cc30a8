"""``subagents cost``: tokens and cost totalled from the session logs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from subagents.cli.app import fail, main

if TYPE_CHECKING:
    from subagents.types import KeyedCostRow


@main.command()
@click.option("--session", "-s", help="Only this session (default: every session).")
@click.option("--since", help="Only jobs that ended since: 45s, 30m, 2h, 1d, 2w or an ISO date.")
@click.option(
    "--by",
    type=click.Choice(["agent", "backend", "model", "repo", "day"]),
    help="One row per agent, backend, model, repository or day (by run but for day).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="The totals as one JSON object (with a `summary` line)."
)
def cost(session: str | None, since: str | None, by: str | None, as_json: bool) -> None:
    """Tokens and cost of finished jobs, from the session logs.

    A cost a CLI did not report is never guessed: those runs are counted as unpriced.

    \b
    Examples:
      subagents cost                      # every session, all time
      subagents cost --since 1d --by agent
      subagents cost --by day --json      # for a program
    """
    from subagents import api
    from subagents.lifecycle import cost as costs

    try:
        report = api.cost_report(session, since, by)
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, allow_nan=False))
        return
    if not report["total"]["runs"]:
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
