"""The public Python API. The CLI and the MCP server are thin layers over it.

import subagents
result = subagents.run("Summarize README.md", agent="scout")      # result.json as a dict
job = subagents.start({"mode": "parallel", "tasks": [...]})       # background job
job.wait(); job.stop()

What comes back is typed with ``subagents.types``: a task gives its run's ``RunResult``
(or, for a run the job never started, its ``RunNotStarted`` record), a job its ``JobResult``,
a job handle the job's ``JobState``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from subagents.core import paths
from subagents.errors import BadRequest, FieldProblem, JobIdError, PlanError

# Job control lives in jobs/; the CLI and the MCP server reach it through the API.
from subagents.jobs import STOPPED_ORPHAN as STOPPED_ORPHAN
from subagents.jobs import (
    TERMINAL,
    EventSink,
    Job,
    JobPlan,
    JobSpec,
    JobStore,
    parse_job,
    plan,
)
from subagents.jobs import current_activity as current_activity
from subagents.jobs import job_state as job_state
from subagents.jobs import list_jobs as list_jobs
from subagents.jobs import send_message as send_message
from subagents.jobs import stop_job as stop_job
from subagents.jobs import wait_job as wait_job
from subagents.present.figures import money

if TYPE_CHECKING:
    from subagents.agents import AgentDef, Discovery
    from subagents.config import Settings
    from subagents.types import (
        CostTotals,
        JobResult,
        JobRun,
        JobState,
        MessageMode,
        ProcessIdentity,
        Receipt,
    )

# A job as a document says it (``{"mode": ..., "tasks": [...]}``: docs, DESIGN "Jobs"),
# checked by ``jobs.parse_job``; or one already checked.
JobDocument = Mapping[str, object]


@dataclass
class PreparedJob:
    store: JobStore
    job_id: str
    plan: JobPlan
    driver_pid: int | None = None  # set by start_background
    started_at: str | None = None  # set by start_background and mark_started


def prepare_job(
    spec: JobSpec | JobDocument,
    *,
    cwd: str | Path | None = None,
    tools: list[str] | None = None,
    runner: str | None = None,
    agent_scope: str | None = None,
    session: str | None = None,
    extra_env: dict[str, str] | None = None,
    background: bool = False,
    executor: str | None = None,
    ray_address: str | None = None,
    ray_shared_cwd: bool | None = None,
    env: Mapping[str, str] | None = None,
    watch: list[ProcessIdentity] | None = None,
) -> PreparedJob:
    """Check and resolve a job and record it (status ``pending``); nothing runs yet.
    ``runner``, ``executor``, ``ray_address``, ``ray_shared_cwd`` and ``agent_scope``
    override the settings. ``watch``: processes the job is bound to (:func:`bound_to`): when
    one ends, its runs and its background driver stop (the job ends ``aborted``)."""
    env = os.environ if env is None else env
    base = Path(cwd).expanduser() if cwd else paths.working_dir()
    if not base.is_dir():
        raise BadRequest(
            f"cwd: the working directory does not exist or is not a directory: {base}", "cwd"
        )
    job_spec = spec if isinstance(spec, JobSpec) else parse_job(spec)
    settings = _job_settings(
        base,
        env,
        runner=runner,
        executor=executor,
        ray_address=ray_address,
        ray_shared_cwd=ray_shared_cwd,
        agent_scope=agent_scope,
    )
    from subagents.lifecycle import sessionlog

    session = session or sessionlog.default_session_id(env)
    sessionlog.session_path(paths.state_home(env), session)
    job_plan = plan(job_spec, settings, session=session, cwd=base, env=env, extra_env=extra_env)
    for req in job_plan.requests:
        if tools is not None:
            req.tools = tools
        req.watch = [w.copy() for w in watch or []]
    store = JobStore(paths.state_home(env))
    job_id = store.create(job_plan.to_record(), agents=job_plan.labels(), background=background)
    return PreparedJob(store, job_id, job_plan)


def bound_to(pid: int, *, foreground: bool) -> list[ProcessIdentity]:
    """What a job started for process ``pid`` (``--parent-pid``) watches: that process, and
    in the foreground this one too (its driver: killed outright, it can stop nothing).
    ``BadRequest`` when ``pid`` is not running, before anything is created."""
    from subagents.core import procs

    try:
        parent = procs.identity(pid)
    except (ProcessLookupError, ValueError, OverflowError):
        raise BadRequest(f"--parent-pid {pid}: no such process", "parent_pid") from None
    if not procs.is_alive(parent):
        raise BadRequest(f"--parent-pid {pid}: the process has ended", "parent_pid")
    return [parent, procs.identity(os.getpid())] if foreground else [parent]


def _job_settings(base: Path, env: Mapping[str, str], **overrides: str | bool | None) -> Settings:
    """The settings for a job in ``base``, with the caller's overrides (each checked as the
    setting is: a bad one is a ``BadRequest`` naming it)."""
    from subagents.config import load_settings

    settings = load_settings(base, env)
    # Text for settings of several types (a runner's name is a Literal): Settings checks it.
    given: dict[str, Any] = {name: value for name, value in overrides.items() if value}
    if not given:
        return settings
    try:
        return replace(settings, **given)
    except FieldProblem as exc:
        raise BadRequest(f"{exc.where}: {exc.problem}", exc.where) from None


def prepare_continuation(
    run: str,
    task: str,
    *,
    background: bool = False,
    session: str | None = None,
    env: Mapping[str, str] | None = None,
    watch: list[ProcessIdentity] | None = None,
) -> PreparedJob:
    """Check and record a job of one run that continues ``run``'s conversation with ``task``
    (``watch``: as for :func:`prepare_job`)."""
    from subagents.jobs import continuation_plan
    from subagents.lifecycle import sessionlog

    env = os.environ if env is None else env
    store = JobStore(paths.state_home(env))
    settings = _job_settings(paths.working_dir(), env)
    session = session or sessionlog.default_session_id(env)
    job_plan = continuation_plan(store, run, task, settings, session)
    job_plan.requests[0].watch = [w.copy() for w in watch or []]
    job_id = store.create(job_plan.to_record(), agents=job_plan.labels(), background=background)
    return PreparedJob(store, job_id, job_plan)


def continue_run(run: str, task: str, *, on_event: EventSink | None = None) -> JobRun:
    """Continue a finished run: its child resumes its own conversation with ``task``.
    Returns the new run's ``result.json`` (``continuedFrom`` names ``run``)."""
    return drive(prepare_continuation(run, task), on_event)["runs"][0]


