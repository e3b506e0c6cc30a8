"""What delegation cost: tokens and USD totalled from the session logs' end entries, in all
or one session, optionally grouped by agent, backend, model, repository or day.

A job's end entry carries its usage summed over its runs. Grouping by agent, backend, model
or repository (an isolated run's, else the git root of the run's cwd) needs each run's own
usage: the caller passes ``runs_of(job_id)`` (the job's run
results, from its job directory) and, where a job's directory is gone, the entry itself
stands in as one run (its ``agentName`` and ``model``; backend ``unknown``).

A cost the CLI did not report (``null``) is never guessed: such runs are counted as
``unpriced`` and the cost is the sum of the known ones (``null`` if none is known).
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core.clock import epoch
from subagents.core.events import add_usage, cost_of, priced
from subagents.core.records import is_agent_event
from subagents.lifecycle.sessionlog import END_EVENT_TYPES, entries, session_path
from subagents.present import figures

if TYPE_CHECKING:
    from subagents.types import AgentEvent, CostRow, CostTotals, JobRun, JsonObject, Usage

GROUPS = ("agent", "backend", "model", "repo", "day")
UNKNOWN = "unknown"

# A job's runs (its JobResult's ``runs``).
RunsOf = Callable[[str], "Sequence[JobRun] | None"]


def session_files(home: Path, session: str | None = None) -> list[Path]:
    """One session's log (ValueError for a bad id), or every session's."""
    if session is not None:
        return [session_path(home, session)]
    directory = Path(home) / "sessions"
    try:
        return sorted(p for p in directory.iterdir() if p.suffix == ".jsonl")
    except FileNotFoundError:
        return []


def end_entries(
    home: Path, session: str | None = None, since: float | None = None
) -> list[AgentEvent]:
    """The end entries of one or every session, ended at or after *since* (epoch s)."""
    files = session_files(home, session)
    found: Iterable[JsonObject] = itertools.chain.from_iterable(entries(p) for p in files)
    if since is not None:
        from subagents.lifecycle import logindex

        # Only the entries of the window are read (a log of months is not).
        with contextlib.suppress(sqlite3.Error, OSError):
            found = logindex.since(home, files, since, "ended", END_EVENT_TYPES)
    out: list[AgentEvent] = []
    for entry in found:
        if not is_agent_event(entry) or entry["eventType"] not in END_EVENT_TYPES:
            continue
        when = epoch(entry.get("completedAt")) or epoch(entry.get("timestamp"))
        if since is not None and (when is None or when < since):
            continue
        out.append(entry)
    return out


def _zero() -> CostRow:
    return {
        "jobs": 0,
        "runs": 0,
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": None,
        "unpriced": 0,
    }


def _add(row: CostRow, usage: Usage | None, job_ids: set[str], job_id: str | None) -> None:
    row["runs"] += 1
    if job_id and job_id not in job_ids:
        job_ids.add(job_id)
        row["jobs"] += 1
    # (a record read back from disk: its usage is checked as it is read; a cost that is
    # no finite number counts as unpriced)
    cost = cost_of(usage.get("cost")) if isinstance(usage, dict) else None
    if isinstance(usage, dict):
        add_usage(row, priced(usage))
    if cost is None:
        row["unpriced"] += 1


def _day(entry: AgentEvent) -> str:
    when = epoch(entry.get("completedAt")) or epoch(entry.get("timestamp"))
    return datetime.fromtimestamp(when).strftime("%Y-%m-%d") if when is not None else UNKNOWN


def _units(
    entry: AgentEvent, by: str | None, runs_of: RunsOf | None
) -> list[tuple[str, Usage | None]]:
    """(group key, usage) for each unit the entry counts as: the job (no grouping), else
    each run of it that started (a run never started cost nothing and ran nowhere)."""
    if by is None:
        return [("total", entry.get("usage"))]
    runs = runs_of(str(entry.get("jobId"))) if runs_of and entry.get("jobId") else None
    if not runs:  # its job is gone (pruned): the entry stands in for its runs
        stand_in = {"agent": entry.get("agentName"), "model": entry.get("model")}
        key = _day(entry) if by == "day" else str(stand_in.get(by) or UNKNOWN)
        return [(key, entry.get("usage"))]
    # (the record of a run never started has its status and no paths: RunNotStarted)
    started = [run for run in runs if "paths" in run or "status" not in run]
    if by == "day":
        return [(_day(entry), run.get("usage")) for run in started]
    if by == "repo":
        from subagents.worktree import repository_of

        return [
            (repository_of(run.get("cwd"), run.get("worktree")) or UNKNOWN, run.get("usage"))
            for run in started
        ]
    if by == "agent":  # a run of no named agent is its backend's (as `top` shows it)
        return [(str(run.get("agent") or run.get("backend") or UNKNOWN), run.get("usage")) for run in started]  # fmt: skip
    return [(str(run.get(by) or UNKNOWN), run.get("usage")) for run in started]


def totals(
    entries: Iterable[AgentEvent],
    *,
    by: str | None = None,
    runs_of: RunsOf | None = None,
) -> CostTotals:
    """``{"by", "rows": [{"key", "jobs", "runs", input…totalTokens, "cost", "unpriced"}],
    "total": {…}}``; rows sorted by cost then tokens, most first (by day: oldest first).
    A row's ``runs`` counts the runs that started (with ``runs_of``), the total's the rows'."""
    if by is not None and by not in GROUPS:
        raise ValueError(f"invalid grouping {by!r}: expected one of {', '.join(GROUPS)}")
    rows: dict[str, CostRow] = {}
    jobs_in: dict[str, set[str]] = {}
    total = _zero()
    all_jobs: set[str] = set()
    for entry in entries:
        job_id = entry.get("jobId") if isinstance(entry.get("jobId"), str) else None
        units = _units(entry, by, runs_of)
        for key, usage in units:
            row = rows.setdefault(key, _zero())
            _add(row, usage, jobs_in.setdefault(key, set()), job_id)
        # The total counts the job once, whatever its runs: from the entry's summed usage.
        _add(total, entry.get("usage"), all_jobs, job_id)
    total["runs"] = sum(row["runs"] for row in rows.values())
    for row in (*rows.values(), total):  # a sum past what a float holds: unpriced
        row["cost"] = cost_of(row["cost"])
    ordered = sorted(rows.items(), key=lambda kv: (-(kv[1]["cost"] or 0), -kv[1]["totalTokens"]))
    if by == "day":
        ordered = sorted(rows.items())
    return {"by": by, "rows": [{"key": k, **v} for k, v in ordered], "total": total}


def money(cost: float | None, unpriced: int) -> str:
    """``$0.012``, ``-`` when no cost is known, with ``(+N unpriced)`` when some are not."""
    text = figures.money(cost)
    return text + (f" (+{unpriced} unpriced)" if unpriced and cost is not None else "")


def describe(total: CostRow) -> str:
    """One line for a ``totals(...)["total"]``: jobs, tokens, cost (its ``runs`` counts jobs
    unless grouped by run, so it is left out)."""
    jobs = total["jobs"]
    return (
        f"{jobs} job{'' if jobs == 1 else 's'}: "
        f"{total['totalTokens']} tokens ({total['input']} in, {total['output']} out, "
        f"cache {total['cacheRead']}/{total['cacheWrite']}), {money(total['cost'], total['unpriced'])}"
    )
