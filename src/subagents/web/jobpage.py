"""The job page: the job's state and a Gantt of its runs (kept live), and one run of it: the
transcript as it grows, then its answer, the diagnostics of a failure, an isolated run's diff
with a file list and an Apply button; Stop (with a confirmation).
What a page shows of an answer, diagnostics or diff is capped; the whole is a link away."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup

from subagents.core import paths
from subagents.core.events import count, number
from subagents.core.files import read_json
from subagents.core.records import is_run_result
from subagents.present.figures import money, tokens
from subagents.present.jobview import RunRow
from subagents.service import TERMINAL, JobStore, LiveJobs
from subagents.web import charts, memo
from subagents.web.maprows import RowsQuery
from subagents.web.markdown import render
from subagents.web.templates import render as fill
from subagents.web.templates import url
from subagents.web.transcript import first_piece

if TYPE_CHECKING:
    from subagents.types import JobState, JsonObject, RunResult

# What a page shows of an isolated run's patch, and of an answer or a failure's diagnostics
# (the run directory keeps all of them; the page links to the whole, as text).
PATCH_SHOWN = 256 * 1024
TEXT_SHOWN = 64 * 1024
# A result.json larger than this is not read for a page (its answer is streamed as text).
RESULT_READ = 32 * 1024 * 1024


@dataclass
class JobData:
    state: JobState
    rows: list[RunRow]
    run_id: str | None  # the run shown
    # A map's rows' last entries in its row log, read in the same look as its runs (None:
    # no map).
    map_entries: dict[int, JsonObject] | None = None

    @property
    def job_id(self) -> str:
        return self.state["jobId"]

    @property
    def ended(self) -> bool:
        return self.state.get("status") in TERMINAL

    @property
    def row(self) -> RunRow | None:
        return next((r for r in self.rows if r.run_id and r.run_id == self.run_id), None)


def gather(live: LiveJobs, state: JobState, run: str | None) -> JobData:
    """The job (``job_state``'s answer) with its rows; the run to show: ``run`` (one of the
    job's, checked by :func:`subagents.web.ids.target`), else its newest running run, else
    its first."""
    rows = live.rows(state, run)
    ids = [r.run_id for r in rows if r.run_id]
    if run not in ids:
        running = [r.run_id for r in rows if r.run_id and r.status not in TERMINAL]
        run = running[-1] if running else (ids[0] if ids else None)
    entries = live.map_entries(state) if state.get("mode") == "map" else None
    return JobData(state, rows, run, entries)


def run_dir(home: Path, run_id: str) -> Path:
    return paths.runs_dir(home) / run_id


def read_result(home: Path, run_id: str) -> RunResult | None:
    """The run's result.json (None: not yet, or too big to read for a page), read once while
    the file stays as it is (a stream asks at every change)."""
    path = run_dir(home, run_id) / "result.json"
    return memo.made(("result", str(path)), (path,), lambda: _read_result(path))


def _read_result(path: Path) -> RunResult | None:
    with contextlib.suppress(OSError, ValueError):
        if path.stat().st_size > RESULT_READ:
            return None
        data = read_json(path)
        if is_run_result(data):
            return data
    return None


@dataclass
class Totals:
    elapsed: float | None
    tokens: int
    cost: float | None


@dataclass
class Meter:
    """How much of a budget is used: ``used`` of ``limit``, in words ``shown``."""

    what: str
    used: float
    limit: float
    shown: str


def _meter(what: str, used: float, limit: object, word: Callable[[float], str]) -> list[Meter]:
    if not isinstance(limit, int | float) or isinstance(limit, bool) or limit <= 0:
        return []
    return [Meter(what, min(used, float(limit)), float(limit), f"{word(used)} of {word(limit)}")]


def _meters(data: JobData, totals: Totals) -> list[Meter]:
    """A running job's budget, and the shown run's, as far as used."""
    if data.ended:
        return []
    job = data.state["plan"].get("budget") or {}
    out = _meter("job tokens", totals.tokens, job.get("max_tokens"), tokens)
    out += _meter("job cost", totals.cost or 0.0, job.get("max_cost"), money)
    row = data.row
    requests = data.state["plan"].get("requests") or []
    index = data.rows.index(row) if row is not None else len(requests)
    if row is not None and row.status not in TERMINAL and index < len(requests):
        request = requests[index]
        out += _meter("run tokens", row.tokens, request.get("max_tokens"), tokens)
        out += _meter("run cost", row.cost or 0.0, request.get("max_cost"), money)
    return out


def _totals(data: JobData) -> Totals:
    state = data.state
    duration = number(state.get("durationMs"))
    if duration is not None:
        took: float | None = duration / 1000
    else:
        took = max(0.0, time.time() - (number(state.get("createdAt")) or time.time()))
    usage = state.get("usage")
    usage = usage if isinstance(usage, dict) else None
    total = count(usage.get("totalTokens") if usage else None) or sum(r.tokens for r in data.rows)
    priced = [r.cost for r in data.rows if r.cost is not None]
    cost = number(usage.get("cost")) if usage else (sum(priced) if priced else None)
    return Totals(took, total, cost)


def _timeline(data: JobData) -> Markup:
    rows, state = data.rows, data.state
    if len(rows) <= 1 and state.get("mode") not in ("parallel", "chain", "council"):
        return Markup()
    named = models(data)
    spans = [
        charts.Span(
            label=f"{i + 1}. {label(r, named[i] if i < len(named) else None)}",
            start=r.started,
            end=None
            if r.status not in TERMINAL or r.started is None
            else r.started + (r.elapsed or 0.0),
            status=r.status,
            link=url("/job/" + data.job_id, run=r.run_id) if r.run_id else "",
        )
        for i, r in enumerate(rows)
        if r.run_id
    ]
    pending = len(state["plan"].get("requests") or []) - len(spans)
    spans += [
        charts.Span(f"{len(spans) + i + 1}. waiting", None, None, "pending")
        for i in range(max(0, pending))
    ]
    return charts.gantt(spans)


def label(row: RunRow, model: object = None) -> str:
    """A run by what it does: its task (its first line, short) and who does it (its agent,
    and its model when the plan names one)."""
    task = row.task.strip().splitlines()[0] if row.task.strip() else ""
    task = task if len(task) <= 60 else task[:59] + "…"
    who = f"{row.agent} · {model}" if isinstance(model, str) and model else row.agent
    return f"{task} ({who})" if task else who


def models(data: JobData) -> list[object]:
    """Each run's model as its plan names it (None: the backend's default), in run order."""
    return [r.get("model") for r in data.state["plan"].get("requests") or []]


def render_live(data: JobData, home: Path, rows: RowsQuery | None = None) -> str:
    """The part of the page kept live: the job's state and actions, its runs over time, its
    runs, a council's members, a map's rows (the page of them ``rows`` asks for), the Send
    form while the shown run goes on."""
    from subagents.web.council import council_view
    from subagents.web.maprows import map_rows

    council = data.state.get("council")
    totals = _totals(data)
    return fill(
        "_job_live.html",
        data=data,
        status=str(data.state.get("status") or "pending"),
        totals=totals,
        meters=_meters(data, totals),
        models=models(data),
        timeline=_timeline(data),
        council=council_view(council) if council is not None else None,
        map_rows=map_rows(JobStore(home), data.state, data.map_entries, rows or RowsQuery()),
        label=label,
    )


# ---- a run's end ------------------------------------------------------------------------


@dataclass
class PatchFile:
    name: str
    added: int = 0
    removed: int = 0
    lines: list[tuple[str, str]] = field(default_factory=list)  # (class, text)


def patch_files(patch: str) -> list[PatchFile]:
    """Each file of a ``git diff``: its name, lines added and removed, its lines classed."""
    files: list[PatchFile] = []
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("diff --git ") or not files:
            name = line.split(" b/", 1)[-1] if " b/" in line else line[11:]
            files.append(PatchFile(name))
            in_hunk = False
        now = files[-1]
        cls = ""
        if line.startswith("@@"):
            in_hunk, cls = True, "hunk"
        elif in_hunk and line.startswith("+"):
            now.added, cls = now.added + 1, "add"
        elif in_hunk and line.startswith("-"):
            now.removed, cls = now.removed + 1, "del"
        elif line.startswith(("diff --git", "index ", "--- ", "+++ ")):
            cls = "meta"
        now.lines.append((cls, line))
    return files


def _diff(result: RunResult, home: Path) -> dict[str, object] | None:
    """What the page shows of an isolated run's changes (None: it ran in place)."""
    wt = result.get("worktree")
    if not isinstance(wt, dict):
        return None
    run_id = str(result.get("runId") or "")
    # Always the run directory's own patch, never a path result.json names.
    patch_file = run_dir(home, run_id) / "changes.patch"
    try:
        with open(patch_file, "rb") as f:
            raw = f.read(PATCH_SHOWN + 1)
    except OSError:
        raw = b""
    partial = result.get("status") != "completed"
    return {
        "wt": wt,
        "run_id": run_id,
        "changed": count(wt.get("filesChanged")),
        "insertions": count(wt.get("insertions")),
        "deletions": count(wt.get("deletions")),
        "files": patch_files(raw[:PATCH_SHOWN].decode("utf-8", "replace")),
        "more": len(raw) > PATCH_SHOWN,
        "whole": url(f"/runs/{run_id}/changes.patch"),
        # A run that did not complete may have left its work half done: the button says so.
        "partial": partial,
    }