def apply_run(run: str, cwd: str | Path | None = None, *, partial: bool = False) -> list[str]:
    """Apply an isolated run's changes to the working tree at ``cwd`` (3-way); returns the
    files changed. ``BadRequest`` for a run without changes to apply, or one that did not
    complete (its changes may be half done) unless ``partial``; ``runs.WorktreeError`` on a
    conflict, having changed nothing."""
    from subagents.jobs import read_run, resolve_run
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


def run_labels(job: PreparedJob) -> list[str]:
    return job.plan.labels()


def drive(job: PreparedJob, on_event: EventSink | None = None) -> JobResult:
    """Run a prepared job in this process to its end. In the main thread, Ctrl-C, SIGTERM
    (what `subagents stop` may send) and SIGHUP (the terminal closing, under a parent such
    as pi too) abort the job, which still records its end."""
    from subagents.core.procs import STOP_SIGNALS
    from subagents.jobs import lifecycle_for

    runner = Job(job.store, job.job_id, job.plan)
    restore = runner.stop_on_signals(STOP_SIGNALS) if _in_main_thread() else None
    try:
        result = runner.run(
            on_event=on_event, lifecycle=lifecycle_for(job.store.home, job.plan, background=False)
        )
    finally:
        if restore is not None:
            restore()
    return result


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def mark_started(job: PreparedJob, *, background: bool | None = None) -> str:
    """Record now as the job's start (ISO; ``background``: that it runs in the background),
    before it runs: its driver keeps it, so a caller can announce the job's own start time
    at once."""
    import time

    from subagents.core.clock import iso

    job.started_at = iso(time.time())
    if background is None:
        job.store.update(job.job_id, startedAt=job.started_at)
    else:
        job.store.update(job.job_id, startedAt=job.started_at, background=background)
    return job.started_at


def start_background(job: PreparedJob) -> str:
    from subagents.jobs import start_background as launch

    mark_started(job, background=True)
    job.driver_pid = launch(job.store, job.job_id)
    return job.job_id


