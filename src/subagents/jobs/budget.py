"""A job's budget: the most model turns, tokens and cost its runs may use together
(``max_turns`` … of a job spec), counted from their usage events.

A run starts with the least of its own limit and what the job has left (a chain's later
steps get what the earlier ones did not use); a run that would start with nothing left is
not started. Runs going side by side are told when their sum reaches the limit
(``runs.tell_limit``): each then wraps up (or is stopped) as at its own limit.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from subagents.runs import RunRequest

if TYPE_CHECKING:
    from subagents.types import BudgetSpec, Event, LimitKind, LimitRecord


def describe(kind: str, value: float) -> str:
    if kind == "cost":
        return f"${value:.2f}" if value >= 0.01 else f"${value:.4g}"
    return f"{int(value)} {kind}"


def refused(spent: LimitRecord) -> str:
    """Why a run was not started, for the job's budget ``spent``."""
    kind, limit, used = spent["kind"], spent["limit"], spent["used"]
    return (
        f"not started: the job's {kind} limit of {describe(kind, limit)} is spent"
        f" ({describe(kind, used)} used)"
    )


class JobBudget:
    def __init__(self, budget: BudgetSpec, runs: int) -> None:
        given: dict[LimitKind, float | None] = {
            "turns": budget.get("max_turns"),
            "tokens": budget.get("max_tokens"),
            "cost": budget.get("max_cost"),
        }
        # kind -> the job's limit
        self.limits: dict[LimitKind, float] = {
            kind: float(value) for kind, value in given.items() if value is not None
        }
        # run (its key: a job's index, a map's slot per run) -> what it has used
        self._used: dict[int, dict[LimitKind, float]] = {i: {} for i in range(runs)}
        self._lock = threading.Lock()
        self.reached: tuple[LimitKind, float, float] | None = None

    def __bool__(self) -> bool:
        return bool(self.limits)

    def total(self, kind: LimitKind) -> float:
        with self._lock:
            return sum(used.get(kind, 0.0) for used in self._used.values())

    def spent(self) -> LimitRecord | None:
        """The limit with nothing left, for which no further run starts, or None."""
        for kind, limit in self.limits.items():
            used = self.total(kind)
            if used >= limit:
                return {"kind": kind, "limit": limit, "used": used, "action": "refuse", "scope": "job"}  # fmt: skip
        return None

    def for_run(self, req: RunRequest) -> RunRequest:
        """``req`` bounded by what the job has left, where that is less than its own."""
        job_used: dict[str, float] = {}

        def left(kind: LimitKind, own: float | None) -> float | None:
            """What the job has left of ``kind`` where it bounds the run more than its own."""
            limit = self.limits.get(kind)
            if limit is None:
                return None
            used = self.total(kind)
            if own is not None and limit - used >= own:
                return None
            job_used[kind] = used
            return limit - used

        turns = left("turns", req.max_turns)
        tokens = left("tokens", req.max_tokens)
        cost = left("cost", req.max_cost)
        if not job_used:
            return req
        return replace(
            req,
            max_turns=req.max_turns if turns is None else max(1, int(turns)),
            max_tokens=req.max_tokens if tokens is None else max(1, int(tokens)),
            max_cost=req.max_cost if cost is None else max(cost, 1e-9),
            job_used=job_used,
        )

    def add(self, key: int, used: dict[LimitKind, float]) -> None:
        """What a run counted elsewhere used (a resumed map's rows done before)."""
        with self._lock:
            self._used[key] = dict(used)

    def observe(self, index: int, event: Event) -> tuple[LimitKind, float, float] | None:
        """Take a run's usage event; the limit the job's total has just reached, if one has
        (once: what it was, and what was used)."""
        if event["type"] != "usage" or not self.limits:
            return None
        seen: dict[LimitKind, object] = {
            "turns": event.get("turns"),
            "tokens": event.get("totalTokens"),
            "cost": event.get("cost"),
        }
        with self._lock:
            used = self._used.setdefault(index, {})
            for kind, value in seen.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    used[kind] = float(value)
            if self.reached is not None:
                return None
            for kind, limit in self.limits.items():
                total = sum(u.get(kind, 0.0) for u in self._used.values())
                if total >= limit:
                    self.reached = (kind, limit, total)
                    return self.reached
        return None
