"""The threads a job starts beside its runs (its own work, stops sent to its runs, a cancel
asked for in a signal handler), owned by the job: each is started here, and the job joins
them all at its end, so none outlives it unseen.

A thread each, not a bounded pool: a stop must never wait behind the runs it stops. They
are daemon threads still, so that a job interrupted for good (a second Ctrl-C) never holds
the process open; the join at the end is bounded for the same reason.

``beside``: a short piece of work on a thread of its own, waited for by whoever started it
(one wait on the disk while another goes on).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# The longest the end of a job waits for its threads, all together: each is a stop of a
# run that has ended or is ending (procs.stop_group's kill grace), or the job's work.
JOIN_WITHIN = 30.0


class Tasks:
    def __init__(self, name: str) -> None:
        self.name = name
        # Appended to from a signal handler too (``Job.cancel_soon``): a list's append
        # takes no lock that the interrupted thread could hold.
        self._threads: list[threading.Thread] = []

    def submit(
        self, fn: Callable[..., object], /, *args: object, **kwargs: object
    ) -> threading.Thread:
        """Run ``fn(*args, **kwargs)`` in a thread of its own, now (the thread, to wait for
        it sooner than the job's end)."""
        thread = threading.Thread(
            target=fn,
            args=args,
            kwargs=kwargs,
            name=f"{self.name}-{getattr(fn, '__name__', 'task')}",
            daemon=True,
        )
        self._threads.append(thread)
        thread.start()
        return thread

    def join(self, within: float = JOIN_WITHIN) -> list[threading.Thread]:
        """Wait for every thread started so far (those started meanwhile too), at most
        ``within`` seconds in all; returns those still running then."""
        deadline = time.monotonic() + within
        current = threading.current_thread()
        seen = 0
        while seen < len(self._threads):
            thread = self._threads[seen]
            seen += 1
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        return [t for t in self._threads if t.is_alive() and t is not current]


def beside(work: Callable[[], object]) -> Callable[[], BaseException | None]:
    """``work`` started on a thread of its own; what is returned waits for it to end and
    gives what it raised (None when it returned)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to whoever waits for it
            raised.append(exc)

    thread = threading.Thread(target=run, name="subagents-beside", daemon=True)
    thread.start()

    def wait() -> BaseException | None:
        thread.join()
        return raised[0] if raised else None

    return wait
