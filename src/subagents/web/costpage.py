"""The cost page: tokens and cost per day, backend, model, agent and repository, each a
chart drawn here and a table, from the same report as ``subagents cost --json --by …``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import CostRow, CostTotals, KeyedCostRow

from collections.abc import Callable

from markupsafe import Markup

from subagents.errors import SubagentsError
from subagents.lifecycle.cost import money
from subagents.present.figures import tokens
from subagents.web import charts
from subagents.web.templates import render

GROUPS = (
    ("day", "per day"),
    ("backend", "per backend"),
    ("model", "per model"),
    ("agent", "per agent"),
    ("repo", "per repository"),
)

Report = Callable[[str | None], "CostTotals"]


def _chart(by: str, rows: list[KeyedCostRow]) -> Markup:
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


def _cost_of(row: CostRow) -> str:
    return money(row["cost"], row["unpriced"])


def render_body(report: Report, since: str, session: str, **frame: str) -> str:
    """``report(by)``: the cost report grouped ``by`` (None: the total); a report refused (a
    bad time or session) is said on the page. ``frame``: the base template's values."""
    page = {"since": since, "session": session, "cost_of": _cost_of, **frame}
    try:
        total = report(None)
        groups = []
        if total["total"]["runs"]:
            for by, words in GROUPS:
                grouped = report(by)
                last: KeyedCostRow = {**grouped["total"], "key": "total"}
                rows = [*((r, False) for r in grouped["rows"]), (last, True)]
                groups.append((by, words, _chart(by, grouped["rows"]), rows))
    except (ValueError, SubagentsError) as exc:
        return render("cost.html", problem=str(exc), **page)
    return render("cost.html", problem="", summary=total["summary"], groups=groups, **page)
