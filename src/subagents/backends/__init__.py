"""Backend registry: built-ins by name, plugins through the `subagents.backends` entry point group.

Lookups import only the module of the backend asked for, so the supervisor stays fast.
"""

from __future__ import annotations

import importlib

from subagents.backends.base import (
    ARGV_TASK_LIMIT,
    MAX_TASK_BYTES,
    Backend,
    CommandRequest,
    Fed,
    Normalizer,
)
from subagents.errors import BackendError

__all__ = [
    "ARGV_TASK_LIMIT",
    "MAX_TASK_BYTES",
    "Backend",
    "BackendError",
    "CommandRequest",
    "Fed",
    "Normalizer",
    "get_backend",
    "known_backends",
]

_BUILTIN: dict[str, str] = {
    "pi": "subagents.backends.pi:PiBackend",
    "claude": "subagents.backends.claude:ClaudeBackend",
    "codex": "subagents.backends.codex:CodexBackend",
    "gemini": "subagents.backends.gemini:GeminiBackend",
    "opencode": "subagents.backends.opencode:OpenCodeBackend",
}


def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {e.name: e.value for e in entry_points(group="subagents.backends")}


def known_backends() -> list[str]:
    return sorted({*_BUILTIN, *_plugins()})


def get_backend(name: str) -> Backend:
    target = _BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise BackendError(f"unknown backend {name!r} (known: {', '.join(known_backends())})")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    backend = cls()
    if not isinstance(backend, Backend):
        raise BackendError(f"backend {name!r} ({target}) is not a subagents Backend")
    return backend
