"""The fleet page: every recent job, grouped by repository (an isolated run's, else the git
root of its cwd) and lifecycle session, one row per run in the words of ``subagents top``;
filters (status, repository, backend, since) are the page's query string."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import JobRow

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from subagents.lifecycle.history import parse_since
from subagents.present.jobview import RunRow
from subagents.present.outcome import limit_of
from subagents.service import TERMINAL, LiveJobs
from subagents.web import memo
from subagents.web.needs import Need, WaitingSource, needs, nothing_waiting
from subagents.web.templates import render, url
from subagents.worktree import repository_of

STATUSES = ("running", "stalled", "completed", "failed", "aborted", "timeout")
NO_REPO = "(not in a git repository)"
TASK_LEN = 120


@dataclass(frozen=True)
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
    status: str  # the job's, or "waiting" or "stalled" while a run of it is
    # A failed job's own budget (its job.json's ``limit``) where no run of it records one:
    # its runs' sum reached it, or it kept a run (a map's every row) from starting.
    limit: Mapping[str, object] | None = None

    @property
    def job_id(self) -> str:
        return str(self.job["jobId"])

    @property
    def task(self) -> str:
        task = self.rows[0].task if self.rows else ""
        return task + (f" (+{len(self.rows) - 1} more)" if len(self.rows) > 1 else "")

    @property
    def short_task(self) -> str:
        task = self.task
        return task if len(task) <= TASK_LEN else task[: TASK_LEN - 1] + "…"


@dataclass
class FleetView:
    jobs: list[JobView] = field(default_factory=list)
    repos: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    shown_of: int = 0
    needs: list[Need] = field(default_factory=list)  # what wants a person, at the top

    @property
    def running(self) -> int:
        return sum(v.status not in TERMINAL for v in self.jobs)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for v in self.jobs for r in v.rows)

    @property
    def cost(self) -> float | None:
        costs = [r.cost for v in self.jobs for r in v.rows if r.cost is not None]
        return sum(costs) if costs else None

    @property
    def groups(self) -> list[tuple[str, list[tuple[str, list[JobView]]]]]:
        """The jobs by repository, then session, newest first (and so are the groups)."""
        out: dict[str, dict[str, list[JobView]]] = {}
        for view in self.jobs:
            session = str(view.job.get("session") or "(no session)")
            out.setdefault(view.repo, {}).setdefault(session, []).append(view)
        return [(repo, list(sessions.items())) for repo, sessions in out.items()]


def _repo(rows: list[RunRow]) -> str:
    for row in rows:
        repo = row.worktree_repo or repository_of(row.cwd)
        if repo:
            return repo
    return NO_REPO


def _status(job: JobRow, rows: list[RunRow]) -> str:
    status = str(job.get("status") or "pending")
    for now in ("waiting", "stalled"):  # (a run waiting on a decision: docs/approvals.md)
        if status not in TERMINAL and any(r.status == now for r in rows):
            return now
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


# Each failed job's budget as its job.json said it (keyed by the file as it was: a finished
# job's record stays as it is), so a drawing of the fleet reads no record again.
_budgets: dict[tuple[str, object], Mapping[str, object] | None] = {}
BUDGETS_KEPT = 1024


def _job_budget(live: LiveJobs, job_id: str) -> Mapping[str, object] | None:
    """The budget a failed job's record says it reached or found spent (None: none)."""
    key = (job_id, memo.identity(live.store.path(job_id)))
    if key not in _budgets:
        try:
            found = limit_of(live.store.load(job_id))
        except (OSError, ValueError):
            found = None
        if len(_budgets) >= BUDGETS_KEPT:
            _budgets.clear()
        _budgets[key] = found if isinstance(found, Mapping) else None
    return _budgets[key]


def gather(live: LiveJobs, f: Filters, waiting: WaitingSource = nothing_waiting) -> FleetView:
    """The newest jobs that pass ``f`` (a filter with a problem is left out: the page says
    it), and what of them needs its user (``waiting``: the requests waiting on a person)."""
    f = f.effective()
    since = parse_since(f.since) if f.since else None
    out = FleetView()
    repos: set[str] = set()
    backends: set[str] = set()
    listed = live.jobs()
    for job, rows in listed:
        view = JobView(job, rows, _repo(rows), _status(job, rows))
        if view.status == "failed" and not any(r.limit for r in rows):
            view.limit = _job_budget(live, view.job_id)
        repos.add(view.repo)
        backends.update(r.backend for r in rows if r.backend != "-")
        if _keep(view, f, since):
            out.jobs.append(view)
    out.repos = sorted(repos)
    out.backends = sorted(backends)
    out.shown_of = len(listed)
    out.needs = needs(out.jobs, waiting())
    return out


def render_fleet(fleet: FleetView) -> str:
    """The live part of the fleet page: totals, what needs you, a table per repository and
    session."""
    return render("_fleet.html", fleet=fleet)


def render_page_body(fleet: FleetView, f: Filters, **frame: str) -> str:
    """The whole fleet page (``frame``: the base template's title, csrf, active, name)."""
    choices = {
        "statuses": list(STATUSES),
        "repos": list(dict.fromkeys([*fleet.repos, *([f.repo] if f.repo else [])])),
        "backends": list(dict.fromkeys([*fleet.backends, *([f.backend] if f.backend else [])])),
    }
    return render(
        "fleet.html",
        fleet=fleet,
        filters=f,
        problems=f.problems(),
        stream=url("/events/fleet", **f.params()),
        **choices,
        **frame,
    )
