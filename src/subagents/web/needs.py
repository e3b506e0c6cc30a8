"""The fleet's "Needs you": what wants a person, most pressing first, one entry a job.

- **waiting**: a run of it waits on a person's decision (an item of the approvals inbox);
- **over budget**: a run of it reached its budget (its own or its job's) in the last day,
  or its job's budget was spent before a run of it started;
- **stalled**: a run of it has made no progress for a while;
- **failed**: it failed or timed out in the last day.

What waits on a person comes from outside the store's records: a :data:`WaitingSource`
(the approvals inbox: :func:`inbox_waiting`) hands the items over, and :func:`needs` puts
each under its job; with none, nothing is waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from subagents.present.outcome import live_notes

if TYPE_CHECKING:
    from pathlib import Path

    from subagents.present.jobview import RunRow
    from subagents.types import JobRow


class JobView(Protocol):
    """A job as the fleet shows it (``fleet.JobView``)."""

    job: JobRow
    rows: list[RunRow]
    status: str
    limit: Mapping[str, object] | None  # a budget that kept a run of it from starting

    @property
    def job_id(self) -> str: ...

    @property
    def short_task(self) -> str: ...


# A failed job, or one over budget, stays in "needs you" this long (seconds).
NEEDS_WINDOW = 24 * 3600

Kind = Literal["waiting", "budget", "stalled", "failed"]
# How each kind is named on the page (its badge), in the order they are listed.
KINDS: dict[Kind, str] = {
    "waiting": "waiting on you",
    "budget": "over budget",
    "stalled": "stalled",
    "failed": "failed",
}


@dataclass(frozen=True)
class Waiting:
    """One request of a run waiting on a person: the inbox's ``item`` id (what a decision
    names), its run and job, what the child wants in words, and since when (epoch s);
    ``question``: the child asks the user a question (answered, not approved)."""

    item: str
    job_id: str
    run_id: str
    what: str
    since: float
    question: bool = False


# The pending requests, whenever the fleet is drawn (called in a worker thread).
WaitingSource = Callable[[], Iterable[Waiting]]


def nothing_waiting() -> list[Waiting]:
    """The source while no approvals inbox is plugged in: nothing waits."""
    return []


@dataclass(frozen=True)
class Need:
    kind: Kind
    view: JobView
    why: str  # in words: what it waits for, which budget, what failed
    waiting: tuple[Waiting, ...] = ()  # (kind "waiting") its pending items, oldest first

    @property
    def label(self) -> str:
        return KINDS[self.kind]


def _over_budget(view: JobView) -> str:
    """Which budget a run of the job reached, in words (empty: none did)."""
    for limit in [*(row.limit for row in view.rows), view.limit]:
        if limit:
            return "; ".join(live_notes({"limit": limit}))
    return ""


def _failed(view: JobView) -> str:
    if view.status not in ("failed", "timeout"):
        return ""
    failed = [r for r in view.rows if r.status in ("failed", "timeout")]
    return failed[0].activity if failed and failed[0].activity else view.status


def need_of(view: JobView, waiting: tuple[Waiting, ...], now: float) -> Need | None:
    """What of ``view`` needs its user, most pressing first (None: nothing)."""
    if waiting:
        first = waiting[0].what + (f" (+{len(waiting) - 1} more)" if len(waiting) > 1 else "")
        return Need("waiting", view, first, waiting)
    if view.status == "stalled":
        return Need("stalled", view, "a run has made no progress for a while")
    if float(view.job.get("createdAt") or 0) < now - NEEDS_WINDOW:
        return None
    budget = _over_budget(view)
    if budget:
        return Need("budget", view, budget)
    failed = _failed(view)
    return Need("failed", view, failed) if failed else None


def needs(views: Iterable[JobView], waiting: Iterable[Waiting]) -> list[Need]:
    """What needs its user among ``views``: waiting first, then over budget, stalled,
    failed (newest first within each). A waiting item of a job not among them is left out
    (the fleet shows the newest jobs, filtered)."""
    by_job: dict[str, list[Waiting]] = {}
    for item in sorted(waiting, key=lambda w: w.since):
        by_job.setdefault(item.job_id, []).append(item)
    now = time.time()
    found = [need_of(v, tuple(by_job.get(v.job_id, ())), now) for v in views]
    order: Mapping[str, int] = {kind: i for i, kind in enumerate(KINDS)}
    return sorted((n for n in found if n is not None), key=lambda n: order[n.kind])


def inbox_waiting(home: Path) -> WaitingSource:
    """The approvals inbox (docs/approvals.md) as the fleet's source of what waits: each
    pending item of a job's run."""

    def source() -> list[Waiting]:
        from subagents.service import inbox

        return [
            Waiting(
                i["id"],
                i["jobId"],
                i["runId"],
                i["summary"],
                i["requestedAt"],
                i.get("kind") == "question",
            )
            for i in inbox(home=home)
            if i["jobId"]
        ]

    return source
