"""Small checks the tests share: a condition that comes true, a live process, the running
processes below one, a record's shape, an installed CLI."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from typing import Any

import psutil
import pytest


def eventually(
    predicate: Callable[[], object], timeout: float = 30.0, *, every: float = 0.05
) -> bool:
    """Whether ``predicate`` comes true within ``timeout`` (a generous bound, not a timing).
    It is asked at once, then after 0.05 s, the pauses growing by half up to ``every``: a
    predicate that starts a process to look (a screen's ``tmux capture-pane``) passes a
    longer ``every``, since each look costs CPU and what it waits for takes seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(pause)
        pause = min(pause * 1.5, every)
    return bool(predicate())


LOOK_EVERY = 0.5  # the longest pause between two looks at a screen


def on_screen(predicate: Callable[[], object], timeout: float = 30.0) -> bool:
    """``eventually`` for a predicate that looks at a terminal's screen (``tmux capture-pane``,
    a process per look): looked at less often as the wait goes on, up to every
    ``LOOK_EVERY`` s, since what a screen waits for takes seconds."""
    return eventually(predicate, timeout, every=LOOK_EVERY)


def fits(record: Mapping[str, Any], shape: Any) -> None:
    """``record`` has every key ``shape`` (a TypedDict) requires, and none it does not declare."""
    required, optional = set(shape.__required_keys__), set(shape.__optional_keys__)
    keys = set(record)
    assert not required - keys, f"{shape.__name__} lacks {sorted(required - keys)}"
    assert not keys - required - optional, f"{shape.__name__}: {sorted(keys - required - optional)}"


def pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def live_descendants(pid: int | None = None) -> list[tuple[psutil.Process, str, list[str]]]:
    """The processes below ``pid`` (default: this one) that are running, each with its
    name and command line: one that is a zombie (an earlier test's child not reaped yet) or ends
    while it is looked at is left out, since the look may come at any instant."""
    out = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            out.append((proc, proc.name(), proc.cmdline()))
        except psutil.Error:
            continue
    return out


needs_pi = pytest.mark.skipif(shutil.which("pi") is None, reason="the real pi CLI is not installed")


def examples(n: int) -> int:
    """A property test's number of examples: ``n``, or at most 25 in the fast tier
    (``./scripts/test --fast`` sets SUBAGENTS_FAST_TIER): the full run keeps them all."""
    import os

    return min(n, 25) if os.environ.get("SUBAGENTS_FAST_TIER") else n
