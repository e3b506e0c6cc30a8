"""A map's progress: rows done of the total, running, failed, rows a minute, the time left
at that pace, and the cost so far against the budget; as a record (``--progress jsonl``,
the API) and as one line for people:

    rows 412/1000 · 16 running · 3 failed · 58.2 rows/min · ETA 10m 06s · $1.24 / $5.00

The pace counts only rows finished since this driver started (a resumed map's earlier
rows took no time here).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypedDict

from subagents.jobs.mapresults import group_failures

if TYPE_CHECKING:
    from subagents.types import MapFailureGroup


class MapProgressRecord(TypedDict):
    type: str
    jobId: str
    total: int
    done: int
    completed: int
    failed: int
    running: int
    rowsPerMin: float | None
    etaSeconds: float | None
    cost: float | None
    maxCost: float | None
    # The rows that did not complete so far, grouped by why, most first.
    failures: list[MapFailureGroup]


class MapProgress:
    def __init__(
        self,
        job_id: str,
        total: int,
        *,
        completed: int = 0,
        failed: int = 0,
        max_cost: float | None = None,
    ) -> None:
        self.job_id = job_id
        self.total = total
        self.completed = completed
        self.failed = failed
        self.running = 0
        self.cost: float | None = None
        self.max_cost = max_cost
        self._finished_here = 0
        self._reasons: dict[str, int] = {}
        self._started = time.monotonic()
        self._lock = threading.Lock()

    def add_cost(self, cost: object) -> None:
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            with self._lock:
                self.cost = (self.cost or 0.0) + float(cost)

    def row_started(self) -> None:
        with self._lock:
            self.running += 1

    def row_left(self) -> None:
        """A row that was to start did not (the map was stopped): it stays to do."""
        with self._lock:
            self.running -= 1

    def row_ended(self, entry: Mapping[str, object], *, running: bool = True) -> None:
        """A row's end, from its log entry (``running``: it was counted as running)."""
        with self._lock:
            self.running -= running
            self._finished_here += 1
            if entry.get("status") == "completed":
                self.completed += 1
            else:
                self.failed += 1
                group_failures([entry], self._reasons)

    def failed_before(self, entries: Iterable[Mapping[str, object]]) -> None:
        """Rows that had ended before this look (a watch of a running map): their reasons."""
        with self._lock:
            group_failures(entries, self._reasons)

    def record(self) -> MapProgressRecord:
        with self._lock:
            done = self.completed + self.failed
            elapsed = time.monotonic() - self._started
            rate = (
                self._finished_here / elapsed * 60 if elapsed > 0 and self._finished_here else None
            )
            left = self.total - done
            eta = left / rate * 60 if rate else (0.0 if left == 0 else None)
            return {
                "type": "map",
                "jobId": self.job_id,
                "total": self.total,
                "done": done,
                "completed": self.completed,
                "failed": self.failed,
                "running": self.running,
                "rowsPerMin": None if rate is None else round(rate, 1),
                "etaSeconds": None if eta is None else round(eta, 1),
                "cost": None if self.cost is None else round(self.cost, 6),
                "maxCost": self.max_cost,
                "failures": [
                    {"reason": why, "rows": n}
                    for why, n in sorted(self._reasons.items(), key=lambda kv: (-kv[1], kv[0]))
                ],
            }


def progress_line(record: MapProgressRecord) -> str:
    """The record as one line for people."""
    parts = [
        f"rows {record['done']}/{record['total']}",
        f"{record['running']} running",
        f"{record['failed']} failed",
    ]
    rate = record["rowsPerMin"]
    parts.append("- rows/min" if rate is None else f"{rate:.1f} rows/min")
    eta = record["etaSeconds"]
    parts.append("ETA -" if eta is None else f"ETA {_duration(eta)}")
    cost, budget = record["cost"], record["maxCost"]
    if cost is not None or budget is not None:
        spent = "$-" if cost is None else f"${cost:.2f}"
        parts.append(spent if budget is None else f"{spent} / ${budget:.2f}")
    return " · ".join(parts)


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def row_record(index: int, key: str, entry: Mapping[str, object]) -> dict[str, object]:
    """A row's end as a ``--progress jsonl`` record."""
    return {
        "type": "row",
        "index": index,
        "key": key,
        "status": entry.get("status"),
        "runId": entry.get("runId"),
        "error": entry.get("error"),
        "cost": entry.get("cost"),
    }
