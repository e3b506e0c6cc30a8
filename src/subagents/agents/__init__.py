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

Each file is checked (its YAML read, its fields checked by pydantic: ``check.py``) once per
content: what the check made of the file's bytes, or the problem it found, is kept in the
state dir (``cache/checked-agents.json``), and the same bytes read again take the kept
result without importing yaml or pydantic.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from subagents.config import home_dir, user_config_dir
from subagents.core.checked import CheckedFiles
from subagents.errors import AgentError

Source = Literal["builtin", "user", "project"]
SCOPES = ("user", "both")
_SOURCES: dict[str, Source] = {"builtin": "builtin", "user": "user", "project": "project"}

# Project agent dirs, lowest precedence first.
PROJECT_AGENT_DIRS = (Path(".claude/agents"), Path(".pi/agents"), Path(".subagents/agents"))

# What each agent file's check made of it, kept for its bytes and the checking code.
CHECKS_FILE = Path("cache") / "checked-agents.json"
CHECKS_KEPT = 256  # files: more than anyone's agent directories hold
_CHECKER = str(Path(__file__).with_name("check.py"))
# Read as files where the package is (importlib.resources costs ~9 ms to import).
_BUILTIN_DIR = Path(__file__).parent.parent / "agents_builtin"

# An agent's fields (check.AgentModel's), with their defaults.
_DEFAULTS: dict[str, Any] = {
    "backend": None,
    "model": None,
    "thinking": None,
    "tools": None,
    "timeout": None,
    "isolation": None,
    "max_turns": None,
    "max_tokens": None,
    "max_cost": None,
    "outputSchema": None,
    "verify": None,
    "review": None,
    "approvals": None,
    "approve": None,
    "system_prompt": "",
    "path": None,
}
_FIELDS = ("name", "description", *_DEFAULTS, "source", "extra")


class AgentDef:
    """An agent definition, as its file says it once checked (``check.AgentModel`` says what
    a file may say). A plain class, not the model: an agent read from its kept check is made
    without pydantic."""

    __slots__ = _FIELDS

    name: str
    description: str
    backend: str | None
    model: str | None
    thinking: str | None
    tools: list[str] | None
    timeout: float | None
    isolation: Literal["worktree"] | None
    max_turns: int | None
    max_tokens: int | None
    max_cost: float | None
    outputSchema: str | dict[str, object] | None
    verify: str | None
    review: str | None
    approvals: Literal["auto", "ask", "deny", "parent"] | None
    approve: str | None
    system_prompt: str
    source: Source
    path: Path | None
    extra: dict[str, object]

    def __init__(self, **fields: Any) -> None:
        unknown = fields.keys() - set(_FIELDS)
        missing = {"name", "description", "source"} - fields.keys()
        if unknown or missing:
            raise TypeError(f"AgentDef: unknown {sorted(unknown)}, missing {sorted(missing)}")
        for name, value in {**_DEFAULTS, "extra": {}, **fields}.items():
            setattr(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AgentDef):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the model was)

    def __repr__(self) -> str:
        return "AgentDef(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    def record(self) -> dict[str, Any]:
        """Its fields as JSON values (the path as text): what is kept of its check."""
        fields = {f: getattr(self, f) for f in _FIELDS}
        fields["path"] = None if self.path is None else str(self.path)
        return fields

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> AgentDef:
        """The agent :meth:`record` gave (KeyError for a record without its fields)."""
        fields = {f: record[f] for f in _FIELDS}
        fields["path"] = None if fields["path"] is None else Path(fields["path"])
        return cls(**fields)


