"""What a caller asks for: a job of one, several side by side, or several one after another.

The same shape in plan files, the Python API and the MCP tool:

    {"mode": "parallel", "concurrency": 2, "tasks": [{"agent": "scout", "task": "...", "cwd": "..."}]}
    {"mode": "chain", "steps": [{"agent": "scout", "task": "..."}, {"agent": "worker", "task": "use this: {previous}"}]}

Every problem is found before anything starts and reported as one line naming the field.

The spec is plain dataclasses whose ``__post_init__`` holds every check of meaning (text,
ranges, choices, the shape of a job), so however one is made, it is checked the same way.
A document (a plan file, an API dict, MCP arguments) is checked by pydantic against these
same classes (:func:`parse_job`: types, unknown fields); the command line builds one
directly (:func:`job_of`), click having checked its types, so a plain ``subagents run``
never imports pydantic (~70 ms and ~12 MB of its start).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from subagents.core.inputs import (
    BUDGET_FIELDS,
    UNKNOWN_KEY,
    Budget,
    Seconds,
    check_at_least,
    check_budget,
    check_choice,
    first_problem,
    seconds_problem,
    text_problem,
)
from subagents.errors import FieldProblem, PlanError
from subagents.types import BudgetSpec, Executor, JobMode, OnStall

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

PREVIOUS = "{previous}"
MODES = ("single", "parallel", "chain", "council")


@dataclass
class Step:
    # pydantic reads this when checking a document against the class.
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    task: str
    agent: str | None = None
    cwd: str | None = None
    model: str | None = None
    backend: str | None = None
    # (Seconds: a document's ``true`` is no number of seconds; pydantic would make it 1.)
    timeout: Annotated[float | None, Seconds] = None
    # "worktree": the run works in its own git worktree on branch subagents/<run-id>.
    isolate: Literal["worktree"] | None = None
    # The stall watchdog (0: off), its policy, and the bound on one tool call (0: none).
    stall_timeout: Annotated[float | None, Seconds] = None
    on_stall: OnStall | None = None
    tool_timeout: Annotated[float | None, Seconds] = None
    # The run's budget (docs/live-control.md): model turns, tokens, cost in USD.
    max_turns: Annotated[int | None, Budget] = None
    max_tokens: Annotated[int | None, Budget] = None
    max_cost: Annotated[float | None, Budget] = None
    # The answer's JSON Schema (docs/structured.md): a file, inline JSON, or a mapping.
    output_schema: str | dict[str, object] | None = None

    def __post_init__(self) -> None:
        for name in ("task", "agent", "cwd", "model", "backend"):
            value = getattr(self, name)
            problem = None if value is None else text_problem(value)
            if problem:
                raise FieldProblem(name, problem)
        if not self.task.strip():
            raise FieldProblem("task", "the task is empty")
        for name, off in (("timeout", False), ("stall_timeout", True), ("tool_timeout", True)):
            value = getattr(self, name)
            problem = None if value is None else seconds_problem(value, off=off)
            if problem:
                raise FieldProblem(name, problem)
        check_choice("isolate", self.isolate, ("worktree",))
        check_choice("on_stall", self.on_stall, ("notice", "abort"))
        for name in BUDGET_FIELDS:
            check_budget(name, getattr(self, name))

    def shape(self) -> dict[str, Any]:
        """The step as a document says it (unset fields left out)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


@dataclass
class JobSpec:
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    mode: JobMode
    # ``tasks`` and ``steps`` are two spellings of one list (parallel plans say tasks,
    # chains say steps); either is accepted for any mode, and kept as ``steps``.
    steps: list[Step] = field(default_factory=list)
    tasks: list[Step] | None = None
    concurrency: int | None = None
    # Where the job's runs execute (else from config): see docs/cluster.md.
    executor: Executor | None = None
    # The job's budget: the most its runs may use together (each run's own is its step's).
    max_turns: Annotated[int | None, Budget] = None
    max_tokens: Annotated[int | None, Budget] = None
    max_cost: Annotated[float | None, Budget] = None
    # A council (mode "council", docs/structured.md): the judge (backend[:model] or an
    # agent) that reads every answer, and how many members must answer (default 1).
    judge: str | None = None
    quorum: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FieldProblem(
                "mode", f"unknown mode {self.mode!r} (use single, parallel, chain or council)"
            )
        if self.tasks is not None:
            if self.steps:
                raise FieldProblem("", "give either 'tasks' or 'steps', not both")
            self.steps, self.tasks = self.tasks, None
        if not self.steps:
            raise FieldProblem("", "the job has no tasks")
        if self.mode == "single" and len(self.steps) != 1:
            raise FieldProblem("", f"mode 'single' takes exactly one task, not {len(self.steps)}")
        if self.mode == "chain" and PREVIOUS in self.steps[0].task:
            raise FieldProblem("steps.0.task", "the first step has no {previous} to use")
        check_at_least("concurrency", self.concurrency, 1)
        if self.mode != "council" and (self.judge is not None or self.quorum is not None):
            raise FieldProblem(
                "judge" if self.judge is not None else "quorum", "only a council has one"
            )
        check_at_least("quorum", self.quorum, 1)
        if self.quorum is not None and self.quorum > len(self.steps):
            raise FieldProblem(
                "quorum", f"{self.quorum} is more than the council's {len(self.steps)} members"
            )
        check_choice("executor", self.executor, ("local", "ray"))
        for name in BUDGET_FIELDS:
            check_budget(name, getattr(self, name))

    def budget(self) -> BudgetSpec:
        """The job's budget as its fields say it (``max_turns`` …), unset ones left out."""
        return budget_of(self.max_turns, self.max_tokens, self.max_cost)


