"""A job planned: ``plan()`` turns a ``JobSpec`` into resolved run requests under the
job's settings and placement, finding every problem before anything starts; the
``JobPlan`` is what ``job.json`` keeps and a restarted job driver runs again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from subagents.config import Settings, settings_from_record, settings_record
from subagents.core.paths import working_dir
from subagents.errors import FieldProblem, Loc, PlanError, UsageError, dotted
from subagents.jobs.spec import PREVIOUS, JobSpec, Step
from subagents.launchers import Placement
from subagents.runs import RunRequest, check

if TYPE_CHECKING:
    from subagents.agents import AgentDef
    from subagents.types import BudgetSpec, JobMode, JobPlanRecord, JsonObject

_T = TypeVar("_T")


def _no_budget() -> BudgetSpec:
    return {}


@dataclass
class JobPlan:
    """A validated job: what to run, under which settings, where its runs start. Stored in
    ``job.json`` (``plan``: ``requests``, the settings as ``limits``, ``placement``)."""

    mode: JobMode
    requests: list[RunRequest]
    settings: Settings
    placement: Placement
    concurrency: int = 4
    session: str | None = None
    extra: JsonObject = field(default_factory=dict)
    # The job's budget: the most its runs may use together (``max_turns`` …).
    budget: BudgetSpec = field(default_factory=_no_budget)

    def labels(self) -> list[str]:
        """What each run is called where a job is shown: its agent, else its backend."""
        return [r.agent or r.backend or self.settings.default_backend for r in self.requests]

    def to_record(self) -> JobPlanRecord:
        return {
            "mode": self.mode,
            "requests": [r.to_record() for r in self.requests],
            "limits": settings_record(self.settings),
            "placement": self.placement.to_record(),
            "concurrency": self.concurrency,
            "session": self.session,
            "extra": self.extra,
            "budget": self.budget,
        }

    @classmethod
    def from_record(cls, record: JobPlanRecord) -> JobPlan:
        settings = settings_from_record(record["limits"])
        # Read through core.upgrade: a record of any version has its placement.
        placement = Placement.from_record(record["placement"])
        return cls(
            mode=record["mode"],
            requests=[RunRequest.from_record(r) for r in record["requests"]],
            settings=settings,
            placement=placement,
            concurrency=record["concurrency"],
            session=record["session"],
            extra=dict(record["extra"]),
            budget=record["budget"],
        )


def plan(
    spec: JobSpec,
    settings: Settings,
    *,
    session: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> JobPlan:
    """Resolve agents and check every step; raises ``PlanError`` naming the field.
    ``settings``: the caller's, with its overrides (the command line's) applied."""
    if spec.executor is not None:  # the plan's choice beats config
        settings = replace(settings, executor=spec.executor)
    placement = Placement.of(settings)
    env = os.environ if env is None else env
    base = (cwd or working_dir()).resolve()
    n = len(spec.steps)
    if spec.mode in ("parallel", "council") and n > settings.max_parallel_tasks:
        raise PlanError(
            f"{n} tasks exceed the limit of {settings.max_parallel_tasks} (max_parallel_tasks in config)",
            ("tasks",),
        )
    if n > settings.max_spawns_per_job:
        raise PlanError(
            f"{n} runs exceed the spawn cap of {settings.max_spawns_per_job} per job (max_spawns_per_job)",
            ("tasks",),
        )
    key = "tasks" if spec.mode == "parallel" else "steps"
    requests: list[RunRequest] = []
    steps = list(spec.steps)
    extra: JsonObject = {}
    if spec.mode == "council":
        extra = {"quorum": spec.quorum or 1, "judge": spec.judge is not None}
        if spec.judge is not None:
            steps.append(_judge_step(spec))
    for i, step in enumerate(steps):
        where: Loc = (key, i) if i < n else ("judge",)
        requests.append(
            resolve_step(step, where, settings, base, env, placement, extra_env, gated=i < n)
        )
    concurrency = max(1, min(spec.concurrency or settings.concurrency, n))
    budget = spec.budget()
    if budget.get("max_cost") is not None:
        check_job_cost(requests, settings)
    return JobPlan(
        spec.mode, requests, settings, placement, concurrency, session, extra, budget=budget
    )


def resolve_step(
    step: Step,
    where: Loc,
    settings: Settings,
    base: Path,
    env: Mapping[str, str],
    placement: Placement,
    extra_env: dict[str, str] | None = None,
    *,
    gated: bool = True,
) -> RunRequest:
    """One step as a checked run request: its agent resolved, its cwd found, its schema
    read; a ``PlanError`` located at ``where`` (``("tasks", 0)``) and the field otherwise.
    ``gated``: a run asked for, checked by its gate; not a gate's reviewer nor a council's
    judge, which are runs of the job's own making (a reviewer reviewed would never end)."""
    agent = None
    agent_name = step.agent or settings.default_agent
    if agent_name:
        # Agent files (yaml, their model) are read only for a step that names an agent.
        from subagents.agents import get_agent
        from subagents.errors import AgentError

        try:
            agent = get_agent(agent_name, base, settings.agent_scope, env)
        except AgentError as exc:
            raise PlanError(str(exc), (*where, "agent")) from None
    step_cwd = Path(step.cwd).expanduser() if step.cwd else base
    if not step_cwd.is_absolute():
        step_cwd = base / step_cwd
    if not step_cwd.is_dir():
        raise PlanError(f"directory does not exist: {step_cwd}", (*where, "cwd"))
    req = RunRequest(
        task=step.task,
        backend=step.backend or (agent.backend if agent else None),
        model=step.model or (agent.model if agent else None),
        cwd=str(step_cwd.resolve()),
        timeout=step.timeout or (agent.timeout if agent else None),
        tools=list(agent.tools) if agent and agent.tools is not None else None,
        system_prompt=(agent.system_prompt or None) if agent else None,
        thinking=step.thinking or (agent.thinking if agent else None),
        agent=agent.name if agent else None,
        agent_source=_source_of(agent) if agent else None,
        env=dict(extra_env or {}),
        isolate=step.isolate or (agent.isolation if agent else None),
        stall_timeout=step.stall_timeout,
        on_stall=step.on_stall,
        tool_timeout=step.tool_timeout,
        # The step's budget, else its agent's.
        max_turns=_first(step.max_turns, agent.max_turns if agent else None),
        max_tokens=_first(step.max_tokens, agent.max_tokens if agent else None),
        max_cost=_first(step.max_cost, agent.max_cost if agent else None),
        acp_command=step.acp_command,
        permissions=step.permissions,
        approve_edits_in_tree=step.approve_edits_in_tree,
        approval_timeout=_first(step.approval_timeout, settings.approval_timeout),
    )
    _approvals(req, step, agent, settings)
    if gated:
        step = _gate_fields(step, agent, settings, where)
        if step.verify is not None or step.review is not None:
            req.gate = _gate(step, where, settings, base, env, placement, extra_env)
    try:
        req.output_schema = _schema(step, agent, settings, base)
    except UsageError as exc:
        raise PlanError(str(exc), (*where, "output_schema")) from None
    try:
        # {previous} is only known at run time; check the step with a stand-in.
        check(replace(req, task=req.task.replace(PREVIOUS, "x")), settings, env, placement)
    except UsageError as exc:
        raise PlanError(str(exc), (*where, *exc.loc) if exc.loc else ()) from None
    return req


