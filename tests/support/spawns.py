"""The guard that keeps the fast tier fast: a test not marked ``process`` (or ``e2e``,
``browser``, ``ray``) that starts a process fails, at the call that started it, with the
marker to add. Every way a test starts one goes through ``subprocess.Popen`` (asyncio's and
anyio's subprocesses included) or a fork."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

MARKER = "process"


def _finding_a_library() -> bool:
    """Whether ctypes is looking a C library up (``find_library`` runs ldconfig, once per
    process): not a process of the test's."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "ctypes.util":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class SpawnGuard:
    """A pytest plugin: while an unmarked test runs (setup, call, teardown), starting a
    process raises; the test's report says so even when the raise was in a thread."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.spawned: list[str] = []
        self.lock = threading.Lock()
        self.saved: dict[tuple[Any, str], Callable[..., Any]] = {}

    def _check(self, what: str) -> None:
        item = self.item
        if item is None or item.get_closest_marker(MARKER) is not None or _finding_a_library():
            return
        with self.lock:
            self.spawned.append(what)
        pytest.fail(
            f"{item.nodeid} starts a process ({what}) but is not marked `{MARKER}`: add"
            f" @pytest.mark.{MARKER} (or to its module: pytestmark = pytest.mark.{MARKER})",
            pytrace=False,
        )

    def _wrap(self, owner: Any, name: str, describe: Callable[..., str]) -> None:
        original = getattr(owner, name)
        self.saved[(owner, name)] = original
        guard = self

        def guarded(*args: Any, **kw: Any) -> Any:
            guard._check(describe(*args, **kw))
            return original(*args, **kw)

        setattr(owner, name, guarded)

    def pytest_sessionstart(self) -> None:
        def popen(self_: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> str:
            argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
            return " ".join(str(a) for a in argv[:3])

        self._wrap(subprocess.Popen, "_execute_child", popen)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                self._wrap(os, name, lambda *a, _n=name, **k: f"os.{_n}")

    def pytest_sessionfinish(self) -> None:
        for (owner, name), original in self.saved.items():
            setattr(owner, name, original)

    @contextmanager
    def _running(self, item: pytest.Item) -> Iterator[None]:
        self.item = item
        try:
            yield
        finally:
            self.item = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, None]:
        self.spawned = []
        with self._running(item):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        with self._running(item):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, None]:
        with self._running(item):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if self.spawned and report.passed and call.when == "call":
            # The raise was swallowed (a thread, a handler): the test still fails.
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} starts a process ({self.spawned[0]}) but is not marked"
                f" `{MARKER}`: add @pytest.mark.{MARKER}"
            )
