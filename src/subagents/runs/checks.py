"""Everything that can be wrong with a run's request, found before anything is created or
spawned, and raised as one ``UsageError`` line naming the field."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.backends import ARGV_TASK_LIMIT, MAX_TASK_BYTES, Backend, get_backend
from subagents.config import Settings
from subagents.core.inputs import (
    BUDGET_FIELDS,
    budget_problem,
    seconds_problem,
    text_problem,
    timeout_problem,
)
from subagents.core.paths import working_dir
from subagents.core.procs import which
from subagents.errors import UsageError
from subagents.launchers import Placement, launcher_for
from subagents.runs.acpcheck import acp_record
from subagents.runs.approvalcheck import approval_policy
from subagents.runs.request import RunRequest

if TYPE_CHECKING:
    from subagents.types import AcpRecord, ApprovalPolicy


def current_depth(env: Mapping[str, str]) -> int:
    try:
        return max(0, int(env.get("SUBAGENTS_DEPTH", "0")))
    except ValueError:
        return 0


def resolve_binary(backend: Backend, settings: Settings, env: Mapping[str, str]) -> str:
    var = backend.binary_env_var()
    configured = env.get(var) or settings.bins.get(backend.name)
    wanted = configured or backend.default_binary
    if os.sep in wanted:
        if os.path.isfile(wanted) and os.access(wanted, os.X_OK):
            return wanted
        raise UsageError(
            f"{backend.name} executable not found or not executable: {wanted} (from {var} or config)",
            "backend",
        )
    found = which(wanted, path=env.get("PATH"))
    if found is None:
        hint = f"; install it with: {backend.install_hint}" if backend.install_hint else ""
        raise UsageError(
            f"{backend.name} executable {wanted!r} not found on PATH (set {var} to its path){hint}",
            "backend",
        )
    return found


def check_capabilities(backend: Backend, req: RunRequest) -> None:
    if req.tools is not None and not backend.supports_tools:
        raise UsageError(
            f"backend {backend.name} cannot restrict tools; remove 'tools' from the agent or choose another backend",
            "backend",
        )
    if req.thinking and not backend.supports_thinking:
        raise UsageError(
            f"backend {backend.name} has no thinking level setting; drop 'thinking' (or the agent's) or choose another backend",
            "backend",
        )
    if req.system_prompt and not backend.supports_system_prompt:
        raise UsageError(
            f"backend {backend.name} cannot take a system prompt; choose another backend",
            "backend",
        )
    if req.output_schema is not None and backend.strict_schema:
        from subagents.structured import strict

        strict(req.output_schema)  # a schema its strict mode refuses: one line, up front


def check_values(req: RunRequest, settings: Settings) -> None:
    """The request's text and numbers, checked as every surface checks them."""
    texts = {
        "task": req.task,
        "model": req.model,
        "cwd": req.cwd,
        "system_prompt": req.system_prompt,
        "thinking": req.thinking,
        **{f"env.{k}": v for k, v in req.env.items()},
        **{f"tools.{i}": t for i, t in enumerate(req.tools or [])},
    }
    for name, value in texts.items():
        problem = text_problem(value) if value is not None else None
        if problem:
            raise UsageError(f"{name}: {problem}", name.split(".")[0])
    for name, timeout in (("timeout", req.timeout), ("timeout", settings.timeout)):
        problem = timeout_problem(timeout) if timeout is not None else None
        if problem:
            raise UsageError(f"timeout: {problem}", name)


def check_task_size(backend: Backend, task: str) -> None:
    size = len(task.encode())
    if size > MAX_TASK_BYTES:
        raise UsageError(
            f"the task is {size} bytes, over the limit of {MAX_TASK_BYTES} bytes (10 MiB)", "task"
        )
    if size > ARGV_TASK_LIMIT and not backend.reads_task_from_stdin:
        raise UsageError(
            f"the task is {size} bytes; backend {backend.name} takes its task on the command"
            f" line, which holds at most {ARGV_TASK_LIMIT} bytes",
            "task",
        )


