"""The fleet page: every recent job, grouped by repository (an isolated run's, else the git
root of its cwd) and lifecycle session, one row per run in the words of ``subagents top``;
filters (status, repository, backend, since) are the page's query string."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import JobRow

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from subagents.jobs import TERMINAL, LiveJobs
from subagents.lifecycle.history import parse_since
from subagents.present.jobview import RunRow
from subagents.web.layout import badge, esc, href, numbers
from subagents.worktree import repository_of

STATUSES = ("running", "stalled", "completed", "failed", "aborted", "timeout")
NO_REPO = "(not in a git repository)"
TASK_LEN = 120


@dataclass
class Filters:
    status: str = ""
    repo: str = ""
    backend: str = ""
    since: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        return cls(**{f.name: str(query.get(f.name) or "").strip() for f in fields(cls)})

    def params(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    def problems(self) -> dict[str, str]:
        """What is wrong with a filter, by its name (the page says it and leaves it out)."""
        out = {}
        if self.status and self.status not in STATUSES:
            out["status"] = f"{self.status!r} is none of {', '.join(STATUSES)}"
        if self.since:
            try:
                parse_since(self.since)
            except ValueError as exc:
                out["since"] = str(exc)
        return out

    def effective(self) -> Filters:
        return Filters(**{k: v for k, v in self.params().items() if k not in self.problems()})


@dataclass
class JobView:
    job: JobRow
    rows: list[RunRow]
    repo: str
    status: str  # the job's, or "stalled" while a run of it is

    @property
    def job_id(self) -> str:
        return str(self.job["jobId"])


@dataclass
class FleetView:
    jobs: list[JobView] = field(default_factory=list)
    repos: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    shown_of: int = 0


def _repo(rows: list[RunRow]) -> str:
    for row in rows:
        repo = row.worktree_repo or repository_of(row.cwd)
        if repo:
            return repo
    return NO_REPO


def _status(job: JobRow, rows: list[RunRow]) -> str:
    status = str(job.get("status") or "pending")
    if status not in TERMINAL and any(r.status == "stalled" for r in rows):
        return "stalled"
    return status


def _keep(view: JobView, f: Filters, since: float | None) -> bool:
    if f.status == "running" and view.status in TERMINAL:
        return False
    if f.status and f.status != "running" and view.status != f.status:
        return False
    if f.repo and view.repo != f.repo:
        return False
    if f.backend and all(r.backend != f.backend for r in view.rows):
        return False
    return since is None or float(view.job.get("createdAt") or 0) >= since


def gather(live: LiveJobs, f: Filters) -> FleetView:
    """The newest jobs that pass ``f`` (a filter with a problem is left out: the page says it)."""
    f = f.effective()
    since = parse_since(f.since) if f.since else None
    out = FleetView()
    repos: set[str] = set()
    backends: set[str] = set()
    listed = live.jobs()
    for job, rows in listed:
        view = JobView(job, rows, _repo(rows), _status(job, rows))
        repos.add(view.repo)
        backends.update(r.backend for r in rows if r.backend != "-")
        if _keep(view, f, since):
            out.jobs.append(view)
    out.repos = sorted(repos)
    out.backends = sorted(backends)
    out.shown_of = len(listed)
    return out


def run_cells(row: RunRow, link: str) -> str:
    """A run's cells in the words of ``subagents top``; its agent links to ``link`` (a run
    that has started)."""
    took, toks, cost = numbers(row.elapsed, row.tokens, row.cost)
    agent = f'<a href="{link}">{esc(row.agent)}</a>' if row.run_id else esc(row.agent)
    return (
        f'<td class="agent">{agent}</td><td>{esc(row.backend)}</td>'
        f'<td class="run-status">{badge(row.status)}</td>'
        f'<td class="num">{esc(took)}</td><td class="num">{esc(toks)}</td>'
        f'<td class="num">{esc(cost)}</td><td class="activity">{esc(row.activity)}</td>'
    )


def _job_rows(view: JobView) -> str:
    job = view.job
    rows = view.rows
    task = rows[0].task if rows else ""
    if len(rows) > 1:
        task += f" (+{len(rows) - 1} more)"
    short = task if len(task) <= TASK_LEN else task[: TASK_LEN - 1] + "…"
    first = (
        f'<td rowspan="{len(rows)}" class="job"><a href="{href("/job/" + view.job_id)}">'
        f"{esc(view.job_id)}</a><br>{badge(view.status, 'job-status')} "
        f'<span class="mode">{esc(job.get("mode") or "")}</span></td>'
        f'<td rowspan="{len(rows)}" class="task" title="{esc(task)}">{esc(short)}</td>'
    )
    out = [
        f'<tbody class="job-rows" data-job="{esc(view.job_id)}" data-status="{esc(view.status)}">'
    ]
    for i, row in enumerate(rows):
        cells = run_cells(row, href("/job/" + view.job_id, run=row.run_id))
        out.append(f'<tr data-run="{esc(row.run_id or "")}">{first if i == 0 else ""}{cells}</tr>')
    out.append("</tbody>")
    return "".join(out)


HEAD = (
    "<thead><tr><th>job</th><th>task</th><th>agent</th><th>backend</th><th>status</th>"
    "<th>elapsed</th><th>tokens</th><th>cost</th><th>activity / answer</th></tr></thead>"
)


def render_fleet(fleet: FleetView) -> str:
    """The live part of the fleet page: totals, then a table per repository and session."""
    running = sum(v.status not in TERMINAL for v in fleet.jobs)
    total_tokens = sum(r.tokens for v in fleet.jobs for r in v.rows)
    costs = [r.cost for v in fleet.jobs for r in v.rows if r.cost is not None]
    _, toks, cost = numbers(None, total_tokens, sum(costs) if costs else None)
    out = [
        f'<p class="totals">{len(fleet.jobs)} jobs (of the newest {fleet.shown_of}) · '
        f"{running} running · {esc(toks)} tokens · {esc(cost)}</p>"
    ]
    if not fleet.jobs:
        out.append('<p class="empty">No jobs here yet.</p>')
    groups: dict[str, dict[str, list[JobView]]] = {}
    for view in fleet.jobs:  # newest first, and so are the groups
        session = str(view.job.get("session") or "(no session)")
        groups.setdefault(view.repo, {}).setdefault(session, []).append(view)
    for repo, sessions in groups.items():
        out.append(f'<section class="repo" data-repo="{esc(repo)}"><h2>{esc(repo)}</h2>')
        for session, views in sessions.items():
            out.append(f'<h3>session <code>{esc(session)}</code></h3><table class="runs">{HEAD}')
            out.extend(_job_rows(v) for v in views)
            out.append("</table>")
        out.append("</section>")
    return "".join(out)


def _options(name: str, choices: list[str], chosen: str, every: str) -> str:
    opts = [f'<option value="">{esc(every)}</option>']
    for choice in dict.fromkeys([*choices, *([chosen] if chosen else [])]):
        sel = " selected" if choice == chosen else ""
        opts.append(f'<option value="{esc(choice)}"{sel}>{esc(choice)}</option>')
    return (
        f'<label>{name} <select name="{name}" class="autosubmit">{"".join(opts)}</select></label>'
    )


def render_page_body(fleet: FleetView, f: Filters) -> str:
    problems = f.problems()
    form = (
        '<form class="filters" method="get" action="/">'
        + _options("status", list(STATUSES), f.status, "any status")
        + _options("repo", fleet.repos, f.repo, "every repository")
        + _options("backend", fleet.backends, f.backend, "every backend")
        + f'<label>since <input name="since" value="{esc(f.since)}" placeholder="1d, 2h, 2026-01-05" size="12"></label>'
        + '<button type="submit">Filter</button> <a href="/">clear</a></form>'
    )
    note = "".join(
        f'<p class="problem">{esc(k)}: {esc(v)} (ignored)</p>' for k, v in problems.items()
    )
    stream = href("/events/fleet", **f.params())
    return (
        f"<h1>Fleet</h1>{form}{note}"
        f'<div id="fleet" data-stream="{stream}" data-at="{time.time():.0f}">'
        f"{render_fleet(fleet)}</div>"
    )
