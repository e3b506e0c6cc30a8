"""A gate a test holds shut: a child's command ``flock -s gate CMD`` (run in the gate's
directory) waits until the test lets it go, so a run is still going for as long as the test
needs it to be, however slow the machine, instead of for as long as a ``sleep`` lasts."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path

# A tool call that must still be going while a test acts on its run (sends it messages):
# it waits on the gate of its directory, and ``reached`` says once it waits there.
GATED = "touch reached; flock -s gate echo done"


@contextlib.contextmanager
def gate(work: Path) -> Iterator[Callable[[], None]]:
    """``work/gate`` locked by the test: a run's command ``flock -s gate CMD`` (children work
    in ``work``) waits until the yielded function lets the lock go (or the block ends). A live
    view stays on screen as long as a test looks at it, and ends as soon as it has."""
    with (work / "gate").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock.close  # closing lets the lock go; a second close does nothing


@contextlib.contextmanager
def held(work: Path) -> Iterator[Callable[[], None]]:
    """``gate(work)``, the directory made first if need be (before the run that works in it
    starts, so no command of it can pass the gate before the test holds it)."""
    work.mkdir(parents=True, exist_ok=True)
    with gate(work) as release:
        yield release


def reached(work: Path) -> bool:
    """Whether a ``GATED`` command in ``work`` has come to the gate."""
    return (work / "reached").exists()
