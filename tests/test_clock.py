"""Record times (core/clock.py): ``iso`` writes what datetime's isoformat would, without
importing datetime (the supervisor stamps its result with it, after its child exited)."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from subagents.core.clock import epoch, iso


def by_datetime(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_iso_says_what_datetime_says() -> None:
    rng = random.Random(38)
    samples = [rng.uniform(0, 4e9) for _ in range(20000)]
    # Half a microsecond and a hair under the next millisecond or second: the rounding.
    samples += [rng.randrange(4_000_000_000) + f for f in (0.0005, 0.9995, 0.9999995, 0.4999995)]
    samples += [0, 0.0, 1, 1795915475.4875, 253402300799.999]
    for ts in samples:
        assert iso(ts) == by_datetime(ts), ts
        assert epoch(iso(ts)) == pytest.approx(ts, abs=0.002)  # (cut to the millisecond)


@pytest.mark.parametrize("ts", [-1.5, 1e20, float("nan"), float("inf"), 253402300800])
def test_iso_of_a_time_datetime_refuses_or_before_1970(ts: float) -> None:
    try:
        expected: str | type[Exception] = by_datetime(ts)
    except (ValueError, OverflowError, OSError) as exc:
        expected = type(exc)
    if isinstance(expected, str):
        assert iso(ts) == expected
    else:
        with pytest.raises(expected):
            iso(ts)


@pytest.mark.process
def test_iso_imports_no_datetime() -> None:
    code = (
        "import sys; from subagents.core.clock import iso; iso(); print('datetime' in sys.modules)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert p.stdout.strip() == "False"
