"""Agent definitions: Markdown files with YAML frontmatter.

```
---
name: scout                     # required; the agent's name (not the file name)
description: Fast recon         # required
backend: pi                     # optional; default backend when absent
model: some-model               # optional
thinking: low                   # optional
tools: read, grep, find, ls     # optional; a list or a comma-separated string
timeout: 600                    # optional; seconds
max_turns: 20                   # optional; a budget per run (also max_tokens, max_cost in USD)
outputSchema: schema.json       # optional; the answer's JSON Schema: a file (beside the agent
                                # file), inline JSON, or a YAML mapping (docs/structured.md)
verify: pytest -q               # optional; an acceptance gate for each run (docs/gates.md)
review: claude                  # optional; a reviewer gate: backend[:model] or an agent
approvals: ask                  # optional; its requests to act wait (docs/approvals.md)
approve: Bash(git status*)      # optional; the rules that let a request pass unasked
---
The body is the system prompt.
```

Other frontmatter keys (``color`` in Claude Code files, ...) are kept in ``extra``.

Discovery, later overrides earlier by name:

1. built-in (``subagents/agents_builtin/*.md``)
2. user: ``~/.pi/agent/agents`` < ``~/.claude/agents`` < ``<user config dir>/agents``
3. project, only with scope ``both``: in the working directory or its nearest ancestor that
   has one of them, ``.claude/agents`` < ``.pi/agents`` < ``.subagents/agents``.

Project agents come from the repository being worked on, hence the opt-in.
"""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from subagents.config import home_dir, user_config_dir
from subagents.core.approve import rules_problem
from subagents.core.inputs import Seconds, budget_problem, timeout_problem
from subagents.errors import AgentError

Source = Literal["builtin", "user", "project"]
SCOPES = ("user", "both")
_SOURCES: dict[str, Source] = {"builtin": "builtin", "user": "user", "project": "project"}