def describe_job(state: JobState) -> str:
    lines = [f"job {state['jobId']} · {state.get('mode')} · {state.get('status')}"]
    usage = state.get("usage")
    if state.get("durationMs") is not None:
        cost = usage.get("cost") if usage else None
        lines.append(
            f"{state['durationMs'] / 1000:.1f}s · {usage.get('totalTokens', 0) if usage else 0} tokens"
            + (f" · {money(cost)}" if cost is not None else "")
        )
    if state.get("errorMessage"):
        label = "note" if state.get("status") == "completed" else "error"
        lines.append(f"{label}: {state['errorMessage']}")
    runs = state.get("runs")
    if runs is None:
        lines.append(
            "runs: " + ", ".join(r or "(not started)" for r in state.get("runIds") or [])
            or "runs: none yet"
        )
    else:
        for i, r in enumerate(runs):
            what = (
                (r.get("finalText") or "").strip().splitlines()[:1]
                if r.get("status") == "completed"
                else [r.get("errorMessage") or ""]
            )
            lines.append(
                f"  [{i + 1}] {r.get('agent') or r.get('backend')} {r.get('status')} {r.get('runId') or ''}: {(what or [''])[0][:120]}"
            )
            lines += _run_notes(r)
    if state.get("finalText"):
        lines += ["", str(state["finalText"]).rstrip()]
    return "\n".join(lines)


def _run_notes(r: JobRun) -> list[str]:
    """What ``show`` adds under a run: its worktree branch, and the runs it continues."""
    notes: list[str] = []
    if "paths" not in r:  # a run never started
        return notes
    wt = r.get("worktree")
    if isinstance(wt, dict):
        if wt.get("error"):
            notes.append(f"      worktree: {wt['error']}")
        elif wt.get("filesChanged"):
            notes.append(
                f"      branch {wt.get('branch')}: {wt['filesChanged']}"
                f" file{'s' if wt['filesChanged'] != 1 else ''} changed,"
                f" +{wt.get('insertions', 0)} -{wt.get('deletions', 0)}"
                f" (subagents apply {r.get('runId')})"
            )
        elif not wt.get("uncommitted"):
            notes.append("      worktree: no changes (branch removed)")
        if wt.get("uncommitted"):
            notes.append(
                f"      worktree: {', '.join(wt['uncommitted'])}: changes a commit cannot hold"
                f" (a submodule's, a nested repository's), kept in {wt['path']}"
            )
    from subagents.present.outcome import live_notes

    live = live_notes(r)
    if live:
        notes.append("      " + " · ".join(live))
    if r.get("continuedFrom") and r.get("runId"):
        from subagents.jobs import chain_of

        notes.append("      continues: " + " → ".join(chain_of(paths.state_home(), r["runId"])))
    return notes


def job_transcript(store: JobStore, job_id: str, *, follow: bool = False) -> Iterator[str]:
    """Each run's transcript.md, with a header per run; with ``follow``, live until the job ends."""
    from subagents.core.tail import LineTail
    from subagents.core.waker import DirWaker

    tails: dict[str, LineTail] = {}
    current: str | None = None
    waker = DirWaker(store.dir / job_id) if follow else None
    try:
        while True:
            state = store.load(job_id)
            finished = state.get("status") in TERMINAL
            for run_id in [r for r in state.get("runIds") or [] if r]:
                tail = tails.get(run_id)
                if tail is None:
                    path = paths.runs_dir(store.home) / run_id / "transcript.md"
                    tail = tails[run_id] = LineTail(path)
                # Whole lines only (the transcript is written in whole lines), so a chunk
                # never ends inside a character.
                for block in tail.blocks():
                    if current != run_id:
                        yield f"\n# run {run_id}\n"
                        current = run_id
                    yield block.decode("utf-8", "replace")
            if not follow or finished:
                return
            assert waker is not None
            # Wakes at once when the job's state changes (a new run, the end); transcripts
            # grow in the runs' own directories, not watched here: look again every 0.25 s.
            waker.wait(0.25)
    finally:
        if waker is not None:
            waker.close()


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


def reindex() -> tuple[int, int]:
    """Make the local index (``index.sqlite``) again from the job files and the session
    logs (``subagents doctor --reindex``): how many jobs and log entries it holds."""
    from subagents.core import indexdb
    from subagents.lifecycle import cost as costs
    from subagents.lifecycle import logindex

    home = paths.state_home()
    indexdb.discard(home)
    jobs = JobStore(home).reindex()
    return jobs, logindex.reindex(home, costs.session_files(home))


