"""The tools' descriptions and the subagent tool's arguments: their schema (made from the
options' one definition, subagents/options.py), and the job spec built from them."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field, create_model

from subagents.errors import PlanError, UsageError, dotted
from subagents.options import Spec, job_specs, step_specs
from subagents.service import parse_job

if TYPE_CHECKING:
    from collections.abc import Mapping

INSTRUCTIONS = """\
Delegate tasks to child coding agents (pi, Claude Code, Codex, Gemini CLI, OpenCode) that run
headless in their own processes. Use `subagent` with `task` for one task, `tasks` for several
independent tasks side by side, or `chain` for steps where each can use the previous answer
through the literal text {previous}. Children start with no memory of this conversation: give
each task everything it needs. Long work: pass `background: true`, then `subagent_result`
(with `wait_seconds`) or `subagent_status`; `subagent_send` sends a running child a message
(a correction while it works, or a follow-up); `subagent_cancel` stops a job. `list_agents` shows
the named agents (model, tools, system prompt) you can pass as `agent`."""


def _names(specs: tuple[Spec, ...], form: str = "`{}`") -> str:
    """The names on this tool of these options, each in ``form``, joined."""
    return ", ".join(form.format(s.name) for s in specs if s.on("mcp"))


SUBAGENT_DESCRIPTION = f"""\
Run a task on a child coding agent and return its final answer.

Give exactly one of:
- `task` (+ optional `agent`): one task;
- `tasks`: several independent tasks run side by side (answers come back in the same order);
- `chain`: steps run one after another; `{{previous}}` in a step is replaced by the previous answer.
Items of `tasks`/`chain` are strings or {{task, cwd?, {_names(step_specs(), "{}?")}}}.
Top-level {_names(step_specs())} apply to every step that does not set its own.
The job's own: {_names(job_specs())} (`job_max_*` bound its runs together; `judge` and
`quorum` are a council's). `isolate: "worktree"` gives each run its own git worktree
(its changes come back committed on branch subagents/<run-id>, see `worktree` in each run's result).
A running child can be corrected with `subagent_send` (its run id is in the progress and results).

In the foreground (default) the call streams progress and returns the answer text plus the
structured job result (status, usage, each run's result). With `background: true` it returns
{{"jobId": ...}} at once; follow with subagent_status / subagent_result / subagent_cancel or
read the resource subagent://jobs/{{jobId}}. A failed job returns an error result with the
diagnostics: what went wrong, exit status, stderr tail, last tool calls."""


SCHEMA = (
    "The answer must be JSON valid against this JSON Schema (2020-12): the schema itself,"
    " inline JSON text or a file; the result's `answer` (and each run's `structured`) is"
    " that value, parsed."
)
COUNCIL = (
    "Ask the same `task` of several members side by side (each backend[:model] or an agent"
    " name, e.g. ['pi', 'claude', 'codex']); the result lists the answers side by side."
)


def _option_fields(specs: tuple[Spec, ...]) -> dict[str, Any]:
    """Pydantic fields for these options, by their names on this tool. Their types are
    checked here (strictly: ``true`` is no number), their meaning where every surface's is
    (the job spec's checks: subagents/options.py); a client sees their ranges."""
    out: dict[str, Any] = {}
    for spec in specs:
        if not spec.on("mcp"):
            continue
        strict = spec.base_type() in (int, float)
        extra: dict[str, Any] | None = dict(spec.meta.limits) or None
        info = Field(
            default=None, strict=strict or None, description=spec.meta.help, json_schema_extra=extra
        )
        out[spec.name] = (spec.type, info)
    return out


# One task of a parallel job or one step of a chain: a task, where it runs, its options.
StepArg: type[BaseModel] = create_model(
    "StepArg",
    __config__=ConfigDict(extra="forbid"),
    __doc__="One task of a parallel job or one step of a chain.",
    task=(
        str,
        Field(
            description="What the child agent should do; self-contained (the child sees nothing else)."
        ),
    ),
    cwd=(
        str | None,
        Field(
            default=None,
            description="Working directory for this step (relative to the call's cwd).",
        ),
    ),
    **_option_fields(step_specs()),
)

StepList = list[str | StepArg]  # type: ignore[valid-type]

# The subagent tool's arguments: the job's shape, then every option the tool offers (a
# step option given here is the default of every step that does not set its own).
SubagentArgs: type[BaseModel] = create_model(
    "SubagentArgs",
    task=(str | None, Field(default=None, description="One task for one child agent (self-contained).")),
    tasks=(StepList | None, Field(default=None, description="Several independent tasks, run side by side.")),
    chain=(
        StepList | None,
        Field(default=None, description="Steps run in order; '{previous}' in a step is the previous step's answer."),
    ),
    cwd=(
        str | None,
        Field(default=None, description="Working directory for the child(ren); default: the server's."),
    ),
    background=(
        bool,
        Field(default=False, description="Return {jobId} at once; the job runs on in a detached driver."),
    ),
    council=(list[str] | None, Field(default=None, description=COUNCIL)),
    **_option_fields(step_specs()),
    **_option_fields(job_specs()),
)  # fmt: skip


def tool_signature(ctx_type: type) -> inspect.Signature:
    """The subagent tool's signature (what the MCP server makes its input schema from):
    a context, then ``SubagentArgs``' fields as keyword arguments."""
    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ctx_type)
    ]
    for name, info in SubagentArgs.model_fields.items():
        described = Field(description=info.description, json_schema_extra=info.json_schema_extra)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=info.default,
                annotation=Annotated[(info.annotation, *info.metadata, described)],
            )
        )
    return inspect.Signature(params, return_annotation=CallToolResult)


# ---- building the job spec from the tool's arguments ---------------------------------------


def build_spec(**args: Any) -> tuple[str, dict[str, object]]:
    """The job document (``{mode, tasks|steps, …}``, checked by ``parse_job``) for the
    ``subagent`` tool's arguments (by their names on the tool; those not given: unset)."""
    task, tasks, chain = args.get("task"), args.get("tasks"), args.get("chain")
    council = args.get("council")
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
    defaults = {s.field: args.get(s.name) for s in step_specs() if s.on("mcp")}

    def step(item: str | BaseModel) -> dict[str, object]:
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
    for s in job_specs():
        if s.on("mcp") and args.get(s.name) is not None:
            spec[s.field] = args[s.name]
    try:
        parse_job(spec, "subagent")  # checked here so the message names this tool's fields
    except PlanError as exc:
        raise ToolError(in_the_tool(exc, mode)) from None
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


def in_the_tool(exc: UsageError, mode: str) -> str:
    """A problem with the job, where the tool's arguments put it: a job option by its name
    here (``job_max_turns``); a step's place in ``chain`` or ``tasks``, or for one task
    none (``agent``)."""
    loc: list[str | int] = list(exc.loc)
    if len(loc) == 1:
        spec = next((s for s in job_specs() if s.field == loc[0]), None)
        loc = [spec.name] if spec is not None else loc
    elif loc[:1] in (["steps"], ["tasks"]) and len(loc) > 1:
        if mode == "single":
            loc = loc[2:]
        elif mode == "chain":
            loc[0] = "chain"
    where = dotted(tuple(loc))
    return f"{where}: {exc.problem}" if where else exc.problem
