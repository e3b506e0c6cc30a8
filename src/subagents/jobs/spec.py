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

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from subagents.core.inputs import (
    UNKNOWN_KEY,
    check_at_least,
    check_choice,
    first_problem,
    text_problem,
)
from subagents.errors import FieldProblem, PlanError
from subagents.options import JobOptions, RunOptions

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

    from subagents.types import BudgetSpec, JobMode

PREVIOUS = "{previous}"
MAP_FIELDS = ("input", "input_format", "key", "where", "limit", "retries", "out")
MODES = ("single", "parallel", "chain", "council", "map")


@dataclass
class Step(RunOptions):
    """One task of a job: the task, where it runs, and its run options (``RunOptions``:
    agent, backend, model, timeout, budget, … each defined once in subagents/options.py)."""

    # pydantic reads this when checking a document against the class.
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    task: str
    cwd: str | None = None

    def __post_init__(self) -> None:
        for name in ("task", "cwd"):
            value = getattr(self, name)
            problem = None if value is None else text_problem(value)
            if problem:
                raise FieldProblem(name, problem)
        if not self.task.strip():
            raise FieldProblem("task", "the task is empty")
        self.check_options()
        # The gate's options together (each is checked on its own by check_options).
        if self.verify is not None and not self.verify.strip():
            raise FieldProblem("verify", "the command is empty")
        if self.review is not None and not self.review.strip():
            raise FieldProblem("review", "the reviewer is empty (give backend[:model] or an agent)")
        # (A timeout or attempts alone may tune its agent's or the config's gate: planning
        # refuses them when there is none.)

    def shape(self) -> dict[str, Any]:
        """The step as a document says it (unset fields left out)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


@dataclass
class JobSpec(JobOptions):
    """A job: its mode, its steps, and its job options (``JobOptions``: concurrency, the
    job's budget, a council's judge and quorum, the executor)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    mode: JobMode
    # ``tasks`` and ``steps`` are two spellings of one list (parallel plans say tasks,
    # chains say steps); either is accepted for any mode, and kept as ``steps``.
    steps: list[Step] = field(default_factory=list)
    tasks: list[Step] | None = None
    # A map (mode "map", docs/map.md): its one step is a template run once per input row.
    input: str | None = None
    input_format: Literal["csv", "jsonl", "lines"] | None = None
    key: str | None = None
    where: dict[str, str] | None = None
    limit: int | None = None
    retries: int | None = None
    out: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FieldProblem(
                "mode", f"unknown mode {self.mode!r} (use single, parallel, chain, council or map)"
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
        if self.mode != "council" and (self.judge is not None or self.quorum is not None):
            raise FieldProblem(
                "judge" if self.judge is not None else "quorum", "only a council has one"
            )
        self.check_options()
        if self.quorum is not None and self.quorum > len(self.steps):
            raise FieldProblem(
                "quorum", f"{self.quorum} is more than the council's {len(self.steps)} members"
            )
        self._check_map()

    def _check_map(self) -> None:
        given = [n for n in MAP_FIELDS if getattr(self, n) is not None]
        if self.mode != "map":
            if given:
                raise FieldProblem(given[0], "only a map has one")
            return
        if self.input is None or not self.input.strip():
            raise FieldProblem("input", "a map needs an input (a CSV, JSON-lines or lines file)")
        if len(self.steps) != 1:
            raise FieldProblem("", f"a map takes exactly one task template, not {len(self.steps)}")
        check_at_least("limit", self.limit, 1)
        check_at_least("retries", self.retries, 0)
        check_choice("input_format", self.input_format, ("csv", "jsonl", "lines"))

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


def job_of(
    mode: JobMode,
    steps: list[dict[str, Any]],
    concurrency: int | None = None,
    source: str = "arguments",
    **job: Any,
) -> JobSpec:
    """A job from values already of the right types (the command line's, which click
    checked): the checks of meaning run, with the messages :func:`parse_job` gives.
    ``job``: its other options (``JobOptions``' fields: the job's ``max_turns`` …, a
    council's ``judge`` and ``quorum``, ``executor``)."""
    built: list[Step] = []
    for i, values in enumerate(steps):
        try:
            built.append(Step(**values))
        except FieldProblem as exc:
            raise PlanError(exc.problem, ("steps", i, *exc.loc), source) from None
    try:
        return JobSpec(mode=mode, steps=built, concurrency=concurrency, **job)
    except FieldProblem as exc:
        raise PlanError(exc.problem, exc.loc, source) from None


def with_options(
    spec: JobSpec,
    step_defaults: Mapping[str, Any],
    concurrency: int | None,
    source: str,
    job: Mapping[str, Any] | None = None,
) -> JobSpec:
    """``spec`` (a plan file's) under command-line options: each step's unset fields from
    ``step_defaults``, and the job's options (``concurrency``, ``job``: ``JobOptions``'
    fields) where given; checked again."""
    given = {k: v for k, v in step_defaults.items() if v is not None}
    options = {name: getattr(spec, name) for name in _JOB_FIELDS}
    over = {k: v for k, v in {**(job or {}), "concurrency": concurrency}.items() if v is not None}
    if not given and all(options[k] == v for k, v in over.items()):
        return spec
    steps = [{**given, **step.shape()} for step in spec.steps]
    options.update(over)
    options.update({name: getattr(spec, name) for name in MAP_FIELDS})
    return job_of(spec.mode, steps, source=source, **options)


_JOB_FIELDS = tuple(f.name for f in fields(JobOptions))


def parse_job(data: object, source: str = "job") -> JobSpec:
    """A job from a document (a plan file's mapping, an API dict, MCP arguments)."""
    if isinstance(data, JobSpec):
        return data
    if not isinstance(data, dict):
        raise PlanError("a job is a mapping with 'mode' and 'tasks' or 'steps'", source=source)
    from pydantic import ValidationError

    try:
        return _adapter().validate_python(data)
    except ValidationError as exc:
        raise _describe(exc, source) from None


@cache
def _adapter() -> TypeAdapter[JobSpec]:
    from pydantic import TypeAdapter

    # The annotations' names only type checkers import above (a delegation never builds
    # this), here for pydantic to resolve: it reads this frame's names too.
    from subagents.types import BudgetSpec, JobMode  # noqa: F401

    return TypeAdapter(JobSpec)


def _describe(exc: ValidationError, source: str) -> PlanError:
    loc, msg, err = first_problem(exc.errors())
    if err["type"] == "literal_error" and loc == ["mode"]:
        msg = f"unknown mode {err.get('input')!r} (use single, parallel, chain, council or map)"
    if err["type"] in UNKNOWN_KEY:
        msg = "unknown field"
    return PlanError(msg, tuple(int(p) if p.isdigit() else p for p in loc), source)


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