def _runs_of_jobs(store: JobStore) -> Callable[[str], list[JobRun] | None]:
    """``runs_of(job_id)``: a finished job's run results from its job directory, or None."""

    def runs_of(job_id: str) -> list[JobRun] | None:
        try:
            runs = store.load(job_id).get("runs")
        except (OSError, ValueError):
            return None
        return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else None

    return runs_of


# ---- agents ---------------------------------------------------------------------


def _settings(base: Path) -> Settings:
    """The effective settings for work in ``base``; a config problem is a ``BadRequest``."""
    from subagents.config import load_settings
    from subagents.errors import ConfigError

    try:
        return load_settings(base)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from None


def discover_agents(scope: str | None = None, cwd: Path | None = None) -> Discovery:
    from subagents.agents import discover

    base = cwd or paths.working_dir()
    return discover(base, scope or _settings(base).agent_scope)


def get_agent(name: str, scope: str | None = None, cwd: Path | None = None) -> AgentDef:
    from subagents.agents import get_agent as lookup
    from subagents.errors import AgentError

    base = cwd or paths.working_dir()
    try:
        return lookup(name, base, scope or _settings(base).agent_scope)
    except AgentError as exc:
        raise BadRequest(str(exc)) from None


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


def _spec(
    task: str | JobDocument | JobSpec, **step: str | float | JobDocument | None
) -> JobSpec | JobDocument:
    """A task as a job of one step (``step``: its agent, backend, model, timeout, budget and
    output schema, where given); a job as it is."""
    if isinstance(task, str):
        return {
            "mode": "single",
            "steps": [{"task": task, **{k: v for k, v in step.items() if v is not None}}],
        }
    return task


def start(
    task: str | JobDocument | JobSpec,
    *,
    agent: str | None = None,
    backend: str | None = None,
    model: str | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    output_schema: str | Mapping[str, object] | None = None,
) -> JobHandle:
    """Start a job in the background (a task, or a job spec); returns its handle. A task's
    budget: ``max_turns``, ``max_tokens``, ``max_cost`` (USD); a job spec holds its own."""
    job = prepare_job(
        _spec(
            task,
            agent=agent,
            backend=backend,
            model=model,
            timeout=timeout,
            max_turns=max_turns,
            max_tokens=max_tokens,
            max_cost=max_cost,
            output_schema=dict(output_schema)
            if isinstance(output_schema, Mapping)
            else output_schema,
        ),
        cwd=cwd,
        extra_env=env,
        background=True,
    )
    start_background(job)
    return JobHandle(job.store, job.job_id)


@overload
def run(
    task: str,
    *,
    agent: str | None = None,
    backend: str | None = None,
    model: str | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    on_event: EventSink | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    output_schema: str | Mapping[str, object] | None = None,
) -> JobRun: ...
@overload
def run(
    task: JobDocument | JobSpec,
    *,
    agent: str | None = None,
    backend: str | None = None,
    model: str | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    on_event: EventSink | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    output_schema: str | Mapping[str, object] | None = None,
) -> JobResult: ...
def run(
    task: str | JobDocument | JobSpec,
    *,
    agent: str | None = None,
    backend: str | None = None,
    model: str | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    on_event: EventSink | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    output_schema: str | Mapping[str, object] | None = None,
) -> JobRun | JobResult:
    """Run a task (or a job) here to its end. One task: its ``result.json`` (a RunResult;
    a RunNotStarted record when the job was stopped before the run started, or the run could
    not start: ``"paths" in result`` tells which); a job: the job result. A task's budget:
    ``max_turns``, ``max_tokens``, ``max_cost`` (USD); a job spec holds its own.
    ``output_schema`` (a file, JSON text or a mapping): the answer must be JSON valid
    against it; the result's ``structured`` holds the value (docs/structured.md)."""
    job = prepare_job(
        _spec(
            task,
            agent=agent,
            backend=backend,
            model=model,
            timeout=timeout,
            max_turns=max_turns,
            max_tokens=max_tokens,
            max_cost=max_cost,
            output_schema=dict(output_schema)
            if isinstance(output_schema, Mapping)
            else output_schema,
        ),
        cwd=cwd,
        extra_env=env,
    )
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
    "drive",
    "prepare_continuation",
    "prepare_job",
    "run",
    "send",
    "start",
]
