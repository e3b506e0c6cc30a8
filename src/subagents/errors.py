"""Every error subagents raises, in one tree under :class:`SubagentsError`.

Each carries one line naming the problem (its ``str``) and the command line's exit code for
it (``exit_code``), so a surface maps errors by class, never by message or name:

    SubagentsError                  exit 1
    ├── UsageError                  exit 2: bad input; nothing was created (``field``: where)
    │   ├── ConfigError             a config file or a SUBAGENTS_* variable
    │   ├── PlanError               a job spec: a plan file, API dict or MCP arguments
    │   ├── AgentError              an agent definition, or an agent that does not exist
    │   ├── BackendError            a backend that does not exist or cannot serve the request
    │   ├── JobIdError              an unknown, ambiguous or malformed job or run id
    │   ├── JobBusyError            a job still running, asked to be removed
    │   ├── TokenError              a bearer token too short to protect anything
    │   ├── FieldProblem            a failed check of a spec's or the settings' meaning
    │   └── MessageRefused          a message a run will not take (it ended, its CLI takes
    │                               none while running, the CLI said no); nothing was sent
    ├── LaunchError                 a run could not start: runner, executor (Ray), supervisor
    ├── WorktreeError               a git operation of worktree isolation could not be done
    ├── DamagedRecord               a record on disk that is not one (truncated, mangled):
    │                               its file named, and how to remove it
    ├── PhaseError                  a bug: the supervisor's run moved between phases that
    │                               do not follow one another (supervisor/phase.py)
    └── ClientRefusal               an ACP agent's request its client will not serve (a
                                    file outside the run's tree): told to the agent

``BadRequest`` is ``UsageError`` by the name the Python API has always used.

Standard library only: the supervisor imports it (through the backend registry).
"""

from __future__ import annotations


class SubagentsError(Exception):
    """Something subagents could not do, as one line."""

    exit_code: int = 1


# Where an input problem is, as pydantic says it: the path of keys and indexes from the top
# of what was given (``("steps", 1, "agent")``); empty for the whole of it.
Loc = tuple[str | int, ...]


class UsageError(SubagentsError):
    """Bad input: one line naming the problem, exit 2, and nothing created. ``loc`` is
    where the input at fault is (``("steps", 0, "max_turns")``; empty when nowhere in
    particular) and ``problem`` what is wrong there: each surface names the place its own
    way (``--max-turns``, ``chain.0.max_turns``) from these, never from the message.
    ``field``: ``loc`` dotted, or None. Without ``problem``, it is the message after the
    place it starts with (``"cwd: …"`` with ``field="cwd"``), else the whole message."""

    exit_code = 2

    def __init__(
        self, message: str, field: str | None = None, *, loc: Loc | None = None,
        problem: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        if loc is None:
            loc = tuple(_key(part) for part in field.split(".")) if field else ()
        self.loc: Loc = loc
        self.field = dotted(loc) or None
        if problem is None:  # a message that names its place first says it once, not twice
            problem = message.removeprefix(f"{self.field}: ") if self.field else message
        self.problem = problem


def dotted(loc: Loc) -> str:
    """A location as documents name it: ``steps.0.max_turns``."""
    return ".".join(str(part) for part in loc)


def _key(part: str) -> str | int:
    return int(part) if part.isdigit() else part


BadRequest = UsageError


class ConfigError(UsageError):
    """A configuration problem, as one line naming the file (or variable) and the field."""


class PlanError(UsageError):
    """A bad plan or job request, as one line naming the field: ``source`` (the plan
    file, "arguments", …) when known, then where (``loc``) and the problem."""

    def __init__(self, problem: str, loc: Loc = (), source: str | None = None) -> None:
        message = ": ".join(part for part in (source, dotted(loc), problem) if part)
        super().__init__(message, loc=loc, problem=problem)
        self.source = source

    def within(self, *outer: str | int) -> PlanError:
        """The same problem, inside ``outer`` (``("steps", 2)``)."""
        return PlanError(self.problem, (*outer, *self.loc), self.source)


class AgentError(UsageError):
    """A bad or unknown agent, as one line."""

    def __init__(self, message: str, field: str | None = "agent") -> None:
        super().__init__(message, field)


class BackendError(UsageError):
    """A backend that does not exist, or a request it cannot serve."""

    def __init__(self, message: str, field: str | None = "backend") -> None:
        super().__init__(message, field)


class JobIdError(UsageError):
    """An unknown, ambiguous or malformed id, as one line."""


class JobBusyError(UsageError):
    """A job that is still running (one line)."""


class TokenError(UsageError):
    """A bearer token too short to protect anything (one line naming where it came from)."""


class FieldProblem(UsageError, ValueError):
    """A failed check of meaning in a spec or settings object: where (a field's dotted
    path, or "" for the whole object) and the problem. A ValueError too, so pydantic, when it
    checks a document against the same class, reports it at the place it was found."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(
            f"{where}: {problem}" if where else problem, where or None, problem=problem
        )
        self.where = where


class MessageRefused(UsageError):
    """A message to a running child that was not sent: the reason, as one line."""


class LaunchError(SubagentsError):
    """A run could not be started: its runner, its executor or its supervisor failed."""


class WorktreeError(SubagentsError):
    """A git operation that could not be done, as one line."""


class DamagedRecord(SubagentsError, ValueError):
    """A record on disk that cannot be read as what it should be (``job.json`` truncated,
    its status not a status): one line naming the file (``path``) and how to remove it. A
    ValueError too, so every reader that passes over an unreadable file passes over it."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class PhaseError(SubagentsError, RuntimeError):
    """A bug in the supervisor: a move between two phases of a run that cannot follow one
    another (``supervisor.phase.NEXT``)."""


class ClientRefusal(SubagentsError):
    """A request of an ACP agent that its client (the run's supervisor) does not serve:
    the message is what the agent is told, ``code`` the JSON-RPC error code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


__all__ = [
    "AgentError",
    "BackendError",
    "BadRequest",
    "ClientRefusal",
    "ConfigError",
    "DamagedRecord",
    "FieldProblem",
    "JobBusyError",
    "JobIdError",
    "LaunchError",
    "Loc",
    "MessageRefused",
    "PhaseError",
    "PlanError",
    "SubagentsError",
    "TokenError",
    "UsageError",
    "WorktreeError",
    "dotted",
]
