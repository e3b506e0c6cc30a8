"""Lazy package exports: a package's ``__init__`` names what it offers without importing it.

The supervisor imports ``subagents.run`` on its way to ``subagents.run.supervisor`` and must
start fast, so no package imports its modules before one of its names is used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from collections.abc import Callable


def exports(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``names`` maps each name to its module,
    relative to the package (``"launch"``, or ``"diagnostics:render"`` to rename)."""

    def __getattr__(name: str) -> object:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = where.partition(":")
        return getattr(importlib.import_module(f"{package}.{module}"), attr or name)

    return __getattr__
