"""Warm spare supervisors for the process runner.

A spare is ``python -m subagents.runs.supervisor --spare`` started ahead of need: it does
its imports, closes its stdout (so we know it is ready), then waits on its stdin for the
run directory it is handed (one line; EOF means it is not needed, and it exits). Launching
a run then costs a line on a pipe instead of an interpreter's start and imports (~40 ms
alone, far more when a whole wave of a parallel job starts at once on few cores:
bench/bench_jobs.py).

A job with runs still to start asks for spares (``want``); ``process.launch`` takes one
when it can. They are started by one background thread, a few at a time, each once the
one before is ready: spares warming never crowd out the supervisors of runs starting now.
A spare is handed a run only while this process's environment and working directory are
still those it was started with, so its run's supervisor (and the child) gets exactly
what a fresh one would. It is as detached as a fresh one (its own session, started by this
process), and ``supervisor.json`` records it the same way.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SPARE_FLAG = "--spare"
# A spare waits at most SPARE_WAIT seconds (runs/supervisor.py), then exits; it is handed a
# run only while well inside that, so it cannot time out as its line arrives.
MAX_AGE = 300.0
# How long a spare may take to be ready before the next one is started anyway.
READY_WAIT = 10.0
# How long leaving spares may take to exit at a job's end before they are killed.
RETIRE_WAIT = 5.0
# Spares importing at once: one per two cores, so the runs starting meanwhile keep the rest.
WARMING_AT_ONCE = max(1, (os.cpu_count() or 2) // 2)


def spare_argv() -> list[str]:
    return [sys.executable, "-m", "subagents.runs.supervisor", SPARE_FLAG]


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # deleted under us: nothing to compare with, so no spare is used
        return None


@dataclass
class Spare:
    popen: subprocess.Popen[bytes]
    create_time: float
    environ: dict[str, str]
    cwd: str | None
    started: float = field(default_factory=time.monotonic)
    ready: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def usable(self) -> bool:
        """Alive, young enough, and started in the environment a fresh supervisor would get."""
        return (
            self.popen.poll() is None
            and time.monotonic() - self.started < MAX_AGE
            and self.cwd is not None
            and self.cwd == _cwd()
            and self.environ == dict(os.environ)
        )

    def wait_ready(self, timeout: float) -> None:
        """Until the spare has done its imports (it closes its stdout) or is gone."""
        out = self.popen.stdout
        if out is None:
            return
        deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError, ValueError):
            while (left := deadline - time.monotonic()) > 0:
                if select.select([out], [], [], left)[0] and not out.read1(4096):
                    break
        with contextlib.suppress(OSError):
            out.close()
        self.ready = True

    def hand(self, run_dir: Path) -> bool:
        """Give the spare its run: False if it cannot take it."""
        line = os.fsencode(run_dir)
        if b"\n" in line or self.popen.stdin is None:
            return False
        try:
            self.popen.stdin.write(line + b"\n")
            self.popen.stdin.close()
        except OSError:  # gone (a broken pipe): the caller starts a fresh supervisor
            return False
        return True

    def dismiss(self) -> None:
        """End of the wait: EOF on its stdin, and it exits (quietly, with nothing written)."""
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()


def start_spare() -> Spare | None:
    environ = dict(os.environ)
    cwd = _cwd()
    try:
        popen = subprocess.Popen(
            spare_argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environ,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return None  # no spare: launches start supervisors as they always could
    try:
        create_time = psutil.Process(popen.pid).create_time()
    except psutil.Error:
        create_time = 0.0
    return Spare(popen, create_time, environ, cwd)


class SparePool:
    """The spares of one process, shared by every job in it (each says how many it wants)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spares: list[Spare] = []
        self._wants: dict[int, int] = {}
        self._warmers: list[threading.Thread] = []
        # Dismissed spares not yet reaped.
        self._leaving: list[Spare] = []

    def _target(self) -> int:
        return sum(self._wants.values())

    def want(self, owner: object, count: int) -> None:
        """Keep ``count`` spares ready for ``owner``'s next runs (0: none; its spares go, and
        once no job wants any, every spare is gone when this returns)."""
        with self._lock:
            if count > 0:
                self._wants[id(owner)] = count
            else:
                self._wants.pop(id(owner), None)
            target = self._target()
            self._leaving.extend(self._spares[target:])
            del self._spares[target:]
            self._warmers = [t for t in self._warmers if t.is_alive()]
            while len(self._spares) < target and len(self._warmers) < WARMING_AT_ONCE:
                warmer = threading.Thread(target=self._warm, name="subagents-spare", daemon=True)
                self._warmers.append(warmer)
                warmer.start()
            warmers = list(self._warmers) if target == 0 else []
        self._dismiss_leaving()
        if target == 0:  # no job wants spares: leave no process behind
            for warmer in warmers:
                warmer.join(READY_WAIT + RETIRE_WAIT)
            self._dismiss_leaving(wait=True)

    def _warm(self) -> None:
        """Start spares one after another, each once the one before is ready."""
        while True:
            with self._lock:
                if len(self._spares) >= self._target():
                    return
            spare = start_spare()
            if spare is None:
                return
            with self._lock:
                if len(self._spares) < self._target():
                    self._spares.append(spare)
                else:
                    self._leaving.append(spare)
                    spare.dismiss()
            spare.wait_ready(READY_WAIT)

    def take(self) -> Spare | None:
        """A spare to hand a run to (a ready one first, else the oldest still importing: it
        is ahead of a fresh start), or None: start a fresh supervisor."""
        with self._lock:
            self._spares.sort(key=lambda s: not s.ready)  # stable: oldest first within each
            while self._spares:
                spare = self._spares.pop(0)
                if spare.usable():
                    return spare
                self._leaving.append(spare)
        return None

    def drop(self, spare: Spare) -> None:
        """A spare that could not be handed its run."""
        with self._lock:
            self._leaving.append(spare)
        self._dismiss_leaving()

    def _dismiss_leaving(self, wait: bool = False) -> None:
        """Dismiss the spares that are leaving and reap those gone; ``wait``: all of them,
        bounded, killing any that will not go."""
        with self._lock:
            leaving, self._leaving = self._leaving, []
        for spare in leaving:
            spare.dismiss()
        deadline = time.monotonic() + RETIRE_WAIT
        kept = []
        for spare in leaving:
            if wait:
                try:
                    spare.popen.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    spare.popen.kill()
                    spare.popen.wait()
            elif spare.popen.poll() is None:
                kept.append(spare)
        if kept:
            with self._lock:
                self._leaving.extend(kept)

    def pids(self) -> list[int]:
        """The spares this process holds (waiting or leaving), for tests and diagnostics."""
        with self._lock:
            return [s.pid for s in self._spares + self._leaving]


SPARES = SparePool()