def _approvals(req: RunRequest, step: Step, agent: AgentDef | None, settings: Settings) -> None:
    """The run's approval policy and its rules: the step's, else its agent's, else the
    config's (docs/approvals.md); rules go with the policy they came with, unless the step
    gives its own. The config's timeout counts only where a policy asks. (What the parent
    may allow is the user's alone: the settings', never a step's: runs/approvalcheck.py.)"""
    if step.approvals is not None:
        req.approvals, req.approve = step.approvals, step.approve
    elif agent is not None and agent.approvals is not None:
        req.approvals, req.approve = agent.approvals, step.approve or agent.approve
    else:
        agents = agent.approve if agent is not None else None
        req.approvals = settings.approvals
        req.approve = step.approve or agents or settings.approve
    if req.approvals in (None, "auto") and step.approval_timeout is None:
        req.approval_timeout = None


def _gate_fields(step: Step, agent: AgentDef | None, settings: Settings, where: Loc) -> Step:
    """The step's gate: each of its fields the step's own, else its agent's, else the
    settings' (config)."""
    verify = step.verify or (agent.verify if agent else None) or settings.verify
    review = step.review or (agent.review if agent else None) or settings.review
    if verify is None and review is None:
        if step.verify_timeout is not None or step.verify_attempts is not None:
            raise PlanError(
                "a gate's timeout and attempts need its command or its reviewer"
                " (the step's, its agent's or the config's)",
                (*where, "verify"),
            )
        return step
    return replace(
        step,
        verify=verify,
        review=review,
        verify_timeout=_first(step.verify_timeout, settings.verify_timeout),
        verify_attempts=_first(step.verify_attempts, settings.verify_attempts),
    )


