"""Where the suite's time goes: each test's wall time and CPU time, its processes' included.

On when ``SUBAGENTS_TEST_CPU=DIR`` is set (``tests/conftest.py`` registers it): each pytest
process (an xdist worker, or the one process) appends one JSON line per test to
``DIR/<worker>.jsonl``. ``python tests/support/cputimes.py DIR`` prints the tests by CPU and
each xdist group's serial length.

A test's CPU is ``RUSAGE_SELF`` plus ``RUSAGE_CHILDREN`` (setup, call and teardown). Children
count only once reaped, and a detached process (a background job's driver, a tmux server) is
reaped by init, not by the test: so while measuring, this process is made a child subreaper
(``PR_SET_CHILD_SUBREAPER``), and a thread reaps the orphans that end up here (never this
process's own children, which their ``Popen`` or ``waitpid`` reaps). An orphan that outlives
its test is counted in the test during which it ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

PR_SET_CHILD_SUBREAPER = 36


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class CpuTimes:
    """The pytest plugin (see the module's docstring)."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.file = (out / f"{worker}.jsonl").open("a", encoding="utf-8")
        self.worker = worker
        self.mine: set[int] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.start: dict[str, tuple[float, float]] = {}
        self.groups: dict[str, str | None] = {}
        self.reaped: list[tuple[str, float]] = []  # orphans reaped during the current test

    # Own children: recorded as they start, so the orphan reaper leaves them alone.
    def _track(self) -> None:
        plugin = self
        execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def execute_child(popen: subprocess.Popen[Any], *args: Any, **kw: Any) -> None:
            execute(popen, *args, **kw)
            plugin.mine.add(popen.pid)

        subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            original = getattr(os, name, None)
            if original is None:
                continue

            def wrapped(*a: Any, _original: Any = original, _name: str = name, **k: Any) -> Any:
                result = _original(*a, **k)
                pid = result[0] if _name == "forkpty" else result
                if pid:
                    plugin.mine.add(pid)
                return result

            setattr(os, name, wrapped)

    def _orphans(self) -> list[tuple[int, str, float]]:
        """This process's zombie children that it did not start: pid, name, CPU seconds."""
        me = os.getpid()
        tick = os.sysconf("SC_CLK_TCK")
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            name, rest = stat.split(" (", 1)[1].rsplit(")", 1)
            fields = rest.split()
            if fields[0] == "Z" and int(fields[1]) == me and int(entry.name) not in self.mine:
                cpu = sum(int(f) for f in fields[11:15]) / tick
                found.append((int(entry.name), name, cpu))
        return found

    def _reap(self) -> None:
        for pid, name, cpu in self._orphans():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
                with self.lock:
                    self.reaped.append((name, round(cpu, 2)))

    def _reaper(self) -> None:
        while not self.stop.wait(0.2):
            self._reap()

    def pytest_sessionstart(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self._track()
        threading.Thread(target=self._reaper, name="cputimes-reaper", daemon=True).start()

    def pytest_sessionfinish(self) -> None:
        self.stop.set()
        self.file.close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.start[nodeid] = (time.monotonic(), _cpu())

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self._reap()
        wall0, cpu0 = self.start.pop(nodeid)
        with self.lock:
            reaped, self.reaped = self.reaped, []
        # xdist's loadgroup may have suffixed the id with "@group" after this plugin saw it.
        base, _, group = nodeid.rpartition("@")
        item_group = self.groups.get(nodeid) or (group if base and "]" not in group else None)
        self.file.write(
            json.dumps(
                {
                    "test": nodeid,
                    "worker": self.worker,
                    "group": item_group,
                    "wall": round(time.monotonic() - wall0, 3),
                    "cpu": round(_cpu() - cpu0, 3),
                    "end": time.time(),
                    "orphans": reaped,
                }
            )
            + "\n"
        )
        self.file.flush()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            mark = item.get_closest_marker("xdist_group")
            name = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
            self.groups[item.nodeid] = name


def report(out: Path, top: int = 40) -> str:
    files = sorted(out.glob("gw*.jsonl")) or sorted(out.glob("*.jsonl"))  # not the controller's
    rows = [json.loads(line) for f in files for line in f.open()]
    lines = [
        f"{len(rows)} tests; CPU {sum(r['cpu'] for r in rows):.0f} s; wall sum {sum(r['wall'] for r in rows):.0f} s"
    ]
    by_worker: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    for worker, rs in sorted(by_worker.items()):
        lines.append(
            f"  worker {worker}: {len(rs)} tests, wall {sum(r['wall'] for r in rs):.0f} s,"
            f" CPU {sum(r['cpu'] for r in rs):.0f} s"
        )
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["group"] or "(none)"].append(r)
    lines.append("groups (a named group runs serially on one worker):")
    for name, rs in sorted(groups.items(), key=lambda kv: -sum(r["wall"] for r in kv[1])):
        lines.append(
            f"  {name}: {len(rs)} tests, serial wall {sum(r['wall'] for r in rs):.0f} s,"
            f" CPU {sum(r['cpu'] for r in rs):.0f} s"
        )
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        files[r["test"].split("::")[0]].append(r)
    lines.append(f"top {top} files by CPU:")
    for name, rs in sorted(files.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1]))[:top]:
        lines.append(
            f"  {sum(r['cpu'] for r in rs):7.1f} s CPU {sum(r['wall'] for r in rs):7.1f} s wall"
            f"  {len(rs):3d}  {name}"
        )
    lines.append(f"top {top} tests by CPU (cpu, wall, group):")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        lines.append(f"  {r['cpu']:6.1f} {r['wall']:6.1f}  {r['group'] or '-':8s} {r['test']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
