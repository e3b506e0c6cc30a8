"""The internal service the surfaces (the CLI, the MCP server, the web view) stand on: a job
prepared, driven or started in the background, its state, its end waited for, its stop, the
list of jobs, a message to a running child, its transcripts, the agents there are.

``subagents.api`` is the public Python API (``run``, ``start``, ``continue_run``, ``send``,
``JobHandle``, ``apply_run``, ``cost_report``) and is built on this module too. The surfaces
import this, never ``subagents.jobs`` (an import-linter contract says so): what they need of
the engine's job control is named here once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents import jobs
from subagents.core import paths
from subagents.errors import BadRequest, FieldProblem

if TYPE_CHECKING:
    from subagents.agents import AgentDef, Discovery
    from subagents.config import Settings
    from subagents.jobs import (
        STOPPED_ORPHAN,
        TERMINAL,
        EventSink,
        Job,
        JobPlan,
        JobSpec,
        JobStore,
        LiveJobs,
        MapProgress,
        MapWatch,
        Row,
        budget_of,
        chain_of,
        current_activity,
        exit_code,
        follow_events,
        job_of,
        job_state,
        jobs_to_prune,
        lifecycle_for,
        list_jobs,
        load_plan,
        map_input_rows,
        member_step,
        parse_job,
        parse_where,
        progress_line,
        read_map_rows,
        read_run,
        remove_jobs,
        render,
        resolve_run,
        row_record,
        send_message,
        stop_job,
        wait_job,
        with_options,
    )
    from subagents.runs import RunRequest
    from subagents.types import (
        ApprovalChoice,
        ApprovalDecision,
        ApprovalItem,
        JobResult,
        JobState,
        ProcessIdentity,
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
    # The settings it was planned with when they are those its lifecycle's hooks are read
    # from (for its first run's cwd, with this process's environment): not read again.
    settings: Settings | None = None
    # Its record as made, when made running for this process to drive (``drive_here``).
    state: JobState | None = None


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
    stdin_text: str | None = None,
    dry_run: list[tuple[Row, RunRequest]] | None = None,
    drive_here: bool = False,
) -> PreparedJob:
    """Check and resolve a job and record it (status ``pending``); nothing runs yet.
    ``stdin_text``: a map's input when it is ``-`` (else stdin is read). ``dry_run``: a
    map is only checked, nothing recorded: each row and its request are added to it.
    ``runner``, ``executor``, ``ray_address``, ``ray_shared_cwd`` and ``agent_scope``
    override the settings. ``watch``: processes the job is bound to (:func:`bound_to`): when
    one ends, its runs and its background driver stop (the job ends ``aborted``).
    ``drive_here``: the caller drives it at once (:func:`drive`; not a map): it is recorded
    running from its first write (``JobStore.make``)."""
    env = os.environ if env is None else env
    base = Path(cwd).expanduser() if cwd else paths.working_dir()
    if not base.is_dir():
        raise BadRequest(
            f"cwd: the working directory does not exist or is not a directory: {base}", "cwd"
        )
    job_spec = spec if isinstance(spec, jobs.JobSpec) else jobs.parse_job(spec)
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
    before = None
    if job_spec.mode == "map":
        rows = jobs.read_rows(job_spec, base, stdin_text)
        job_plan, variants = jobs.plan_map(
            job_spec, rows, settings, session=session, cwd=base, env=env, extra_env=extra_env
        )
        if dry_run is not None:
            dry_run.extend(
                (row, job_plan.requests[v]) for row, v in zip(rows, variants, strict=True)
            )
            return PreparedJob(jobs.JobStore(paths.state_home(env)), "", job_plan)

        def before(job_dir: Path) -> None:
            jobs.write_input(job_dir, rows, variants)

    else:
        job_plan = jobs.plan(
            job_spec, settings, session=session, cwd=base, env=env, extra_env=extra_env
        )
    for req in job_plan.requests:
        if tools is not None:
            req.tools = tools
        req.watch = [w.copy() for w in watch or []]
    return _made(
        jobs.JobStore(paths.state_home(env)),
        job_plan,
        background=background,
        before=before,
        settings=_hooks_read(job_plan, base, env, settings),
        drive_here=drive_here and job_spec.mode != "map",
    )


def _made(
    store: JobStore,
    job_plan: JobPlan,
    *,
    background: bool,
    settings: Settings | None,
    drive_here: bool,
    before: Callable[[Path], None] | None = None,
) -> PreparedJob:
    """The job recorded (running, for this process to drive at once: ``drive_here``)."""
    from subagents.lifecycle import sessionlog

    log = None
    if drive_here and job_plan.session:  # the session log its lifecycle uses (lifecycle_for)
        log = sessionlog.session_path(store.home, job_plan.session)
    state = store.make(
        job_plan.to_record(),
        agents=job_plan.labels(),
        background=background,
        before=before,
        driving=str(log) if log else None,
    )
    made = state if drive_here else None
    return PreparedJob(store, state["jobId"], job_plan, settings=settings, state=made)


def bound_to(pid: int, *, foreground: bool) -> list[ProcessIdentity]:
    """What a job started for process ``pid`` (``--parent-pid``) watches: that process, and
    in the foreground this command's own too (its driver, or a warm worker's caller, which
    ends with it: killed outright, it can stop nothing).
    ``BadRequest`` when ``pid`` is not running, before anything is created."""
    from subagents.core import procs

    try:
        parent = procs.identity(pid)
    except (ProcessLookupError, ValueError, OverflowError):
        raise BadRequest(f"--parent-pid {pid}: no such process") from None
    if not procs.is_alive(parent):
        raise BadRequest(f"--parent-pid {pid}: the process has ended")
    return [parent, procs.identity(procs.command_pid())] if foreground else [parent]


def _hooks_read(
    plan: JobPlan, base: Path, env: Mapping[str, str], settings: Settings
) -> Settings | None:
    """``settings`` (read for ``base`` with ``env``) when they are what the job's lifecycle
    reads its hooks from (``lifecycle.hooks.configured_hooks``: the first run's cwd, this
    process's environment; the overrides change neither hooks nor notify_desktop)."""
    if env is not os.environ or not plan.requests:
        return None
    return settings if Path(plan.requests[0].cwd or ".").resolve() == base.resolve() else None


def rehearse_delegation(base: Path, env: Mapping[str, str]) -> None:
    """A one-task job planned in ``base`` as :func:`prepare_job` plans it, its record put
    as JSON, its run checked as it is made, and its CLI's version looked up (kept in memory
    as a run keeps it; never by running the CLI): nothing recorded, nothing started. A warm
    server's standby worker does this before its command comes (cli/warmserver.py:
    ``_rehearse``). Raises what those raise."""
    import io

    from subagents.core.files import _dump_json
    from subagents.runs import check, installed_version

    plan = jobs.plan(
        jobs.job_of("single", [{"task": "x"}], None, "arguments"),
        _job_settings(base, env),
        cwd=base,
        env=env,
    )
    _dump_json(plan.to_record(), io.BytesIO())
    checked = check(plan.requests[0], plan.settings, env, plan.placement)
    if checked.backend.needs_version:
        installed_version(checked.backend, checked.binary, env, paths.state_home(env), probe=False)


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
    drive_here: bool = False,
) -> PreparedJob:
    """Check and record a job of one run that continues ``run``'s conversation with ``task``
    (``watch``, ``drive_here``: as for :func:`prepare_job`)."""
    from subagents.lifecycle import sessionlog

    env = os.environ if env is None else env
    store = jobs.JobStore(paths.state_home(env))
    base = paths.working_dir()
    settings = _job_settings(base, env)
    session = session or sessionlog.default_session_id(env)
    job_plan = jobs.continuation_plan(store, run, task, settings, session)
    job_plan.requests[0].watch = [w.copy() for w in watch or []]
    return _made(
        store,
        job_plan,
        background=background,
        settings=_hooks_read(job_plan, base, env, settings),
        drive_here=drive_here,
    )