def _gate(
    step: Step,
    where: Loc,
    settings: Settings,
    base: Path,
    env: Mapping[str, str],
    placement: Placement,
    extra_env: dict[str, str] | None,
) -> JsonObject | None:
    """The step's acceptance gate (jobs/gates.py), its reviewer resolved as a run."""
    from subagents.jobs.gates import gate_of

    reviewer = None
    if step.review is not None:
        from subagents.jobs.review import review_step

        who = review_step(step.review, step)
        reviewer = resolve_step(
            who, (*where, "review"), settings, base, env, placement, extra_env, gated=False
        )
    gate = gate_of(
        step.verify,
        step.verify_timeout,
        step.verify_attempts,
        dotted((*where, "verify")),
        step.review,
        reviewer,
    )
    return gate.to_record() if gate is not None else None


def _judge_step(spec: JobSpec) -> Step:
    """A council's judge as a step: every answer in its task (at run time), the verdict's
    schema its output schema."""
    from subagents.backends import known_backends
    from subagents.jobs.council import JUDGE_TASK, VERDICT_SCHEMA, member_step

    assert spec.judge is not None
    try:
        who = member_step(spec.judge, known_backends())
    except FieldProblem as exc:
        raise PlanError(exc.problem, ("judge",)) from None
    return Step(
        task=JUDGE_TASK,
        agent=who.get("agent"),
        backend=who.get("backend"),
        model=who.get("model"),
        output_schema=dict(VERDICT_SCHEMA),
    )


def _schema(
    step: Step, agent: AgentDef | None, settings: Settings, base: Path
) -> JsonObject | None:
    """The step's output schema, else its agent's (a path read beside the agent file), else
    the configured one; read and checked (structured.load_schema)."""
    given, where = step.output_schema, base
    if given is None and agent is not None and agent.outputSchema is not None:
        given = agent.outputSchema
        where = agent.path.parent if agent.path is not None else base
    if given is None and settings.output_schema:
        given = settings.output_schema
    if given is None:
        return None
    from subagents.structured import load_schema

    return load_schema(given, where)


def _first(value: _T | None, fallback: _T | None) -> _T | None:
    return fallback if value is None else value


def check_job_cost(requests: list[RunRequest], settings: Settings) -> None:
    """A job's cost budget is counted over every run: each CLI must report costs."""
    from subagents.backends import get_backend

    for req in requests:
        backend = get_backend(req.backend or settings.default_backend)
        if not backend.reports_cost:
            raise PlanError(
                f"{backend.name} reports no cost, so the job's cost limit cannot be"
                " counted (bound its tokens with max_tokens instead)",
                ("max_cost",),
            )


def _source_of(agent: AgentDef) -> str:
    """Where an agent came from: ``builtin``, or ``user:<path>`` / ``project:<path>``."""
    if agent.source == "builtin" or agent.path is None:
        return str(agent.source)
    return f"{agent.source}:{agent.path}"
