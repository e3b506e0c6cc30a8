"""The background job driver: runs one job to its end in a detached process, so the job
finishes, records and notifies even when the caller that started it is gone.

``python -m subagents.jobs.driver JOB_DIR``. SIGTERM (``subagents stop``) aborts the job:
every run's process group is killed and the job ends ``aborted``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from subagents.core import procs
from subagents.core.files import open_private
from subagents.core.procs import STOP_SIGNALS
from subagents.jobs.store import JobStore


def start_background(store: JobStore, job_id: str) -> int:
    """Launch the driver for a stored job; returns its pid at once."""
    job_dir = store.dir / job_id
    with open_private(job_dir / "driver.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "subagents.jobs.driver", str(job_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m subagents.jobs.driver JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(args[0]).resolve()
    # Until the job exists, a stop request is only remembered; then it cancels the job,
    # which goes on to record its end (a signal never cuts the driver short).
    asked: list[int] = []
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: asked.append(signum))
    store = JobStore(job_dir.parent.parent)
    from subagents.jobs.orchestrator import exit_code
    from subagents.jobs.planning import JobPlan
    from subagents.jobs.records import lifecycle_for
    from subagents.jobs.runner import job_for

    state = store.load(job_dir.name)
    plan = JobPlan.from_record(state["plan"])
    job = job_for(store, job_dir.name, plan)
    job.stop_on_signals(STOP_SIGNALS)
    if asked:
        job.cancel_soon(asked[0])
    # Bound to its caller (--parent-pid --bg): when it ends, no more runs start.
    procs.when_gone(plan.requests[0].watch, lambda _gone: job.cancel_soon(signal.SIGTERM))
    result = job.run(lifecycle=lifecycle_for(store.home, plan, background=True))
    return exit_code(result)


if __name__ == "__main__":
    sys.exit(main())
