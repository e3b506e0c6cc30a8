"""The tools' descriptions and the subagent tool's arguments: their schema, and the job spec built from them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

from subagents.errors import PlanError
from subagents.service import parse_job

if TYPE_CHECKING:
    from collections.abc import Mapping

    from subagents.types import BudgetSpec

INSTRUCTIONS = """\
Delegate tasks to child coding agents (pi, Claude Code, Codex, Gemini CLI, OpenCode) that run
headless in their own processes. Use `subagent` with `task` for one task, `tasks` for several
independent tasks side by side, or `chain` for steps where each can use the previous answer
through the literal text {previous}. Children start with no memory of this conversation: give
each task everything it needs. Long work: pass `background: true`, then `subagent_result`
(with `wait_seconds`) or `subagent_status`; `subagent_send` sends a running child a message
(a correction while it works, or a follow-up); `subagent_cancel` stops a job. `list_agents` shows
the named agents (model, tools, system prompt) you can pass as `agent`."""


SUBAGENT_DESCRIPTION = """\
Run a task on a child coding agent and return its final answer.

Give exactly one of:
- `task` (+ optional `agent`): one task;
- `tasks`: several independent tasks run side by side (answers come back in the same order);
- `chain`: steps run one after another; `{previous}` in a step is replaced by the previous answer.
Items of `tasks`/`chain` are strings or {task, agent?, cwd?, model?, backend?, timeout?, isolate?,
max_turns?, max_tokens?, max_cost?}. Top-level `agent`, `model`, `backend`, `timeout`, `isolate`,
`stall_timeout`, `on_stall`, `tool_timeout`, `max_turns`, `max_tokens`, `max_cost` apply to every
step that does not set its own; `job_max_turns`, `job_max_tokens`, `job_max_cost` bound the runs
together. `isolate: "worktree"` gives each run its own git worktree
(its changes come back committed on branch subagents/<run-id>, see `worktree` in each run's result).
A running child can be corrected with `subagent_send` (its run id is in the progress and results).

In the foreground (default) the call streams progress and returns the answer text plus the
structured job result (status, usage, each run's result). With `background: true` it returns
{"jobId": ...} at once; follow with subagent_status / subagent_result / subagent_cancel or
read the resource subagent://jobs/{jobId}. A failed job returns an error result with the
diagnostics: what went wrong, exit status, stderr tail, last tool calls."""


SCHEMA = (
    "The answer must be JSON valid against this JSON Schema (2020-12): the schema itself,"
    " inline JSON text or a file; each run's result holds the value as `structured`."
)
COUNCIL = (
    "Ask the same `task` of several members side by side (each backend[:model] or an agent"
    " name, e.g. ['pi', 'claude', 'codex']); the result lists the answers side by side."
)


class StepArg(BaseModel):
    """One task of a parallel job or one step of a chain."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(
        description="What the child agent should do; self-contained (the child sees nothing else)."
    )
    agent: str | None = Field(
        default=None,
        description="Named agent for this step (see list_agents); default: the call's `agent`.",
    )
    cwd: str | None = Field(
        default=None, description="Working directory for this step (relative to the call's cwd)."
    )
    model: str | None = Field(
        default=None, description="Model for this step (for pi: provider/id)."
    )
    backend: str | None = Field(
        default=None, description="Agent CLI: pi, claude, codex, gemini or opencode."
    )
    # (numbers only, not true; their range is checked where every surface's is: jobs/spec.py)
    timeout: float | None = Field(
        default=None, strict=True, description="Wall-clock limit for this step, seconds."
    )
    isolate: Literal["worktree"] | None = Field(
        default=None,
        description="'worktree': this step works in its own git worktree on branch subagents/<run-id>.",
    )
    max_turns: int | None = Field(default=None, ge=1, description="Budget: model turns.")
    max_tokens: int | None = Field(default=None, ge=1, description="Budget: tokens.")
    max_cost: float | None = Field(default=None, gt=0, description="Budget: cost in USD.")
    output_schema: str | dict[str, object] | None = Field(default=None, description=SCHEMA)


StepList = list[str | StepArg]

# ---- building the job spec from the tool's arguments ---------------------------------------


def build_spec(
    *,
    task: str | None,
    tasks: StepList | None,
    chain: StepList | None,
    agent: str | None = None,
    model: str | None = None,
    backend: str | None = None,
    timeout: float | None = None,
    concurrency: int | None = None,
    isolate: str | None = None,
    stall_timeout: float | None = None,
    on_stall: str | None = None,
    tool_timeout: float | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    output_schema: str | dict[str, object] | None = None,
    council: list[str] | None = None,
    judge: str | None = None,
    quorum: int | None = None,
    job_budget: BudgetSpec | None = None,
) -> tuple[str, dict[str, object]]:
    """The job document (``{mode, tasks|steps, concurrency?}``, checked by ``parse_job``) for
    the ``subagent`` tool's arguments."""
    given = [
        name
        for name, value in (("task", task), ("tasks", tasks), ("chain", chain))
        if value is not None
    ]
    if not given:
        raise ToolError(
            "no task given: pass 'task' (one task), 'tasks' (several, in parallel) or 'chain' (steps in order)"
        )
    if len(given) > 1:
        raise ToolError(
            f"give only one of 'task', 'tasks' or 'chain', not {' and '.join(repr(g) for g in given)}"
        )
    defaults: dict[str, object] = {
        "agent": agent,
        "model": model,
        "backend": backend,
        "timeout": timeout,
        "isolate": isolate,
        "stall_timeout": stall_timeout,
        "on_stall": on_stall,
        "tool_timeout": tool_timeout,
        "max_turns": max_turns,
        "max_tokens": max_tokens,
        "max_cost": max_cost,
        "output_schema": output_schema,
    }

    def step(item: str | StepArg) -> dict[str, object]:
        data: dict[str, object] = (
            {"task": item} if isinstance(item, str) else item.model_dump(exclude_none=True)
        )
        for key, value in defaults.items():
            if value is not None and data.get(key) is None:
                data[key] = value
        return data

    if task is not None:
        if not task.strip():
            raise ToolError("task: the task is empty")
        mode, key, items = "single", "steps", [step(task)]
        if council is not None:
            mode, items = "council", _council(task, council, step(task))
    elif council is not None:
        raise ToolError("council: give the one `task` its members answer")
    elif tasks is not None:
        if not tasks:
            raise ToolError("tasks: the list is empty (give at least one task)")
        mode, key, items = "parallel", "tasks", [step(t) for t in tasks]
    else:
        assert chain is not None
        if not chain:
            raise ToolError("chain: the list is empty (give at least one step)")
        mode, key, items = "chain", "steps", [step(t) for t in chain]
    spec: dict[str, object] = {"mode": mode, key: items}
    if concurrency is not None:
        spec["concurrency"] = concurrency
    spec.update({k: v for k, v in (("judge", judge), ("quorum", quorum)) if v is not None})
    spec.update(job_budget or {})
    try:
        parse_job(spec, "subagent")  # checked here so the message names this tool's fields
    except PlanError as exc:
        raise ToolError(rename_fields(str(exc), mode)) from None
    return mode, spec


def _council(
    task: str, members: list[str], defaults: Mapping[str, object]
) -> list[dict[str, object]]:
    from subagents.backends import known_backends
    from subagents.errors import FieldProblem
    from subagents.service import member_step

    if not members:
        raise ToolError("council: the list is empty (give at least one member)")
    base = {k: v for k, v in defaults.items() if k not in ("agent", "backend", "model")}
    try:
        return [{**base, "task": task, **member_step(m, known_backends())} for m in members]
    except FieldProblem as exc:
        raise ToolError(f"council: {exc.problem}") from None


def rename_fields(message: str, mode: str) -> str:
    """Job-shape field names → this tool's (``steps.0.agent`` → ``agent`` or ``chain.0.agent``)."""
    message = re.sub(r"^(subagent|job): ", "", message)
    message = re.sub(r"^max_(turns|tokens|cost):", r"job_max_\1:", message)  # the job's
    if mode == "single":
        return re.sub(r"\b(steps|tasks)\.0\.", "", message)
    if mode == "chain":
        return re.sub(r"\bsteps\.(\d+)\.", r"chain.\1.", message)
    return message
