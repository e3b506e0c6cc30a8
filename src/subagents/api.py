"""The public Python API. The CLI, the MCP server and the web view stand on the same internal
service (``subagents.service``) as it does.

import subagents
result = subagents.run("Summarize README.md", agent="scout")      # result.json as a dict
job = subagents.start({"mode": "parallel", "tasks": [...]})       # background job
job.wait(); job.stop()

What comes back is typed with ``subagents.types``: a task gives its run's ``RunResult``
(or, for a run the job never started, its ``RunNotStarted`` record), a job its ``JobResult``,
a job handle the job's ``JobState``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Unpack, overload

from subagents.core import paths
from subagents.errors import BadRequest, JobIdError, PlanError
from subagents.service import (
    EventSink,
    JobSpec,
    JobStore,
    job_state,
    send_message,
    start_background,
    stop_job,
    wait_job,
)

# The machinery is the service's (the surfaces' too); these are the public API's own names.
from subagents.service import JobDocument as JobDocument
from subagents.service import PreparedJob as PreparedJob
from subagents.service import decide as decide_item
from subagents.service import drive as drive
from subagents.service import inbox as pending
from subagents.service import prepare_continuation as prepare_continuation
from subagents.service import prepare_job as prepare_job

if TYPE_CHECKING:
    from subagents.types import (
        ApprovalChoice,
        ApprovalDecision,
        ApprovalItem,
        CostTotals,
        JobResult,
        JobRun,
        JobState,
        MessageMode,
        Receipt,
        RunOptionsDict,
    )


def continue_run(run: str, task: str, *, on_event: EventSink | None = None) -> JobRun:
    """Continue a finished run: its child resumes its own conversation with ``task``.
    Returns the new run's ``result.json`` (``continuedFrom`` names ``run``)."""
    return drive(prepare_continuation(run, task, drive_here=True), on_event)["runs"][0]


def apply_run(run: str, cwd: str | Path | None = None, *, partial: bool = False) -> list[str]:
    """Apply an isolated run's changes to the working tree at ``cwd`` (3-way); returns the
    files changed. ``BadRequest`` for a run without changes to apply, or one that did not
    complete (its changes may be half done) unless ``partial``; ``runs.WorktreeError`` on a
    conflict, having changed nothing."""
    from subagents.service import read_run, resolve_run
    from subagents.worktree import apply_changes

    home = paths.state_home()
    try:
        run_id = resolve_run(home, run)
        _meta, result = read_run(home, run_id)
    except PlanError as exc:
        raise BadRequest(str(exc)) from None
    if result is None:
        raise BadRequest(f"run {run_id} has not ended yet")
    worktree = result.get("worktree")
    if not isinstance(worktree, dict) or not worktree.get("commit"):
        raise BadRequest(f"run {run_id} did not run in its own worktree (--isolate worktree)")
    status = result.get("status")
    if status != "completed" and not partial and worktree["commit"] != worktree["base"]:
        raise BadRequest(
            f"run {run_id} ended {status}, so its changes may be half done; "
            "apply them anyway with --partial",
            "partial",
        )
    return apply_changes(worktree, Path(cwd or paths.working_dir()))


def cost_report(
    session: str | None = None, since: str | None = None, by: str | None = None
) -> CostTotals:
    """What finished jobs cost, from the session logs (``subagents cost --json``): ``{"by",
    "rows", "total", "summary"}``. ``since``: 45s, 30m, 2h, 1d, 2w or an ISO date; ``by``:
    agent, backend, model, repo or day. ValueError for a bad session, time or grouping."""
    from subagents.lifecycle import cost as costs
    from subagents.lifecycle import history

    since_ts = history.parse_since(since) if since else None
    entries = costs.end_entries(paths.state_home(), session, since_ts)
    report = costs.totals(entries, by=by, runs_of=_runs_of_jobs(JobStore()) if by else None)
    # The total in words too, for integrations that show it (the pi package's /subagents).
    report["summary"] = costs.describe(report["total"])
    return report


def _runs_of_jobs(store: JobStore) -> Callable[[str], list[JobRun] | None]:
    """``runs_of(job_id)``: a finished job's run results from its job directory, or None."""

    def runs_of(job_id: str) -> list[JobRun] | None:
        try:
            runs = store.load(job_id).get("runs")
        except (OSError, ValueError):
            return None
        return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else None

    return runs_of


# ---- the small Python API ---------------------------------------------------------


