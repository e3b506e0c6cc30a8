"""A map on its job page: its rows as a table (status, input key, attempts, gate outcome,
cost, each row's run a link), a page of :data:`PAGE` rows at a time, filterable by status,
from the map's durable row state (``input.jsonl`` and its row log, read through the
service), so it is live the way the page is: drawn again when the store changes. Every
value is text, escaped where the template puts it (a key is the input's, untrusted)."""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.present.figures import money
from subagents.service import JobStore, Row, map_input_rows
from subagents.web.templates import url

if TYPE_CHECKING:
    from subagents.types import JobState, JsonObject

PAGE = 50
# The statuses a row may have, in the order the filter lists them.
STATUSES = ("running", "pending", "completed", "failed", "aborted", "timeout", "skipped")
ERROR_SHOWN = 120  # characters of a failed row's error in its cell


@dataclass(frozen=True)
class RowsQuery:
    """Which rows a page shows: those of one status (``""``: all), and which page of them.
    From the page's address (``rows``, ``rows_page``); a value that means nothing is left
    out and said (``problem``), never an error page."""

    status: str = ""
    page: int = 1
    problem: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> RowsQuery:
        status = str(query.get("rows") or "").strip()
        text = str(query.get("rows_page") or "").strip()
        problems = []
        if status and status not in STATUSES:
            problems.append(f"rows: {status!r} is none of {', '.join(STATUSES)}")
            status = ""
        page = int(text) if text.isascii() and text.isdigit() and len(text) < 10 else 0
        if text and page < 1:
            problems.append(f"rows_page: {text!r} is not a page number (1 or more)")
        return cls(status, max(page, 1), "; ".join(problems))

    def params(self) -> dict[str, str | None]:
        """Its part of an address (the stream's, a link's)."""
        return {"rows": self.status or None, "rows_page": str(self.page) if self.page > 1 else None}


@dataclass(frozen=True)
class MapRow:
    number: int  # 1-based, as a person counts rows
    key: str
    status: str
    attempts: int | None  # runs the row took (None: it has not started)
    gate: str  # passed, failed, or "" (no gate)
    cost: str
    error: str
    link: str  # its run on this page ("" before it started)


@dataclass(frozen=True)
class Filter:
    status: str  # "" for all
    count: int
    link: str
    chosen: bool


@dataclass(frozen=True)
class MapRowsView:
    rows: list[MapRow]
    filters: list[Filter]
    status: str  # the filter's ("": all)
    total: int  # rows that pass the filter
    page: int
    pages: int
    first: int  # the first and last shown rows' places among those (1-based; 0: none)
    last: int
    previous: str  # links ("" at an end)
    next: str
    problem: str


def status_of(entry: Mapping[str, object] | None) -> str:
    """A row's status from its last log entry."""
    if entry is None:
        return "pending"
    kind = entry.get("s")
    if kind == "started":
        return "running"
    if kind == "skipped":
        return "skipped"
    status = entry.get("status")
    return status if isinstance(status, str) and status in STATUSES else "failed"


def _row(job_id: str, row: Row, entry: Mapping[str, object] | None, query: RowsQuery) -> MapRow:
    attempt = entry.get("attempt") if entry is not None else None
    run_id = entry.get("runId") if entry is not None else None
    check = entry.get("verification") if entry is not None else None
    passed = check.get("passed") if isinstance(check, dict) else None
    error = entry.get("error") if entry is not None else None
    said = " ".join(error.split()) if isinstance(error, str) else ""
    return MapRow(
        number=row.index + 1,
        key=row.key,
        status=status_of(entry),
        attempts=attempt + 1 if isinstance(attempt, int) and entry is not None else None,
        gate="" if passed is None else ("passed" if passed else "failed"),
        cost=money(entry.get("cost") if entry is not None else None, ""),
        error=said if len(said) <= ERROR_SHOWN else said[: ERROR_SHOWN - 1] + "…",
        # Its run shown on this page, the table staying where it is.
        link=url("/job/" + job_id, run=run_id, **query.params())
        if isinstance(run_id, str) and run_id
        else "",
    )


# The input rows of the maps shown lately, read once each (a map's input never changes).
# Its row log is the page's to follow (``entries``: read in the same look as its runs), so
# drawing a page of a 10,000-row map again as it runs reads what was appended since, and
# its first look reads the log once. Pages draw in threads.
_INPUTS: OrderedDict[Path, list[Row]] = OrderedDict()
_INPUTS_MAX = 8
_LOCK = threading.Lock()


def _input_rows(job_dir: Path) -> list[Row]:
    with _LOCK:
        rows = _INPUTS.pop(job_dir, None)
    if rows is None:
        rows = map_input_rows(job_dir)
    with _LOCK:
        if rows:  # (not yet written: looked at again next time)
            _INPUTS[job_dir] = rows
        while len(_INPUTS) > _INPUTS_MAX:
            _INPUTS.popitem(last=False)
    return rows


def map_rows(
    store: JobStore,
    state: JobState,
    entries: Mapping[int, JsonObject] | None,
    query: RowsQuery,
) -> MapRowsView | None:
    """The page's view of a map's rows, with ``entries``, each row's last entry in its row
    log (None: the job is no map, or its rows cannot be read: the page shows the rest)."""
    if state.get("mode") != "map" or entries is None:
        return None
    job_id = state["jobId"]
    try:
        rows = _input_rows(store.dir / job_id)
    except (OSError, ValueError, AssertionError):
        return None
    if not rows:
        return None
    statuses = [status_of(entries.get(row.index)) for row in rows]
    counts = Counter(statuses)
    chosen = [i for i, s in enumerate(statuses) if not query.status or s == query.status]
    pages = max(1, -(-len(chosen) // PAGE))
    page = min(query.page, pages)
    shown = chosen[(page - 1) * PAGE : page * PAGE]
    there = RowsQuery(query.status, page)

    def link(status: str, to: int) -> str:
        there = RowsQuery(status, to)
        return url("/job/" + job_id, **there.params())

    filters = [Filter("", len(rows), link("", 1), not query.status)]
    filters += [
        Filter(s, counts[s], link(s, 1), s == query.status)
        for s in STATUSES
        if counts[s] or s == query.status
    ]
    return MapRowsView(
        rows=[_row(job_id, rows[i], entries.get(rows[i].index), there) for i in shown],
        filters=filters,
        status=query.status,
        total=len(chosen),
        page=page,
        pages=pages,
        first=(page - 1) * PAGE + 1 if shown else 0,
        last=(page - 1) * PAGE + len(shown),
        previous=link(query.status, page - 1) if page > 1 else "",
        next=link(query.status, page + 1) if page < pages else "",
        problem=query.problem,
    )


__all__ = ["PAGE", "STATUSES", "MapRowsView", "RowsQuery", "map_rows", "status_of"]
