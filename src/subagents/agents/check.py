"""An agent file's check: its YAML frontmatter read and its fields checked by pydantic.

Imported only to check bytes not checked before (``subagents.agents`` keeps each check's
result for the file's exact bytes): yaml and pydantic are not on a delegation's path once
its agent files were read once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from subagents.core.approve import rules_problem
from subagents.core.inputs import Seconds, budget_problem, timeout_problem
from subagents.errors import AgentError

Source = Literal["builtin", "user", "project"]

# Keys with a meaning here; anything else in the frontmatter goes to ``extra``.
KNOWN_KEYS = frozenset(
    {
        "name",
        "description",
        "backend",
        "model",
        "thinking",
        "tools",
        "timeout",
        "isolation",
        "max_turns",
        "max_tokens",
        "max_cost",
        "outputSchema",
        "verify",
        "review",
        "approvals",
        "approve",
    }
)


def _seconds(value: float | None) -> float | None:
    """A timeout in seconds, checked the one way every surface checks it (core.inputs)."""
    problem = None if value is None else timeout_problem(value)
    if problem:
        raise ValueError(problem)
    return value


OptionalSeconds = Annotated[float | None, Seconds, AfterValidator(_seconds)]


def _budget(name: str) -> Any:
    """A budget field, checked the one way every surface checks it (core.inputs)."""

    def check(value: Any) -> Any:
        problem = None if value is None else budget_problem(name, value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def _rules(value: str | None) -> str | None:
    """``approve``'s rules, checked the one way every surface checks them (core.approve)."""
    problem = None if value is None else rules_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class AgentModel(BaseModel):
    """What an agent file may say (``subagents.agents.AgentDef`` holds what it said)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    backend: str | None = None
    model: str | None = None
    thinking: str | None = None
    tools: list[str] | None = None
    timeout: OptionalSeconds = None
    # "worktree": each run of this agent works in its own git worktree (as in Claude Code).
    isolation: Literal["worktree"] | None = None
    # A budget for each run of this agent (docs/live-control.md).
    max_turns: Annotated[int | None, _budget("max_turns")] = None
    max_tokens: Annotated[int | None, _budget("max_tokens")] = None
    max_cost: Annotated[float | None, _budget("max_cost")] = None
    # The answer's JSON Schema (docs/structured.md): a path, inline JSON, or a mapping;
    # read and checked where a run uses it (structured.load_schema).
    outputSchema: str | dict[str, object] | None = None
    # An acceptance gate for each run of this agent (docs/gates.md): a command, a reviewer.
    verify: str | None = Field(default=None, min_length=1)
    review: str | None = Field(default=None, min_length=1)
    # Whether its runs' requests to act wait for a decision, and what passes unasked
    # (docs/approvals.md); a step's own choice comes first.
    approvals: Literal["auto", "ask", "deny", "parent"] | None = None
    approve: Annotated[str | None, AfterValidator(_rules)] = None
    system_prompt: str = ""
    source: Source
    path: Path | None = None
    extra: dict[str, object] = Field(default_factory=dict)

    @field_validator("name", "description", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _one_line_name(cls, value: str) -> str:
        if any(ch in value for ch in "\r\n\t/\\"):
            raise ValueError("must be one line without slashes or tabs")
        return value

    @field_validator("backend", "model", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            # Claude Code's "inherit" means: the parent's model, i.e. our default.
            return value if value and value != "inherit" else None
        return value

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare ``off`` / ``on`` as a boolean.
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise ValueError("must be a list of tool names or a comma-separated string")
            return [item.strip() for item in value if item.strip()]
        return value


def _frontmatter(text: str) -> tuple[str, str] | None:
    """Split ``---\\nYAML\\n---\\nbody``; None when the text has no frontmatter."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    return None


def _describe(error: ValidationError) -> str:
    errors = error.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"]) or "frontmatter"
    if first["type"] == "missing":
        message = f"missing required field '{loc}'"
    else:
        msg = first["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        message = f"{loc}: {msg}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return message


def one_line(text: str) -> str:
    return " ".join(text.split())


def check_agent_text(text: str, source: Source, path: Path | None = None) -> dict[str, Any]:
    """An agent definition's fields, checked (``path`` as a Path); raises AgentError naming
    *path* and the problem."""
    where = str(path) if path is not None else "<agent>"
    parts = _frontmatter(text)
    if parts is None:
        raise AgentError(f"{where}: no YAML frontmatter (the file must start with a '---' line)")
    head, body = parts
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 2}" if mark is not None else ""  # +1 base, +1 for '---'
        problem = getattr(exc, "problem", None) or str(exc)
        raise AgentError(one_line(f"{where}: bad YAML frontmatter{line}: {problem}")) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AgentError(f"{where}: frontmatter must be a mapping of keys to values")
    fields: dict[str, object] = {}
    extra: dict[str, object] = {}
    for key, value in data.items():
        (fields if key in KNOWN_KEYS else extra)[str(key)] = value
    try:
        checked = AgentModel.model_validate(
            {
                **fields,
                "system_prompt": body.strip(),
                "source": source,
                "path": path,
                "extra": extra,
            }
        )
    except ValidationError as exc:
        raise AgentError(one_line(f"{where}: {_describe(exc)}")) from None
    return {name: getattr(checked, name) for name in AgentModel.model_fields}
