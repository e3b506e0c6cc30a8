"""When each part of a run's ``transcript.md`` was written: ``transcript.times`` beside it.

The supervisor stamps the events of each read from the child with one time; the first
transcript chunk written under a new time adds a record here: the chunk's byte offset in
the transcript and that time. A record is a fixed-width line of text (``OFFSET TIME\\n``, :data:`RECORD`
bytes), so the file is readable as text and a reader finds any offset's time by bisection,
never reading the file whole (a transcript of 50 MB has a long one). The transcript itself
stays as it was: ``cat`` and ``subagents logs`` show no times. Standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from pathlib import Path

NAME = "transcript.times"
# "%012d %014.3f\n": offsets below 1 TB, times (epoch seconds, ms) until the year 5138.
RECORD = 28


def record(offset: int, ts: float) -> bytes:
    """The line saying the transcript's bytes from ``offset`` on were written at ``ts``."""
    return b"%012d %014.3f\n" % (offset, ts)


def _parse(data: bytes) -> tuple[int, float] | None:
    try:
        return int(data[:12]), float(data[13:27])
    except ValueError:
        return None


def between(path: Path, start: int, end: int) -> list[tuple[int, float]]:
    """The records ``(offset, time)`` of the transcript's bytes ``start`` to ``end``: the
    one in force at ``start`` (written before it, its offset made ``start``), then each
    that begins before ``end``. Empty when there is no such file (a run from before it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        count = os.fstat(fd).st_size // RECORD  # (a torn last record is not one)

        def at(i: int) -> tuple[int, float] | None:
            return _parse(os.pread(fd, RECORD, i * RECORD))

        lo, hi = 0, count  # the first record whose offset is past start
        while lo < hi:
            mid = (lo + hi) // 2
            found = at(mid)
            if found is None:
                return []  # not a times file
            if found[0] <= start:
                lo = mid + 1
            else:
                hi = mid
        out: list[tuple[int, float]] = []
        if lo:
            before = at(lo - 1)
            if before is not None:
                out.append((start, before[1]))
        first = lo
        while first < count:  # the rest, a chunk of records at a time
            data = os.pread(fd, RECORD * 256, first * RECORD)
            for i in range(0, len(data) - RECORD + 1, RECORD):
                found = _parse(data[i : i + RECORD])
                if found is None or found[0] >= end:
                    return out
                out.append(found)
            first += len(data) // RECORD
            if not data:
                break
        return out
    finally:
        os.close(fd)
