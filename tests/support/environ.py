"""This process's environment changed for a while (a ``with`` block), then put back."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def overlay(extra: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``extra`` over it; each variable as it was afterwards (unset if it was)."""
    before = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
