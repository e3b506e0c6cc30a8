"""Times in records: epoch seconds as ISO-8601 UTC to the millisecond
(``2026-01-05T14:30:00.123Z``: result.json, job.json, the session and hooks logs), and back.
Standard library only (the supervisor stamps its result with it)."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from typing import Any

_YEAR_10000 = 253402300800  # epoch seconds


def iso(ts: float | None = None) -> str:
    """``ts`` (epoch seconds; now when None) as ISO-8601 UTC to the millisecond, ``Z``."""
    when = time.time() if ts is None else ts
    # As datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds") says it (the
    # microseconds rounded half to even, then cut to milliseconds), without importing
    # datetime: ~3 ms of the supervisor's end, after its child exited.
    whole = when // 1
    if not 0 <= whole < _YEAR_10000:  # (and NaN): datetime says what is wrong with it
        from datetime import UTC, datetime

        stamp = datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds")
        return stamp.replace("+00:00", "Z")
    seconds = int(whole)
    micros = round((when - whole) * 1e6)
    if micros >= 1_000_000:
        seconds, micros = seconds + 1, micros - 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros // 1000:03d}Z"


def epoch(value: Any) -> float | None:
    """Epoch seconds from a record's time: a number as it is, an ISO-8601 string (``Z`` or
    an offset; without one, local time) parsed; None for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer past any float: no time
            return None
    if isinstance(value, str) and value:
        from datetime import datetime

        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None
