"""A gate a test holds shut: a child's command ``flock -s gate CMD`` (run in the gate's
directory) waits until the test lets it go, so a run is still going for as long as the test
needs it to be, however slow the machine, instead of for as long as a ``sleep`` lasts."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def gate(work: Path) -> Iterator[Callable[[], None]]:
    """``work/gate`` locked by the test: a run's command ``flock -s gate CMD`` (children work
    in ``work``) waits until the yielded function lets the lock go (or the block ends). A live
    view stays on screen as long as a test looks at it, and ends as soon as it has."""
    with (work / "gate").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock.close  # closing lets the lock go; a second close does nothing
