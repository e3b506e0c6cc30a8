"""A job's budget: the most model turns, tokens and cost its runs may use together
(``max_turns`` … of a job spec), counted from their usage events.

A run starts with the least of its own limit and what the job has left (a chain's later
steps get what the earlier ones did not use); a run that would start with nothing left is
not started. Runs going side by side are told when their sum reaches the limit
(``runs.tell_limit``): each then wraps up (or is stopped) as at its own limit.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from subagents.core.inputs import BUDGET_FIELDS
from subagents.runs import RunRequest

# The usage event's field each kind is counted from.
_FIELD = {"turns": "turns", "tokens": "totalTokens", "cost": "cost"}


def describe(kind: str, value: float) -> str:
    if kind == "cost":
        return f"${value:.2f}" if value >= 0.01 else f"${value:.4g}"
    return f"{int(value)} {kind}"


class JobBudget:
    def __init__(self, budget: Mapping[str, Any], runs: int) -> None:
        # kind ("turns" | "tokens" | "cost") -> the job's limit
        self.limits: dict[str, float] = {
            BUDGET_FIELDS[name]: float(value)
            for name, value in budget.items()
            if name in BUDGET_FIELDS and value is not None
        }
        self._used: list[dict[str, float]] = [{} for _ in range(runs)]
        self._lock = threading.Lock()
        self.reached: tuple[str, float, float] | None = None

    def __bool__(self) -> bool:
        return bool(self.limits)

    def total(self, kind: str) -> float:
        with self._lock:
            return sum(used.get(kind, 0.0) for used in self._used)

    def spent(self) -> str | None:
        """Why no further run starts (a limit with nothing left), or None."""
        for kind, limit in self.limits.items():
            used = self.total(kind)
            if used >= limit:
                return (
                    f"not started: the job's {kind} limit of {describe(kind, limit)} is spent"
                    f" ({describe(kind, used)} used)"
                )
        return None

    def for_run(self, req: RunRequest) -> RunRequest:
        """``req`` bounded by what the job has left, where that is less than its own."""
        changes: dict[str, Any] = {}
        job_used: dict[str, float] = {}
        for name, kind in BUDGET_FIELDS.items():
            limit = self.limits.get(kind)
            if limit is None:
                continue
            used = self.total(kind)
            left = limit - used
            own = getattr(req, name)
            if own is None or left < own:
                changes[name] = max(1, int(left)) if kind != "cost" else max(left, 1e-9)
                job_used[kind] = used
        if not changes:
            return req
        return replace(req, **changes, job_used=job_used)

    def observe(self, index: int, event: Mapping[str, Any]) -> tuple[str, float, float] | None:
        """Take a run's usage event; the limit the job's total has just reached, if one has
        (once: what it was, and what was used)."""
        if event.get("type") != "usage" or not self.limits:
            return None
        with self._lock:
            used = self._used[index]
            for kind, field in _FIELD.items():
                value = event.get(field)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    used[kind] = float(value)
            if self.reached is not None:
                return None
            for kind, limit in self.limits.items():
                total = sum(u.get(kind, 0.0) for u in self._used)
                if total >= limit:
                    self.reached = (kind, limit, total)
                    return self.reached
        return None
