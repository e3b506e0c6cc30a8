"""The cost page: tokens and cost per day, backend, agent and repository, each a chart drawn
here and a table, from the same report as ``subagents cost --json --by …``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import CostRow, CostTotals, KeyedCostRow

from collections.abc import Callable

from subagents.lifecycle.cost import money
from subagents.present.figures import tokens
from subagents.web import charts
from subagents.web.layout import esc

GROUPS = (
    ("day", "per day"),
    ("backend", "per backend"),
    ("agent", "per agent"),
    ("repo", "per repository"),
)

Report = Callable[[str | None], "CostTotals"]


def _chart(by: str, rows: list[KeyedCostRow]) -> str:
    priced = any(row["cost"] is not None for row in rows)
    items = [
        (
            str(row["key"]),
            float(row["cost"] or 0.0) if priced else float(row["totalTokens"]),
            money(row["cost"], row["unpriced"])
            if priced
            else f"{tokens(row['totalTokens'])} tokens",
        )
        for row in rows
    ]
    title = f"{'cost' if priced else 'tokens'} {dict(GROUPS)[by]}"
    return charts.columns(items, title=title) if by == "day" else charts.bars(items, title=title)


def _table(by: str, rows: list[KeyedCostRow], total: CostRow) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (by, "jobs", "runs", "input", "output", "cache r/w", "tokens", "cost")
    )
    body = []
    last: KeyedCostRow = {**total, "key": "total"}
    for row, cls in [*((r, "") for r in rows), (last, ' class="total"')]:
        body.append(
            f"<tr{cls}><td>{esc(row['key'])}</td><td class=num>{row['jobs']}</td>"
            f"<td class=num>{row['runs']}</td>"
            f"<td class=num>{row['input']}</td><td class=num>{row['output']}</td>"
            f"<td class=num>{row['cacheRead']}/{row['cacheWrite']}</td>"
            f"<td class=num>{row['totalTokens']}</td>"
            f"<td class=num>{esc(money(row['cost'], row['unpriced']))}</td></tr>"
        )
    return f'<table class="cost" data-by="{esc(by)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def render_body(report: Report, since: str, session: str) -> str:
    """``report(by)``: the cost report grouped ``by`` (None: the total)."""
    form = (
        '<form class="filters" method="get" action="/cost">'
        f'<label>since <input name="since" value="{esc(since)}" placeholder="1d, 2w, 2026-01-05" size="12"></label>'
        f'<label>session <input name="session" value="{esc(session)}" size="16"></label>'
        '<button type="submit">Show</button> <a href="/cost">all</a></form>'
    )
    try:
        total = report(None)
    except ValueError as exc:
        return f'<h1>Cost</h1>{form}<p class="problem">{esc(exc)}</p>'
    out = [f'<h1>Cost</h1>{form}<p class="totals" id="cost-summary">{esc(total["summary"])}</p>']
    if not total["total"]["runs"]:
        out.append('<p class="empty">No finished jobs.</p>')
        return "".join(out)
    for by, words in GROUPS:
        grouped = report(by)
        out.append(
            f'<section class="costs" id="by-{by}"><h2>{esc(words.capitalize())}</h2>'
            f"{_chart(by, grouped['rows'])}{_table(by, grouped['rows'], grouped['total'])}</section>"
        )
    return "".join(out)
