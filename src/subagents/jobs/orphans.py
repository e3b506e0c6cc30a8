"""A job whose driver died, finished by whoever looks at it next (``JobStore.recover_if_orphaned``):
its runs as they ended (or None while one goes on), when it ended, and the start entry its
driver never wrote. No allowance here counts from the look: only from the records' times."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import paths
from subagents.core.clock import epoch
from subagents.core.files import locked
from subagents.lifecycle import sessionlog

if TYPE_CHECKING:
    from subagents.types import JobRun, JobState

# The mark of a start entry written for a job whose driver died before writing it.
START_MARK = "start-logged"


def runs_of_dead_driver(home: Path, job_id: str, known: list[str]) -> list[JobRun] | None:
    """The results of the job's runs (``known``, and any run the driver made but had not
    recorded yet), a dead supervisor's written now; None while one of them goes on."""
    from subagents.runs import RunMonitor, runs_naming

    runs: list[JobRun] = []
    for run_id in known + [r for r in runs_naming(home, job_id) if r not in known]:
        monitor = RunMonitor(paths.runs_dir(home) / run_id)
        result = monitor.result()
        if result is None:
            if monitor.supervisor_alive():
                return None  # a run goes on without its driver: the job ends when it does
            result = monitor.recover_dead_supervisor()
        runs.append(result)
    return runs


def ended_at(runs: list[JobRun], started: float) -> float:
    """When the job ended: when its last run did (with none, when it was made)."""
    ends = [epoch(r.get("completedAt")) for r in runs]
    return max([started, *(e for e in ends if e is not None)])


def log_start_once(job_dir: Path, state: JobState, end_mark: str) -> None:
    """The start entry of a job whose driver died before writing it: once, and never after
    its end entry (``end_mark``)."""
    with locked(job_dir):
        mark = job_dir / START_MARK
        if mark.exists() or (job_dir / end_mark).exists():
            return
        mark.touch(mode=0o600)
        sessionlog.append(Path(str(state["sessionLog"])), sessionlog.start_entry_for_job(state))
