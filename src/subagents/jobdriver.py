"""The background job driver: runs one job to its end in a detached process, so the job
finishes, records and notifies even when the caller that started it is gone.

``python -m subagents.jobdriver JOB_DIR``. SIGTERM (``subagents stop``) aborts the job:
every run's process group is killed and the job ends ``aborted``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from subagents.artifacts import open_private
from subagents.jobs import JobStore


def start_background(store: JobStore, job_id: str) -> int:
    """Launch the driver for a stored job; returns its pid at once."""
    job_dir = store.dir / job_id
    with open_private(job_dir / "driver.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "subagents.jobdriver", str(job_dir)],
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
        print("usage: python -m subagents.jobdriver JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(args[0]).resolve()
    store = JobStore(job_dir.parent.parent)
    # The job is stopped by SIGTERM/SIGHUP as by Ctrl-C: Job.run cancels every run.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    from subagents.lifecycle import lifecycle_for
    from subagents.orchestrator import Job, JobPlan, exit_code

    state = store.load(job_dir.name)
    plan = JobPlan.from_dict(state["plan"])
    job = Job(store, job_dir.name, plan)
    result = job.run(lifecycle=lifecycle_for(store.home, plan, background=True))
    return exit_code(result)


if __name__ == "__main__":
    sys.exit(main())