def run_labels(job: PreparedJob) -> list[str]:
    return job.plan.labels()


def drive(job: PreparedJob, on_event: EventSink | None = None) -> JobResult:
    """Run a prepared job in this process to its end. In the main thread, Ctrl-C, SIGTERM
    (what `subagents stop` may send) and SIGHUP (the terminal closing, under a parent such
    as pi too) abort the job, which still records its end."""
    from subagents.core.procs import STOP_SIGNALS

    runner = jobs.job_for(job.store, job.job_id, job.plan, job.state)
    restore = runner.stop_on_signals(STOP_SIGNALS) if _in_main_thread() else None
    try:
        result = runner.run(
            on_event=on_event,
            lifecycle=jobs.lifecycle_for(
                job.store.home, job.plan, background=False, settings=job.settings
            ),
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

    made = job.state.get("startedAt") if job.state is not None else None
    if made is not None and background is None:
        job.started_at = made  # made running: its start is recorded (its Job keeps it)
        return made
    job.started_at = iso(time.time())
    if background is None:
        job.store.update(job.job_id, startedAt=job.started_at)
    else:
        job.store.update(job.job_id, startedAt=job.started_at, background=background)
    return job.started_at


def start_background(job: PreparedJob) -> str:
    mark_started(job, background=True)
    job.driver_pid = jobs.start_background(job.store, job.job_id)
    return job.job_id


def describe_job(state: JobState) -> str:
    """``show``'s text of a job (``present.answer.describe``), with each continued run's chain."""
    from subagents.present.answer import describe

    return describe(state, lambda run_id: jobs.chain_of(paths.state_home(), run_id))


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
            finished = state.get("status") in jobs.TERMINAL
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


def reindex() -> tuple[int, int]:
    """Make the local index (``index.sqlite``) again from the job files and the session
    logs (``subagents doctor --reindex``): how many jobs and log entries it holds."""
    from subagents.core import indexdb
    from subagents.lifecycle import cost as costs
    from subagents.lifecycle import logindex

    home = paths.state_home()
    indexdb.discard(home)
    job_count = jobs.JobStore(home).reindex()
    return job_count, logindex.reindex(home, costs.session_files(home))


# ---- agents ---------------------------------------------------------------------


def _settings(base: Path) -> Settings:
    """The effective settings for work in ``base``; a config problem is a ``BadRequest``."""
    from subagents.config import load_settings
    from subagents.errors import ConfigError

    try:
        return load_settings(base)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from None


def inbox(run_id: str | None = None, home: Path | None = None) -> list[ApprovalItem]:
    """The approval items waiting for a decision (docs/approvals.md), oldest first: every
    running run's, or one run's (its id or an unambiguous prefix)."""
    from subagents.runs import pending_items

    home = home or paths.state_home()
    if run_id is not None:
        run_id = jobs.resolve_run(home, run_id)
    return pending_items(home, run_id)


def decide(
    item: str,
    choice: ApprovalChoice,
    *,
    by: str | None = None,
    reason: str | None = None,
    answers: list[str] | None = None,
    home: Path | None = None,
) -> ApprovalDecision:
    """Decide an inbox item (its id or an unambiguous prefix): a request to act ``allow``,
    ``always`` or ``deny``; a question ``answer`` (with ``answers``) or ``deny``. ``by``:
    who, as the records name them (default: the user's login). Raises ``UsageError`` (one
    line, nothing changed) for an unknown or decided item, a choice that does not fit it, or
    an ended run; the loser of two racing deciders is told who won."""
    from subagents.runs import decide as decide_item

    home = home or paths.state_home()
    return decide_item(item, choice, by=by, reason=reason, answers=answers, home=home)


def job_runs(store: JobStore, state: JobState) -> list[str]:
    """Every run of a job: a map's from its row log (its ``runIds`` name none), any other
    job's its ``runIds``."""
    if state.get("mode") == "map":
        return jobs.logged_runs(store.dir / state["jobId"])
    return [r for r in state.get("runIds") or [] if r]


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


def __getattr__(name: str) -> object:
    # The job engine's names the surfaces use (they never import jobs): the ones __all__
    # offers that this module does not define, each from jobs on first use, which imports
    # only its own module (core/lazy.py).
    if name in __all__:
        value = getattr(jobs, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "STOPPED_ORPHAN",
    "TERMINAL",
    "EventSink",
    "Job",
    "JobDocument",
    "JobPlan",
    "JobSpec",
    "JobStore",
    "LiveJobs",
    "MapProgress",
    "MapWatch",
    "PreparedJob",
    "Row",
    "bound_to",
    "budget_of",
    "chain_of",
    "current_activity",
    "decide",
    "describe_job",
    "discover_agents",
    "drive",
    "exit_code",
    "follow_events",
    "get_agent",
    "inbox",
    "job_of",
    "job_runs",
    "job_state",
    "job_transcript",
    "jobs_to_prune",
    "lifecycle_for",
    "list_jobs",
    "load_plan",
    "map_input_rows",
    "mark_started",
    "member_step",
    "parse_job",
    "parse_where",
    "prepare_continuation",
    "prepare_job",
    "progress_line",
    "read_map_rows",
    "read_run",
    "reindex",
    "remove_jobs",
    "render",
    "resolve_run",
    "row_record",
    "run_labels",
    "send_message",
    "start_background",
    "stop_job",
    "wait_job",
    "with_options",
]
