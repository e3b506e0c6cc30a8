"""What a caller asks for: a job of one, several side by side, or several one after another.

The same shape in plan files, the Python API and the MCP tool:

    {"mode": "parallel", "concurrency": 2, "tasks": [{"agent": "scout", "task": "...", "cwd": "..."}]}
    {"mode": "chain", "steps": [{"agent": "scout", "task": "..."}, {"agent": "worker", "task": "use this: {previous}"}]}

Every problem is found before anything starts and reported as one line naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from subagents.config import OptionalSeconds
from subagents.core.inputs import text_problem

PREVIOUS = "{previous}"


class PlanError(Exception):
    """A bad plan or job request, as one line naming the field."""


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    agent: str | None = None
    cwd: str | None = None
    model: str | None = None
    backend: str | None = None
    timeout: OptionalSeconds = None
    # "worktree": the run works in its own git worktree on branch subagents/<run-id>.
    isolate: Literal["worktree"] | None = None
    # The stall watchdog (0: off), its policy, and the bound on one tool call (0: none).
    stall_timeout: float | None = Field(default=None, ge=0)
    on_stall: Literal["notice", "abort"] | None = None
    tool_timeout: float | None = Field(default=None, ge=0)

    @field_validator("task", "agent", "cwd", "model", "backend")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        problem = None if value is None else text_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the task is empty")
        return value


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    mode: Literal["single", "parallel", "chain"]
    # ``tasks`` and ``steps`` are two spellings of one list (parallel plans say tasks,
    # chains say steps); either is accepted for any mode.
    steps: list[Step] = Field(default_factory=list)
    tasks: list[Step] | None = Field(default=None, exclude=True)
    concurrency: int | None = Field(default=None, ge=1)
    # Where the job's runs execute (else from config): see docs/cluster.md.
    executor: Literal["local", "ray"] | None = None

    @model_validator(mode="after")
    def _one_list(self) -> JobSpec:
        if self.tasks is not None:
            if self.steps:
                raise ValueError("give either 'tasks' or 'steps', not both")
            self.steps = self.tasks
            self.tasks = None
        if not self.steps:
            raise ValueError("the job has no tasks")
        if self.mode == "single" and len(self.steps) != 1:
            raise ValueError(f"mode 'single' takes exactly one task, not {len(self.steps)}")
        if self.mode == "chain" and PREVIOUS in self.steps[0].task:
            raise ValueError("steps.0.task: the first step has no {previous} to use")
        return self

    def agents(self) -> list[str]:
        return [s.agent or "-" for s in self.steps]


def _describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"] if p != "__root__")
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "literal_error" and where == "mode":
        msg = f"unknown mode {err.get('input')!r} (use single, parallel or chain)"
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    return f"{where}: {msg}" if where else msg


def parse_job(data: Any, source: str = "job") -> JobSpec:
    if not isinstance(data, dict):
        raise PlanError(f"{source}: a job is a mapping with 'mode' and 'tasks' or 'steps'")
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise PlanError(f"{source}: {_describe(exc)}") from None


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