class JobHandle:
    """A job running in the background (its own driver process)."""

    def __init__(self, store: JobStore, job_id: str) -> None:
        self.store = store
        self.job_id = job_id

    def wait(self, timeout: float | None = None) -> JobState | None:
        """The job's state once it has ended (holding the job result); None on a timeout."""
        return wait_job(self.store, self.job_id, timeout)

    def stop(self) -> JobState:
        return stop_job(self.store, self.job_id)

    def state(self) -> JobState:
        return job_state(self.store, self.job_id)


def send(target: str, text: str, mode: MessageMode = "steer") -> Receipt:
    """Send ``text`` to a running run's child: ``target`` is the run's id (any unambiguous
    prefix), or its job's while the job has one run going. ``mode``: ``"steer"`` (into the
    running conversation, as soon as the CLI allows) or ``"follow-up"`` (when the child would
    otherwise end; the run goes on). The receipt: ``queued`` or ``delivered``. Raises
    ``MessageRefused`` (ended, a CLI that takes no such message, …) or ``UsageError`` (bad
    text, unknown id), as one line; nothing is sent then."""
    return send_message(JobStore(paths.state_home()), target, text, mode)


def inbox(run: str | None = None) -> list[ApprovalItem]:
    """The approval items waiting for a decision (docs/approvals.md), oldest first: of every
    running run, or of ``run`` (its id or an unambiguous prefix)."""
    return pending(run)


def decide(
    item: str,
    choice: ApprovalChoice,
    *,
    reason: str | None = None,
    answers: list[str] | None = None,
) -> ApprovalDecision:
    """Decide an inbox item. A request to act: ``"allow"`` (once), ``"always"`` (the same
    tool passes for the rest of the run) or ``"deny"`` (``reason`` is what the child is
    told). A question (``item["kind"] == "question"``): ``"answer"`` with ``answers``, one
    per question in order (an option's label, or words of your own), or ``"deny"`` (not
    answered). Raises ``UsageError`` (one line, nothing changed) for an unknown or decided
    item, a choice that does not fit it, or a run that ended; of two deciders racing, the
    one that lost is told who won."""
    return decide_item(item, choice, reason=reason, answers=answers)


def _spec(task: str | JobDocument | JobSpec, options: RunOptionsDict) -> JobSpec | JobDocument:
    """A task as a job of one step with these options (the unset left out); a job as it is."""
    if isinstance(task, str):
        given: dict[str, object] = {k: v for k, v in options.items() if v is not None}
        schema = given.get("output_schema")
        if isinstance(schema, Mapping):
            given["output_schema"] = dict(schema)
        return {"mode": "single", "steps": [{"task": task, **given}]}
    return task


def start(
    task: str | JobDocument | JobSpec,
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    **options: Unpack[RunOptionsDict],
) -> JobHandle:
    """Start a job in the background (a task, or a job spec); returns its handle. A task's
    ``options`` are a step's (``agent``, ``backend``, ``model``, ``timeout``, the budget
    ``max_turns``/``max_tokens``/``max_cost`` …: docs/jobs.md); a job spec holds its own."""
    job = prepare_job(_spec(task, options), cwd=cwd, extra_env=env, background=True)
    start_background(job)
    return JobHandle(job.store, job.job_id)


@overload
def run(
    task: str,
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    on_event: EventSink | None = None,
    **options: Unpack[RunOptionsDict],
) -> JobRun: ...
@overload
def run(
    task: JobDocument | JobSpec,
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    on_event: EventSink | None = None,
    **options: Unpack[RunOptionsDict],
) -> JobResult: ...
def run(
    task: str | JobDocument | JobSpec,
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    on_event: EventSink | None = None,
    **options: Unpack[RunOptionsDict],
) -> JobRun | JobResult:
    """Run a task (or a job) here to its end. One task: its ``result.json`` (a RunResult;
    a RunNotStarted record when the job was stopped before the run started, or the run could
    not start: ``"paths" in result`` tells which); a job: the job result. A task's
    ``options`` are a step's (docs/jobs.md: ``agent``, ``backend``, ``model``, ``timeout``,
    ``isolate``, the watchdog, the budget ``max_turns``/``max_tokens``/``max_cost`` …); a
    job spec holds its own. ``output_schema`` (a file, JSON text or a mapping): the answer
    must be JSON valid against it; the result's ``structured`` holds the value
    (docs/structured.md)."""
    job = prepare_job(_spec(task, options), cwd=cwd, extra_env=env, drive_here=True)
    result = drive(job, on_event)
    if isinstance(task, str):
        return result["runs"][0]
    return result


__all__ = [
    "BadRequest",
    "JobHandle",
    "JobIdError",
    "PreparedJob",
    "apply_run",
    "continue_run",
    "cost_report",
    "decide",
    "drive",
    "inbox",
    "prepare_continuation",
    "prepare_job",
    "run",
    "send",
    "start",
]