def _shown(text: str) -> tuple[Markup, bool]:
    """Markdown as HTML, cut at :data:`TEXT_SHOWN` characters (True: it was); made once for
    every client of the run."""
    shown = text[:TEXT_SHOWN]
    return memo.made(("markdown", shown), (), lambda: render(shown)), len(text) > TEXT_SHOWN


def render_run_end(result: RunResult | None, home: Path) -> str:
    """What a run has once it ended: its answer, or the diagnostics of its failure; its diff."""
    if result is None:
        return ""
    status = str(result.get("status"))
    text = (
        str(result.get("finalText") or "")
        if status == "completed"
        else str(result.get("diagnostics") or result.get("errorMessage") or status)
    )
    html, cut = _shown(text)
    run_id = str(result.get("runId") or "")
    return fill(
        "_run_end.html",
        status=status,
        html=html,
        cut=cut,
        whole=url(f"/runs/{run_id}/answer.txt"),
        diff=_diff(result, home),
    )


def _model_of(data: JobData) -> object:
    named = models(data)
    index = data.rows.index(data.row) if data.row is not None else len(named)
    return named[index] if index < len(named) else None


def render_body(data: JobData, home: Path, rows: RowsQuery | None = None, **frame: str) -> str:
    """The whole job page (``frame``: the base template's title, csrf, active, name;
    ``rows``: which of a map's rows it shows)."""
    rows = rows or RowsQuery()
    row = data.row
    result = read_result(home, data.run_id) if data.run_id and row else None
    piece = (
        first_piece(run_dir(home, data.run_id) / "transcript.md", final=result is not None)
        if data.run_id and row
        else None
    )
    # The stream sends what a run has at its end, unless this page has it already.
    stream = url(
        "/events/job/" + data.job_id,
        run=data.run_id,
        ended="1" if result else None,
        **rows.params(),
    )
    return fill(
        "job.html",
        data=data,
        row=row,
        live=Markup(render_live(data, home, rows)),
        run_end=Markup(render_run_end(result, home)),
        piece=piece,
        stream=stream,
        whole=url(f"/runs/{data.run_id}/transcript.md") if data.run_id else "",
        label=label,
        model=_model_of(data),
        **frame,
    )