def check_watchdog(req: RunRequest) -> None:
    for name in ("stall_timeout", "tool_timeout"):
        value = getattr(req, name)
        problem = None if value is None else seconds_problem(value, off=True)
        if problem:
            raise UsageError(f"{name}: {problem}", name)
    if req.on_stall not in (None, "notice", "abort"):
        raise UsageError(
            f"unknown on_stall policy {req.on_stall!r} (use notice or abort)", "on_stall"
        )


def check_budget(backend: Backend, req: RunRequest) -> None:
    """The run's budget: numbers that can bound a run, of kinds its CLI reports."""
    for name in BUDGET_FIELDS:
        value = getattr(req, name)
        problem = None if value is None else budget_problem(name, value)
        if problem:
            raise UsageError(f"{name}: {problem}", name)
    if req.max_cost is not None and not backend.reports_cost:
        raise UsageError(
            f"{backend.name} reports no cost, so a cost limit cannot be counted"
            " (bound its tokens with max_tokens instead)",
            "max_cost",
        )


def check_travels(req: RunRequest, cwd: Path) -> None:
    """On Ray without a shared filesystem a run's working directory must reach its node:
    only a git repository does, sent with ``--isolate worktree``."""
    if req.continue_from is not None:
        raise UsageError(
            "a run on Ray cannot be continued without --ray-shared-cwd yet: continue it"
            " where its working directory exists (--ray-shared-cwd, or the local executor)",
            "isolate",
        )
    if req.isolate == "worktree":
        return
    from subagents.worktree import repo_root

    if repo_root(cwd) is None:
        raise UsageError(
            f"{cwd} is not on the Ray nodes and is not in a git repository, the only kind"
            " that travels there: pass --ray-shared-cwd if it exists at the same path on"
            " every node",
            "cwd",
        )
    raise UsageError(
        f"{cwd} is not on the Ray nodes: add --isolate worktree to send its repository (the"
        " run's changes come back as branch subagents/<run-id>), or pass --ray-shared-cwd"
        " if it exists at the same path on every node",
        "isolate",
    )


@dataclass
class Checked:
    """A request that passed every check, with what the checks found."""

    backend: Backend
    binary: str
    cwd: Path
    depth: int
    acp: AcpRecord | None = None
    approvals: ApprovalPolicy | None = None


def check(
    req: RunRequest, settings: Settings, env: Mapping[str, str], placement: Placement
) -> Checked:
    """Everything that can be wrong with ``req``, found without creating anything."""
    if not req.task or not req.task.strip():
        raise UsageError("the task is empty", "task")
    check_values(req, settings)
    depth = current_depth(env) + 1
    if depth > settings.max_depth:
        raise UsageError(
            f"refusing to delegate: nesting depth {depth} would exceed the maximum of {settings.max_depth}"
            " (SUBAGENTS_DEPTH; raise max_depth in config to allow it)"
        )
    name = req.backend or settings.default_backend
    backend = get_backend(name)
    acp = acp_record(backend, req, settings)
    approvals = approval_policy(backend, req, settings)
    check_capabilities(backend, req)
    check_task_size(backend, req.task)
    launcher_for(placement).check()
    cwd = Path(req.cwd).expanduser() if req.cwd else working_dir()
    if not cwd.is_dir():
        raise UsageError(
            f"cwd: the working directory does not exist or is not a directory: {cwd}", "cwd"
        )
    check_watchdog(req)
    check_budget(backend, req)
    if req.isolate is not None:
        if req.isolate != "worktree":
            raise UsageError(f"unknown isolation {req.isolate!r} (use worktree)", "isolate")
        from subagents.worktree import isolation_problem

        problem = (
            None
            if req.continue_from is not None
            else isolation_problem(cwd, travels=placement.ships_cwd)
        )
        if problem:
            raise UsageError(problem, "isolate")
    if placement.ships_cwd:
        check_travels(req, cwd)
    binary = resolve_binary(backend, settings, env)
    return Checked(backend, binary, cwd.resolve(), depth, acp, approvals)
