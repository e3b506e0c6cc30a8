"""A checked request made a run directory: ``meta.json`` (the ``RunSpec`` its supervisor
runs), the files its child reads (a long task, a system prompt), its worktree when isolated.
Nothing is left half-written: a failure removes the directory."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from subagents.backends import ARGV_TASK_LIMIT, Backend, CommandRequest
from subagents.config import Settings
from subagents.core import ids, paths
from subagents.core.files import make_private_dir, open_private, reserve_space, write_json_atomic
from subagents.core.records import META_VERSION
from subagents.core.upgrade import read_meta, read_result
from subagents.errors import UsageError, WorktreeError
from subagents.launchers import Placement, launcher_for
from subagents.runs.checks import Checked, check
from subagents.runs.request import RunRequest
from subagents.runs.versions import installed_version
from subagents.supervisor.spec import RunSpec

if TYPE_CHECKING:
    from subagents.core.files import Durability
    from subagents.types import ApprovalPolicy, JsonObject, Limits, SchemaMode, WorktreeSpec


def _seconds(value: float | None, default: float | None) -> float | None:
    """A request's limit over the configured one; 0 means off."""
    chosen = default if value is None else value
    return chosen or None


def prepare(
    req: RunRequest,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    *,
    placement: Placement | None = None,
    durable: Durability = "this",
) -> tuple[RunSpec, Path]:
    """Validate ``req`` and write its run directory with ``meta.json``. ``placement``:
    where it will start (else as the settings say). ``durable``: how far ``meta.json`` is
    on disk when this returns (``core.files.Durability``; "whole" for a caller that fsyncs
    the run directory itself before the run starts, while it does something else)."""
    settings = settings or Settings()
    placement = placement or Placement.of(settings)
    env = os.environ if env is None else env
    checked = check(req, settings, env, placement)
    home = home or paths.state_home(env)
    run_id = ids.new_id()
    run_dir = paths.runs_dir(home) / run_id
    version = (
        installed_version(checked.backend, checked.binary, env, home)
        if checked.backend.needs_version
        else None
    )
    try:
        return _write_run_dir(req, settings, placement, checked, run_id, run_dir, version, durable)
    except OSError:
        # A full disk (or an unwritable home): no half-made run directory is left behind.
        import shutil  # (only here: its import is ~3 ms of every run)

        shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _write_run_dir(
    req: RunRequest,
    settings: Settings,
    placement: Placement,
    checked: Checked,
    run_id: str,
    run_dir: Path,
    version: str | None,
    durable: Durability,
) -> tuple[RunSpec, Path]:
    backend, binary, cwd, depth = checked.backend, checked.binary, checked.cwd, checked.depth
    live = backend.live_input(version)
    limits = _limits(req, settings, backend)
    schema = _schema(req, backend)  # codex's strict form refused before anything is made
    make_private_dir(run_dir)
    if req.isolate == "worktree" or req.continue_from is not None:
        # Whose run it is before anything slow (a worktree made, an earlier run's files
        # read): a driver killed from here on leaves a run its job's finisher finds by its
        # meta.json (runs_naming), rewritten whole below. (Without either, the whole one
        # follows within a millisecond.) A power loss that loses it stopped the run before
        # it started.
        first = RunSpec(
            runId=run_id,
            jobId=req.job_id,
            backend=backend.name,
            task=req.task,
            cwd=str(cwd),
            argv=[],
        )
        first.createdAt = time.time()
        record = {"version": META_VERSION, **first.to_dict()}
        write_json_atomic(run_dir / "meta.json", record, durable="none")
    reserve_space(run_dir)
    try:
        resume, worktree = _continuation(req, backend, run_dir)
        if worktree is None and req.isolate == "worktree":
            from subagents import worktree as wt

            # On Ray without a shared filesystem the node makes it, from what is sent there.
            make = wt.ship if placement.ships_cwd else wt.create
            worktree = make(cwd, run_id, run_dir)
    except Exception as exc:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-written
        if isinstance(exc, WorktreeError):
            raise UsageError(str(exc), "isolate") from None
        raise
    child_cwd = cwd
    if worktree is not None:
        from subagents.worktree import child_cwd as cwd_in

        child_cwd = Path(cwd_in(worktree))
    command = CommandRequest(
        task=req.task + (schema.suffix or ""),
        cwd=str(child_cwd),
        model=req.model,
        tools=req.tools,
        thinking=req.thinking,
        system_prompt=req.system_prompt,
        session_dir=str(run_dir / "session") if backend.can_continue else None,
        resume=resume,
        # A live child takes its task on its stdin, in its protocol, at any size.
        task_on_stdin=not live and len(req.task.encode()) > ARGV_TASK_LIMIT,
        copilot_agent_initiator=settings.copilot_agent_initiator,
        live=live,
        # The CLI's own bounds behind the budget (claude): past the grace turns, and the cost.
        own_max_turns=limits["turns"] + settings.wrap_up_grace + 1 if "turns" in limits else None,
        own_max_cost=limits.get("cost"),
        output_schema=schema.given if schema.mode == "own" else None,
        acp=checked.acp,
        approvals=_approvals(checked, run_dir),
    )
    stdin_file = None
    if command.task_on_stdin:
        stdin_file = run_dir / "task.md"
        with open_private(stdin_file, "wb") as f:
            f.write(backend.stdin_task(req.task).encode())
    if req.system_prompt:
        prompt_file = run_dir / "system-prompt.md"
        with open_private(prompt_file, "w") as f:
            f.write(req.system_prompt)
        command.system_prompt_file = str(prompt_file)
    spec = RunSpec(
        runId=run_id,
        jobId=req.job_id,
        backend=backend.name,
        agent=req.agent,
        agentSource=req.agent_source,
        task=req.task,
        cwd=str(child_cwd),
        requestedModel=req.model,
        argv=backend.build_argv(binary, command),
        env={**backend.child_env(command), **req.env},
        timeout=req.timeout if req.timeout is not None else settings.timeout,
        grace=settings.grace,
        killGrace=settings.kill_grace,
        depth=depth,
        createdAt=time.time(),
        echo=launcher_for(placement).echo,
        worktree=worktree,
        keepWorktree=settings.keep_worktree,
        stallTimeout=_seconds(req.stall_timeout, settings.stall_timeout),
        onStall=req.on_stall or settings.on_stall,
        toolTimeout=_seconds(req.tool_timeout, settings.tool_timeout),
        continuedFrom=req.continue_from,
        sessionDir=command.session_dir,
        stdinFile=str(stdin_file) if stdin_file else None,
        watch=list(req.watch),
        live=live,
        refuse={str(kind): why for kind, why in backend.refusals(version).items()} or None,
        limits=limits or None,
        jobLimits={k: v for k, v in (req.job_used or {}).items() if k in limits} or None,
        graceTurns=settings.wrap_up_grace,
        wrapUp=settings.wrap_up_text,
        command=command.record(),
        outputSchema=schema.given,
        schemaHash=schema.hash,
        schemaMode=schema.mode,
        taskSuffix=schema.suffix,
        approvals=command.approvals,
    )
    record = {"version": META_VERSION, **spec.to_dict()}
    write_json_atomic(run_dir / "meta.json", record, durable=durable)
    return spec, run_dir


