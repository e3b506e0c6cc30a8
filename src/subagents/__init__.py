"""subagents: delegate tasks to child coding agents.

The public API is small; its functions are imported on first use, so that the supervisor
process (``python -m subagents.supervisor``, which imports this package first) starts fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from subagents.api import BadRequest, JobHandle, continue_run, run, start

__all__ = ["BadRequest", "JobHandle", "continue_run", "run", "start"]

_LAZY = {
    "run": "subagents.api",
    "start": "subagents.api",
    "continue_run": "subagents.api",
    "BadRequest": "subagents.api",
    "JobHandle": "subagents.api",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
