"""The job page: the job's state and a Gantt of its runs (kept live), and one run of it: the
transcript as it grows, then its answer, the diagnostics of a failure, an isolated run's diff
with an Apply button; Stop (with a confirmation) for the job."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import paths
from subagents.core.clock import epoch
from subagents.core.events import count, number
from subagents.core.files import read_json
from subagents.core.records import is_run_result
from subagents.jobs import TERMINAL, LiveJobs
from subagents.present.jobview import RunRow
from subagents.web import charts
from subagents.web.council import render_council
from subagents.web.fleet import run_cells
from subagents.web.layout import badge, esc, href, numbers, url
from subagents.web.markdown import render
from subagents.web.transcript import first_piece

if TYPE_CHECKING:
    from subagents.types import JobState, RunResult

# The diff shown on the page (changes.patch keeps all of it).
PATCH_SHOWN = 512 * 1024


@dataclass
class JobData:
    state: JobState
    rows: list[RunRow]
    run_id: str | None  # the run shown

    @property
    def job_id(self) -> str:
        return self.state["jobId"]

    @property
    def ended(self) -> bool:
        return self.state.get("status") in TERMINAL


def gather(live: LiveJobs, state: JobState, run: str | None) -> JobData:
    """The job (``job_state``'s answer) with its rows; the run to show: ``run`` when it is one
    of the job's, else its newest running run, else its first."""
    rows = live.rows(state)
    ids = [r.run_id for r in rows if r.run_id]
    if run not in ids:
        running = [r.run_id for r in rows if r.run_id and r.status not in TERMINAL]
        run = running[-1] if running else (ids[0] if ids else None)
    return JobData(state, rows, run)


def run_dir(home: Path, run_id: str) -> Path:
    return paths.runs_dir(home) / run_id


def read_result(home: Path, run_id: str) -> RunResult | None:
    with contextlib.suppress(OSError, ValueError):
        data = read_json(run_dir(home, run_id) / "result.json")
        if is_run_result(data):
            return data
    return None


def _when(ts: object) -> str:
    value = epoch(ts)
    return "-" if value is None else datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def render_live(data: JobData) -> str:
    """The part of the page kept live: the job's state, its runs over time, its runs."""
    state = data.state
    status = str(state.get("status") or "pending")
    rows = data.rows
    duration = number(state.get("durationMs"))
    if duration is not None:
        took: float | None = duration / 1000
    else:
        took = max(0.0, time.time() - (number(state.get("createdAt")) or time.time()))
    usage = state.get("usage")
    usage = usage if isinstance(usage, dict) else None
    total = count(usage.get("totalTokens") if usage else None) or sum(r.tokens for r in rows)
    priced = [r.cost for r in rows if r.cost is not None]
    cost = number(usage.get("cost")) if usage else (sum(priced) if priced else None)
    elapsed, toks, money = numbers(took, total, cost)
    stop = (
        f'<button type="button" class="danger" data-action="stop" data-job="{esc(data.job_id)}">'
        "Stop…</button>"
        if status not in TERMINAL
        else ""
    )
    note = ""
    if state.get("errorMessage"):
        note = f'<p class="problem">{esc(state["errorMessage"])}</p>'
    out = [
        f'<div class="jobhead" data-status="{esc(status)}"><h1>job <code>{esc(data.job_id)}</code> '
        f"{badge(status, 'job-status')} {stop}</h1>"
        f'<p class="facts">{esc(state.get("mode"))} · started {esc(_when(state.get("createdAt")))}'
        f" · {esc(elapsed)} · {esc(toks)} tokens · {esc(money)} · session "
        f"<code>{esc(state.get('session') or '-')}</code></p>{note}</div>"
    ]
    if len(rows) > 1 or state.get("mode") in ("parallel", "chain", "council"):
        spans = [
            charts.Span(
                label=f"{i + 1}. {r.agent}",
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
        out.append(f'<section class="timeline"><h2>Timeline</h2>{charts.gantt(spans)}</section>')
    out.append(
        '<table class="runs"><thead><tr><th>#</th><th>agent</th><th>backend</th><th>status</th>'
        "<th>elapsed</th><th>tokens</th><th>cost</th><th>activity / answer</th></tr></thead><tbody>"
    )
    for i, row in enumerate(rows):
        chosen = ' class="chosen"' if row.run_id and row.run_id == data.run_id else ""
        link = href("/job/" + data.job_id, run=row.run_id)
        out.append(
            f'<tr data-run="{esc(row.run_id or "")}"{chosen}><td>{i + 1}</td>{run_cells(row, link)}</tr>'
        )
    out.append("</tbody></table>")
    council = state.get("council")
    if council is not None:  # the members side by side and the verdict
        out.append(render_council(council))
    return "".join(out)


def _patch_files(patch: str) -> list[tuple[str, int, int]]:
    """(file, lines added, lines removed) for each file of a ``git diff``."""
    files: list[tuple[str, int, int]] = []
    name, added, removed = None, 0, 0
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            if name is not None:
                files.append((name, added, removed))
            name = line.split(" b/", 1)[-1] if " b/" in line else line[11:]
            added = removed = 0
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            added += 1
        elif in_hunk and line.startswith("-"):
            removed += 1
    if name is not None:
        files.append((name, added, removed))
    return files


def _patch_html(patch: str) -> str:
    lines = []
    for line in patch.splitlines():
        cls = ""
        if line.startswith(("diff --git", "index ", "--- ", "+++ ")):
            cls = "meta"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        lines.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return "\n".join(lines)


def render_diff(result: RunResult, home: Path) -> str:
    """An isolated run's changes: files with +/-, the patch, and Apply."""
    wt = result.get("worktree")
    if not isinstance(wt, dict):
        return ""
    if wt.get("error"):
        return f'<section class="diff"><h2>Changes</h2><p class="problem">{esc(wt["error"])}</p></section>'
    if not wt.get("commit") or wt.get("commit") == wt.get("base"):
        return '<section class="diff"><h2>Changes</h2><p>No changes (its branch was removed).</p></section>'
    run_id = str(result.get("runId") or "")
    patch_file = Path(str(wt.get("patch") or run_dir(home, run_id) / "changes.patch"))
    try:
        with open(patch_file, "rb") as f:
            raw = f.read(PATCH_SHOWN + 1)
    except OSError:
        raw = b""
    patch = raw[:PATCH_SHOWN].decode("utf-8", "replace")
    more = (
        f'<p class="muted">The patch is longer than shown: {esc(patch_file)}</p>'
        if len(raw) > PATCH_SHOWN
        else ""
    )
    files = "".join(
        f'<tr><td><code>{esc(name)}</code></td><td class="num add">+{a}</td><td class="num del">-{d}</td></tr>'
        for name, a, d in _patch_files(patch)
    )
    changed = count(wt.get("filesChanged"))
    # A run that did not complete may have left its work half done: the button says so.
    partial = result.get("status") != "completed"
    label = "Apply these partial changes" if partial else "Apply to the working tree"
    marked = ' data-partial="1"' if partial else ""
    return (
        f'<section class="diff"><h2>Changes</h2><p>branch <code>{esc(wt.get("branch"))}</code> · '
        f"{changed} file{'' if changed == 1 else 's'} changed, +{count(wt.get('insertions'))} "
        f"-{count(wt.get('deletions'))} · into <code>{esc(wt.get('repo'))}</code></p>"
        f'<p><button type="button" data-action="apply" data-run="{esc(run_id)}"'
        f"{marked}>{label}</button> "
        '<span id="apply-result" role="status"></span></p>'
        f'<table class="files">{files}</table>{more}<pre class="patch">{_patch_html(patch)}</pre></section>'
    )


def render_run_end(result: RunResult | None, home: Path) -> str:
    """What a run has once it ended: its answer, or the diagnostics of its failure; its diff."""
    if result is None:
        return ""
    out = []
    status = str(result.get("status"))
    if status == "completed":
        out.append(
            f'<section class="answer"><h2>Answer</h2>{render(str(result.get("finalText") or ""))}</section>'
        )
    else:
        body = result.get("diagnostics") or result.get("errorMessage") or status
        out.append(
            f'<section class="diagnostics"><h2>Why it {esc(status)}</h2>{render(str(body))}</section>'
        )
    out.append(render_diff(result, home))
    return "".join(out)


def render_send(row: RunRow | None) -> str:
    """Send, for a run still going: a message to its child, a steer (taken at the next
    point its CLI allows) or a follow-up (taken when it would otherwise end), posted to
    ``/api/runs/<run>/send``. The receipt, or why not, is said beside it."""
    if row is None or row.run_id is None or row.status in TERMINAL:
        return ""
    return (
        f'<form id="send-form" class="send" data-run="{esc(row.run_id)}">'
        '<label for="send-text">Message to the child</label>'
        '<textarea id="send-text" name="text" rows="3" required></textarea>'
        '<p><select id="send-mode" name="mode">'
        '<option value="steer">steer: now, after its current step</option>'
        '<option value="follow-up">follow-up: when it would end</option>'
        '</select> <button type="submit" id="send-button">Send</button></p>'
        '<p id="send-result" role="status"></p></form>'
    )


def render_body(data: JobData, home: Path) -> str:
    row = next((r for r in data.rows if r.run_id and r.run_id == data.run_id), None)
    live = render_live(data)
    stream = href("/events/job/" + data.job_id, run=data.run_id)
    dialog = (
        '<dialog id="stop-dialog"><form method="dialog">'
        f"<p>Stop job <code>{esc(data.job_id)}</code>? Its runs are killed.</p>"
        '<button value="yes" id="stop-yes" class="danger">Yes, stop it</button> '
        '<button value="no" id="stop-no">No</button></form></dialog>'
        '<p id="stop-result" role="status"></p>'
    )
    if data.run_id is None or row is None:
        return f'<div id="job-live" data-stream="{stream}">{live}</div>{dialog}<p>No run has started yet.</p>'
    result = read_result(home, data.run_id)
    # The stream sends what a run has at its end, unless this page has it already.
    stream = href("/events/job/" + data.job_id, run=data.run_id, ended="1" if result else None)
    piece = first_piece(run_dir(home, data.run_id) / "transcript.md", final=result is not None)
    whole = href(f"/runs/{data.run_id}/transcript.md")
    skipped = (
        f'<p class="muted">The first {piece.skipped} bytes of the transcript are not shown '
        f'here: <a href="{whole}">the whole transcript</a> (as text).</p>'
        if piece.skipped
        else ""
    )
    return (
        f'<div id="job-live" data-stream="{stream}" data-offset="{piece.offset}">{live}</div>{dialog}'
        f'<section class="run"><h2>Run <code>{esc(data.run_id)}</code> · {esc(row.agent)} '
        f"({esc(row.backend)})</h2>"
        f'<p class="facts">in <code>{esc(row.cwd)}</code></p>'
        f'<details class="task"><summary>Task</summary><pre>{esc(row.task)}</pre></details>'
        f"{render_send(row)}"
        f'<div id="run-end">{render_run_end(result, home)}</div>'
        f'<h2>Transcript</h2>{skipped}<div id="transcript" class="transcript">{piece.html}</div>'
        "</section>"
    )