def _approvals(checked: Checked, run_dir: Path) -> ApprovalPolicy | None:
    """The run's approval policy, with the permission server its child starts (claude's)."""
    if checked.approvals is None or not checked.backend.prompt_server:
        return checked.approvals
    import sys

    server = [sys.executable, "-m", checked.backend.prompt_server, str(run_dir)]
    return {**checked.approvals, "server": [*server, repr(checked.approvals["timeout"])]}


class _Schema(NamedTuple):
    given: JsonObject | None = None  # as the CLI takes it (and the answer is checked against)
    hash: str | None = None
    mode: SchemaMode | None = None
    suffix: str | None = None  # the instruction after the task


def _schema(req: RunRequest, backend: Backend) -> _Schema:
    """How the run's output schema reaches its child: the CLI's own flag (codex's in
    strict form, or refused naming the rule), else an instruction after the task."""
    if req.output_schema is None:
        return _Schema()
    from subagents import structured

    digest = structured.schema_hash(req.output_schema)
    if backend.own_schema:
        given = structured.strict(req.output_schema) if backend.strict_schema else req.output_schema
        return _Schema(given, digest, "own")
    return _Schema(
        req.output_schema, digest, "instructed", structured.instruction(req.output_schema)
    )


def _limits(req: RunRequest, settings: Settings, backend: Backend) -> Limits:
    """The run's budget: its own, else the configured one (a configured cost only where the
    CLI reports costs: it bounds every run, and the others cannot count it)."""
    limits: Limits = {}
    turns = req.max_turns if req.max_turns is not None else settings.max_turns
    tokens = req.max_tokens if req.max_tokens is not None else settings.max_tokens
    cost = req.max_cost
    if cost is None and backend.reports_cost:
        cost = settings.max_cost
    if turns is not None:
        limits["turns"] = turns
    if tokens is not None:
        limits["tokens"] = tokens
    if cost is not None:
        limits["cost"] = cost
    return limits


def _continuation(
    req: RunRequest, backend: Backend, run_dir: Path
) -> tuple[str | None, WorktreeSpec | None]:
    """For a run that continues another: what its child resumes, and the earlier run's
    worktree reopened for this run (a worktree run continues in its own branch)."""
    if req.continue_from is None:
        return None, None
    from subagents.core.records import is_run_result, is_worktree_spec

    earlier = run_dir.parent / req.continue_from
    try:
        meta = read_meta(earlier)
        result = read_result(earlier)
    except (OSError, ValueError):
        meta = result = None
    if not isinstance(meta, dict) or not is_run_result(result):
        raise UsageError(f"run {req.continue_from} has not ended (or its files are gone)")
    resume = backend.resume_point(str(earlier), result)
    if resume is None:
        raise UsageError(
            f"run {req.continue_from} left no {backend.name} session to continue"
            " (runs before sessions were kept cannot be continued)"
        )
    recorded = meta.get("worktree")
    record = result.get("worktree") or (recorded if is_worktree_spec(recorded) else None)
    if record is None:
        return resume, None
    from subagents import worktree as wt

    try:
        return resume, wt.reopen(record, run_dir.name, run_dir)
    except WorktreeError as exc:
        raise UsageError(f"cannot reopen the worktree of run {req.continue_from}: {exc}") from None


def runs_naming(home: Path, job_id: str) -> list[str]:
    """The runs whose ``meta.json`` names ``job_id``, oldest first: for a job whose driver died
    between making a run and recording it in ``job.json``. Only runs made since the job are
    read (ids begin with their time)."""
    from subagents.core.upgrade import read_meta

    since = job_id.split("-")[0]
    found = []
    try:
        entries = list(os.scandir(paths.runs_dir(home)))
    except FileNotFoundError:
        return []
    for entry in entries:
        if entry.name.split("-")[0] < since:
            continue
        try:
            meta = read_meta(Path(entry.path))
        except (OSError, ValueError):
            continue  # not made far enough to say whose it is
        if isinstance(meta, dict) and meta.get("jobId") == job_id:
            found.append(entry.name)
    return sorted(found)
