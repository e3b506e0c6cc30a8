"""Times in records: epoch seconds as ISO-8601 UTC to the millisecond
(``2026-01-05T14:30:00.123Z``: result.json, job.json, the session and hooks logs), and back.
Standard library only (the supervisor stamps its result with it)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from typing import Any


def iso(ts: float | None = None) -> str:
    """``ts`` (epoch seconds; now when None) as ISO-8601 UTC to the millisecond, ``Z``."""
    when = time.time() if ts is None else ts
    return (
        datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def epoch(value: Any) -> float | None:
    """Epoch seconds from a record's time: a number as it is, an ISO-8601 string (``Z`` or
    an offset; without one, local time) parsed; None for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer past any float: no time
            return None
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None
