"""A package's names imported on first use (PEP 562): ``jobs`` and ``runs`` offer many
names from their ``__init__``, and importing every module behind them would cost each
delegation the map, approval and view machinery it never uses (tens of milliseconds of a
run's start). The package lists where each name lives; its ``__getattr__`` imports that
module when the name is first asked for (``from subagents.jobs import JobStore`` included)
and keeps the name, so a second use costs a dict lookup.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping


def names_from(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package`` offering ``where``'s names: each is
    ``"module"`` (the name as the module spells it) or ``"module:its_name"`` (renamed)."""

    def __getattr__(name: str) -> object:
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = found.partition(":")
        # Through __import__ (not importlib.import_module): -X importtime lists it, and the
        # run path's import-set guard (tests/test_layout.py) reads that listing.
        __import__(f"{package}.{module}")
        value = getattr(sys.modules[f"{package}.{module}"], attr or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