# Keys with a meaning here; anything else in the frontmatter goes to ``extra``.
_KNOWN_KEYS = frozenset(
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
# Project agent dirs, lowest precedence first.
PROJECT_AGENT_DIRS = (Path(".claude/agents"), Path(".pi/agents"), Path(".subagents/agents"))


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


class AgentDef(BaseModel):
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


@dataclass
class Discovery:
    agents: dict[str, AgentDef] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # "<path>: <what is wrong>"


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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_agent_text(text: str, source: Source, path: Path | None = None) -> AgentDef:
    """Parse an agent definition; raises AgentError naming *path* and the problem."""
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
        raise AgentError(_one_line(f"{where}: bad YAML frontmatter{line}: {problem}")) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AgentError(f"{where}: frontmatter must be a mapping of keys to values")
    fields: dict[str, object] = {}
    extra: dict[str, object] = {}
    for key, value in data.items():
        (fields if key in _KNOWN_KEYS else extra)[str(key)] = value
    try:
        return AgentDef.model_validate(
            {
                **fields,
                "system_prompt": body.strip(),
                "source": source,
                "path": path,
                "extra": extra,
            }
        )
    except ValidationError as exc:
        raise AgentError(_one_line(f"{where}: {_describe(exc)}")) from None


def parse_agent_file(path: Path, source: str) -> AgentDef:
    """Parse one agent file; raises ``AgentError("<path>: <problem>")``."""
    src = _SOURCES.get(source)
    if src is None:
        raise AgentError(f"{path}: unknown agent source {source!r}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AgentError(f"{path}: not valid UTF-8") from None
    except OSError as exc:
        raise AgentError(_one_line(f"{path}: cannot read: {exc.strerror or exc}")) from None
    return parse_agent_text(text, src, path)


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def builtin_agents() -> Discovery:
    """The agents shipped with subagents."""
    found = Discovery()
    root = importlib.resources.files("subagents").joinpath("agents_builtin")
    entries = sorted((e for e in root.iterdir() if e.name.endswith(".md")), key=lambda e: e.name)
    for entry in entries:
        where = Path(str(entry))
        try:
            agent = parse_agent_text(entry.read_text(encoding="utf-8"), "builtin", where)
        except (AgentError, OSError, UnicodeDecodeError) as exc:
            found.problems.append(str(exc) if isinstance(exc, AgentError) else f"{where}: {exc}")
            continue
        found.agents[agent.name] = agent
    return found


def user_agent_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """User agent dirs, lowest precedence first: pi's, Claude Code's, ours."""
    environ = _env(env)
    home = home_dir(environ)
    pi_dir = Path(environ["PI_CODING_AGENT_DIR"]) if environ.get("PI_CODING_AGENT_DIR") else None
    claude_dir = Path(environ["CLAUDE_CONFIG_DIR"]) if environ.get("CLAUDE_CONFIG_DIR") else None
    return [
        (pi_dir or home / ".pi" / "agent") / "agents",
        (claude_dir or home / ".claude") / "agents",
        user_config_dir(environ) / "agents",
    ]


def project_agent_dirs(cwd: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Project agent dirs, lowest precedence first, of the nearest directory (cwd or an
    ancestor) having any. The home directory is skipped: its ``.claude/agents`` is user-level.
    """
    home = home_dir(_env(env)).resolve()
    start = cwd.resolve()
    for directory in (start, *start.parents):
        if directory == home:
            continue
        present = [directory / rel for rel in PROJECT_AGENT_DIRS if (directory / rel).is_dir()]
        if present:
            return present
    return []


def _load_dir(directory: Path, source: Source, into: Discovery) -> None:
    """Load ``*.md`` in *directory* into *into*; a later dir overrides an earlier one."""
    try:
        paths = sorted(p for p in directory.iterdir() if p.suffix == ".md" and p.is_file())
    except FileNotFoundError:
        return
    except OSError as exc:
        if directory.exists():
            into.problems.append(_one_line(f"{directory}: cannot list: {exc.strerror or exc}"))
        return
    seen: dict[str, Path] = {}
    for path in paths:
        try:
            agent = parse_agent_file(path, source)
        except AgentError as exc:
            into.problems.append(str(exc))
            continue
        if agent.name in seen:
            into.problems.append(
                f"{path}: duplicate agent name '{agent.name}' (already defined in "
                f"{seen[agent.name]}); skipped"
            )
            continue
        seen[agent.name] = path
        into.agents[agent.name] = agent


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise AgentError(f"invalid agent scope {scope!r} (use one of: {', '.join(SCOPES)})")


def _discover_project(cwd: Path, env: Mapping[str, str] | None, into: Discovery) -> None:
    for directory in project_agent_dirs(cwd, env):
        _load_dir(directory, "project", into)


def discover(cwd: Path, scope: str = "user", env: Mapping[str, str] | None = None) -> Discovery:
    """All agents visible from *cwd*; broken files are listed in ``problems`` and skipped."""
    _check_scope(scope)
    found = builtin_agents()
    for directory in user_agent_dirs(env):
        _load_dir(directory, "user", found)
    if scope == "both":
        _discover_project(cwd, env, found)
    return found


def _problem_for(name: str, problems: Iterable[str]) -> str | None:
    """A problem with a file named after *name*: likely the agent the user meant."""
    for problem in problems:
        path = problem.split(": ", 1)[0]
        if Path(path).stem == name:
            return problem
    return None


def get_agent(
    name: str, cwd: Path, scope: str = "user", env: Mapping[str, str] | None = None
) -> AgentDef:
    """The agent called *name*; AgentError with one helpful line when there is none."""
    found = discover(cwd, scope, env)
    agent = found.agents.get(name)
    if agent is not None:
        return agent
    if scope == "user":
        project = Discovery()
        _discover_project(cwd, env, project)
        hidden = project.agents.get(name)
        if hidden is not None:
            raise AgentError(
                f"agent '{name}' is defined in {hidden.path}, a project-local agent; "
                "use --agent-scope both"
            )
    known = ", ".join(sorted(found.agents)) or "none"
    message = f"unknown agent '{name}' (known: {known})"
    broken = _problem_for(name, found.problems)
    if broken is not None:
        message += f"; could not load {broken}"
    raise AgentError(_one_line(message))
