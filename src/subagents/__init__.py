"""subagents: delegate tasks to child coding agents.

    import subagents
    result = subagents.run("Summarize README.md", agent="scout")   # result.json
    job = subagents.start({"mode": "parallel", "tasks": [...]})    # a background job

The public API is small: ``run``, ``start``, ``continue_run``, ``send`` (a message to a
running child), ``inbox``/``decide`` (approvals: docs/approvals.md), ``map`` (a task per row of a dataset: docs/map.md), ``JobHandle``, the errors
(``subagents.errors``: every one under ``SubagentsError``) and the records' types
(``subagents.types``: ``RunResult`` for result.json, ``JobResult``, ``JobState``, each
``Event``, ``AgentEvent``; plain dicts a type checker knows the keys of). The functions are
imported on first use, so that the supervisor process (``python -m subagents.supervisor``,
which imports this package first) starts fast; the errors are standard library only.
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from subagents.api import JobHandle, continue_run, decide, inbox, run, send, start
    from subagents.errors import (
        BadRequest,
        ConfigError,
        LaunchError,
        MessageRefused,
        PlanError,
        SubagentsError,
        UsageError,
        WorktreeError,
    )
    from subagents.maps import map_rows as map

__all__ = [
    "BadRequest",
    "ConfigError",
    "JobHandle",
    "LaunchError",
    "MessageRefused",
    "PlanError",
    "SubagentsError",
    "UsageError",
    "WorktreeError",
    "continue_run",
    "decide",
    "inbox",
    "map",
    "run",
    "send",
    "start",
]

_API = frozenset({"run", "start", "continue_run", "send", "inbox", "decide", "JobHandle"})
_ERRORS = frozenset(n for n in __all__ if n[0].isupper()) - _API  # (subagents.errors')


def __getattr__(name: str) -> object:
    # PEP 562: the API's functions come with their imports only when first used; the errors
    # too (the `subagents` program, a warm server's client, imports this package and
    # nothing else of it: each module it loads is part of every delegation's start).
    if name in _ERRORS:
        from subagents import errors

        value: object = getattr(errors, name)
        globals()[name] = value
        return value
    if name == "map":
        from subagents.maps import map_rows

        return map_rows
    if name not in _API:
        raise AttributeError(f"module 'subagents' has no attribute {name!r}")
    from subagents import api

    return getattr(api, name)