def budget_of(max_turns: int | None, max_tokens: int | None, max_cost: float | None) -> BudgetSpec:
    """A job's budget from its three limits, the unset ones left out."""
    budget: BudgetSpec = {}
    if max_turns is not None:
        budget["max_turns"] = max_turns
    if max_tokens is not None:
        budget["max_tokens"] = max_tokens
    if max_cost is not None:
        budget["max_cost"] = max_cost
    return budget


def _at(source: str, where: str, problem: str) -> PlanError:
    return PlanError(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


def job_of(
    mode: JobMode,
    steps: list[dict[str, Any]],
    concurrency: int | None = None,
    source: str = "arguments",
    executor: Executor | None = None,
    budget: BudgetSpec | None = None,
    judge: str | None = None,
    quorum: int | None = None,
) -> JobSpec:
    """A job from values already of the right types (the command line's, which click
    checked): the checks of meaning run, with the messages :func:`parse_job` gives.
    ``judge`` and ``quorum``: a council's."""
    built: list[Step] = []
    for i, values in enumerate(steps):
        try:
            built.append(Step(**values))
        except FieldProblem as exc:
            raise _at(source, f"steps.{i}.{exc.where}", exc.problem) from None
    try:
        return JobSpec(
            mode=mode,
            steps=built,
            concurrency=concurrency,
            executor=executor,
            judge=judge,
            quorum=quorum,
            **(budget or {}),
        )
    except FieldProblem as exc:
        raise _at(source, exc.where, exc.problem) from None


def with_options(
    spec: JobSpec,
    step_defaults: dict[str, Any],
    concurrency: int | None,
    source: str,
    budget: BudgetSpec | None = None,
) -> JobSpec:
    """``spec`` (a plan file's) under command-line options: each step's unset fields from
    ``step_defaults``, ``concurrency`` and the job's budget (``budget``) when given; checked
    again."""
    given = {k: v for k, v in step_defaults.items() if v is not None}
    job_budget: BudgetSpec = {**spec.budget(), **(budget or {})}
    if not given and concurrency is None and job_budget == spec.budget():
        return spec
    steps = [{**given, **step.shape()} for step in spec.steps]
    if concurrency is None:
        concurrency = spec.concurrency
    return job_of(
        spec.mode, steps, concurrency, source, spec.executor, job_budget, spec.judge, spec.quorum
    )


def parse_job(data: object, source: str = "job") -> JobSpec:
    """A job from a document (a plan file's mapping, an API dict, MCP arguments)."""
    if isinstance(data, JobSpec):
        return data
    if not isinstance(data, dict):
        raise PlanError(f"{source}: a job is a mapping with 'mode' and 'tasks' or 'steps'")
    from pydantic import ValidationError

    try:
        return _adapter().validate_python(data)
    except ValidationError as exc:
        raise _describe(exc, source) from None


@cache
def _adapter() -> TypeAdapter[JobSpec]:
    from pydantic import TypeAdapter

    return TypeAdapter(JobSpec)


def _describe(exc: ValidationError, source: str) -> PlanError:
    loc, msg, err = first_problem(exc.errors())
    if err["type"] == "literal_error" and loc == ["mode"]:
        msg = f"unknown mode {err.get('input')!r} (use single, parallel or chain)"
    if err["type"] in UNKNOWN_KEY:
        msg = "unknown field"
    return _at(source, ".".join(loc), msg)


def load_plan(path: Path) -> JobSpec:
    """A plan file: YAML (JSON is YAML too)."""
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanError(f"{path}: invalid YAML{where}: {problem}") from None
    return parse_job(data, str(path))