class Discovery:
    """The agents found (by name) and each file that could not be read as one (``problems``:
    ``"<path>: <what is wrong>"``)."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentDef] = {}
        self.problems: list[str] = []


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_agent_text(text: str, source: Source, path: Path | None = None) -> AgentDef:
    """Parse an agent definition; raises AgentError naming *path* and the problem."""
    from subagents.agents.check import check_agent_text

    return AgentDef(**check_agent_text(text, source, path))


def agent_checks(env: Mapping[str, str] | None = None) -> CheckedFiles:
    """The kept checks of agent files (see :func:`parse_agent_file`); the caller saves them."""
    return CheckedFiles(CHECKS_FILE, _CHECKER, env, CHECKS_KEPT)


def parse_agent_file(path: Path, source: str, kept: CheckedFiles | None = None) -> AgentDef:
    """Parse one agent file; raises ``AgentError("<path>: <problem>")``. With ``kept``
    (:func:`agent_checks`), bytes checked before give the kept result, agent or problem,
    and new ones are kept (at the caller's ``kept.save()``)."""
    src = _SOURCES.get(source)
    if src is None:
        raise AgentError(f"{path}: unknown agent source {source!r}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AgentError(_one_line(f"{path}: cannot read: {exc.strerror or exc}")) from None
    return _checked(data, src, path, kept)


def _checked(data: bytes, source: Source, path: Path, kept: CheckedFiles | None) -> AgentDef:
    """The agent these bytes of ``path`` define, from their kept check if there is one."""
    name = f"{source} {path}"  # (the path as given: it is in the agent and its problems)
    value = kept.get(name, data) if kept is not None else None
    if value is not None:
        problem = value.get("problem")
        if isinstance(problem, str):
            raise AgentError(problem)
        try:
            return AgentDef.from_record(value)
        except (KeyError, TypeError):
            pass  # not a record of this version's: checked again
    try:
        # As a text file reads: universal newlines.
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError:
        raise AgentError(f"{path}: not valid UTF-8") from None
    try:
        agent = parse_agent_text(text, source, path)
    except AgentError as exc:
        if kept is not None:
            kept.keep(name, data, {"problem": str(exc)})
        raise
    if kept is not None:
        record = agent.record()
        with contextlib.suppress(TypeError, ValueError):  # a YAML date, a number key: not JSON
            if AgentDef.from_record(json.loads(json.dumps(record))) == agent:
                kept.keep(name, data, record)
    return agent


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def builtin_agents(kept: CheckedFiles | None = None) -> Discovery:
    """The agents shipped with subagents (``kept``: as for :func:`parse_agent_file`)."""
    found = Discovery()
    root: Any = _BUILTIN_DIR
    if not root.is_dir():  # not installed as files (a zip): importlib.resources reads it
        import importlib.resources

        root = importlib.resources.files("subagents").joinpath("agents_builtin")
    entries = sorted((e for e in root.iterdir() if e.name.endswith(".md")), key=lambda e: e.name)
    for entry in entries:
        where = Path(str(entry))
        try:
            agent = _checked(entry.read_bytes(), "builtin", where, kept)
        except (AgentError, OSError) as exc:
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


def _load_dir(
    directory: Path, source: Source, into: Discovery, kept: CheckedFiles | None = None
) -> None:
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
            agent = parse_agent_file(path, source, kept)
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


def _discover_project(
    cwd: Path, env: Mapping[str, str] | None, into: Discovery, kept: CheckedFiles | None = None
) -> None:
    for directory in project_agent_dirs(cwd, env):
        _load_dir(directory, "project", into, kept)


def discover(cwd: Path, scope: str = "user", env: Mapping[str, str] | None = None) -> Discovery:
    """All agents visible from *cwd*; broken files are listed in ``problems`` and skipped.
    Each file's check is kept for its bytes (see :func:`parse_agent_file`)."""
    _check_scope(scope)
    kept = agent_checks(env)
    found = builtin_agents(kept)
    for directory in user_agent_dirs(env):
        _load_dir(directory, "user", found, kept)
    if scope == "both":
        _discover_project(cwd, env, found, kept)
    kept.save()
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
        kept = agent_checks(env)
        _discover_project(cwd, env, project, kept)
        kept.save()
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
