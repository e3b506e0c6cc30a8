"""How the process runner starts supervisors: each one waiting for its run, a few at a
time, and for a job with runs still to start, ahead of need (warm spares).

A supervisor process is ``python -m subagents.supervisor --spare``: it does its
imports, closes its stdout (so we know it is ready), then waits on its stdin for the run
directory it is handed (its path, ended by a NUL byte, which no path holds; EOF means it is
not needed, and it exits quietly). A
run whose launch finds no spare gets one started for it and handed its directory at once;
one that finds a spare (``take``) costs a write to a pipe instead of an interpreter's start
and imports (~40 ms alone, several times that when a wave of a parallel job starts at
once on few cores: bench/bench_jobs.py).

A command that is about to launch a run (``subagents run``) starts one spare as it starts
(``start_early``), so the supervisor's start overlaps the command's own imports and planning.

Start-ups go through a gate: at most one per core imports at a time (the gate opens
again when a supervisor is ready), so a wave of launches is served in turn instead of all
being slowed together, and spares warming never crowd out runs starting now.

A spare is handed a run only while this process's environment and working directory are
still those it was started with: its run's supervisor (and the child) gets exactly what a
fresh one would. Either way the supervisor is in its own session, started by this
process, and ``supervisor.json`` records it the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from subagents.core import procs
from subagents.supervisor import handover

if TYPE_CHECKING:
    from subagents.launchers.template import Template

# A spare waits at most handover.SPARE_WAIT seconds, then exits; it is handed a
# run only while well inside that, so it cannot time out as its run arrives.
MAX_AGE = 300.0
# How long a start-up holds its place at the gate at most (one stuck in its imports).
READY_WAIT = 5.0
# How long a launch waits for a place at the gate before it starts anyway.
GATE_WAIT = 2.0
# How long leaving spares may take to exit at a job's end before they are killed.
RETIRE_WAIT = 5.0
# After this many templates died while jobs wanted them, those jobs keep spares instead.
TEMPLATE_FAILURES = 2


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


# Supervisors doing their start-up (interpreter and imports) at once.
_GATE = threading.BoundedSemaphore(_cores())


def waiting_argv() -> list[str]:
    return handover.command()


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # deleted under us: nothing to compare with, so no spare is used
        return None


@dataclass
class Spare:
    """A supervisor process waiting for its run directory."""

    popen: subprocess.Popen[bytes]
    create_time: float
    environ: dict[str, str]
    cwd: str | None
    started: float = field(default_factory=time.monotonic)
    ready: threading.Event = field(default_factory=threading.Event)
    # Forked before this process became the command it serves (start_early's ``ahead``):
    # it takes this process's state (adopt) before it can serve.
    ahead: bool = False

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
        """Until the supervisor has done its imports (it closes its stdout) or is gone."""
        out = self.popen.stdout
        if out is not None:
            deadline = time.monotonic() + timeout
            with contextlib.suppress(OSError, ValueError):
                while (left := deadline - time.monotonic()) > 0:
                    if select.select([out], [], [], left)[0] and not os.read(out.fileno(), 4096):
                        break
            with contextlib.suppress(OSError):
                out.close()
        self.ready.set()

    def hand(self, run_dir: Path) -> bool:
        """Give the supervisor its run: False if it cannot take it (it is gone)."""
        if self.popen.stdin is None:
            return False
        try:
            self.popen.stdin.write(os.fsencode(run_dir) + b"\0")
            self.popen.stdin.close()
        except OSError:  # a broken pipe
            return False
        return True

    def adopt(self) -> bool:
        """Give a spare forked ahead this process's state now (environment, cwd, umask,
        signals: supervisor/handover.py's ``adopt``), as one forked now would have it. False
        if it cannot take it (it is gone)."""
        if self.popen.stdin is None or self.popen.poll() is not None:
            return False
        try:
            self.popen.stdin.write(handover.state_message())
            self.popen.stdin.flush()
        except OSError:  # a broken pipe
            return False
        self.environ, self.cwd, self.ahead = dict(os.environ), _cwd(), False
        return True

    def dismiss(self) -> None:
        """End of the wait: EOF on its stdin, and it exits (quietly, with nothing written)."""
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()


class _ForkedPopen(subprocess.Popen[bytes]):
    """A supervisor forked from this process instead of started anew: ``Popen``'s pipes,
    pid, polling and reaping, the child running the supervisor's ``__main__`` where ``Popen``
    would exec it. Only from a process that has the supervisor's modules imported and runs
    no other thread: a warm command server's worker as it starts (cli/warmserver.py). The
    child is what a started one is: in its own session, stdin and stdout the pipes, stderr
    as asked, no other descriptor of ours, this environment, cwd, umask and signal state."""

    def _execute_child(  # Popen's own (POSIX), by its parameters
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: Any,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: Any,
        shell: Any,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *rest: Any,
    ) -> None:
        import sys

        for stream in (sys.stdout, sys.stderr):  # nothing of ours written twice
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _be_supervisor(p2cread, c2pwrite, errwrite)
            finally:
                os._exit(1)  # only if it could not even start
        self.pid = pid
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]


def _be_supervisor(stdin: int, stdout: int, stderr: int) -> None:
    """In the forked child: the supervisor's ``python -m subagents.supervisor --spare``."""
    import runpy
    import sys

    os.setsid()
    for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(fd, target)
    handover.close_inherited()
    # "subagents.supervisor", "--spare", "--rehearse": as -m makes it (rehearsed: its
    # steps' pages are then its own before its run comes)
    sys.argv = [*waiting_argv()[2:], handover.REHEARSE_FLAG]
    runpy.run_module("subagents.supervisor", run_name="__main__", alter_sys=True)


def start_supervisor(stderr: IO[Any] | int = subprocess.DEVNULL, fork: bool = False) -> Spare:
    """Start a supervisor that waits for its run; raises OSError if it cannot be started.
    The caller holds a place at the gate (``gated``). ``fork``: from this process (see
    ``_ForkedPopen``), not a new interpreter."""
    environ = dict(os.environ)
    cwd = _cwd()
    starter = _ForkedPopen if fork else subprocess.Popen
    popen = starter(
        waiting_argv(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=environ,
        start_new_session=True,
        close_fds=True,
    )
    # From procfs (psutil's value, without its import on a run's way to its child); 0.0 when
    # already gone and reaped: the monitor will see it dead.
    create_time = procs.create_time(popen.pid) or 0.0
    return Spare(popen, create_time, environ, cwd)


def gated_start(
    stderr: IO[Any] | int = subprocess.DEVNULL, wait: float = GATE_WAIT, fork: bool = False
) -> Spare:
    """``start_supervisor`` once a place at the gate is free (or ``wait`` has passed); the
    place is given back when the supervisor is ready, from a thread of its own. One forked
    from this process (``fork``) has no imports to do: it is ready as it starts, and takes
    no place at the gate and no thread (a thread's start is ~2 ms of a warm command)."""
    if fork:
        spare = start_supervisor(stderr, fork)
        spare.wait_ready(0)  # (its end of the ready pipe closed: nothing to wait for)
        return spare
    placed = _GATE.acquire(timeout=wait)
    try:
        spare = start_supervisor(stderr, fork)
    except BaseException:
        if placed:
            _GATE.release()
        raise

    def ready() -> None:
        spare.wait_ready(READY_WAIT)
        if placed:
            _GATE.release()

    threading.Thread(target=ready, name="subagents-supervisor-start", daemon=True).start()
    return spare


class SparePool:
    """The spares of one process, shared by every job in it (each says how many it wants)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spares: list[Spare] = []
        self._wants: dict[int, int] = {}
        self._warmer: threading.Thread | None = None
        # Dismissed spares not yet reaped.
        self._leaving: list[Spare] = []
        self._template: Template | None = None
        self._template_failures = 0
        self._atexit = False
        # The owners that asked for a template.
        self._templating: set[int] = set()

    def _target(self) -> int:
        """How many spares to keep: none while a template serves (or is wanted)."""
        return 0 if self._templated() or self._template is not None else self._wanted()

    def _wanted(self) -> int:
        return sum(self._wants.values())

    def _templated(self) -> bool:
        """Whether the runs wanted are served by a template: a job asked for one, and the
        templates of this process have not kept dying."""
        return bool(self._templating) and self._template_failures < TEMPLATE_FAILURES

    def want(self, owner: object, count: int, *, template: bool = False) -> None:
        """Keep ``count`` spares ready for ``owner``'s next runs (0: none; its spares go, and
        once no job wants any, every spare is gone when this returns). ``template``: serve
        them from a template instead (one for the process, kept while any job wants
        runs, gone when this returns once none does)."""
        with self._lock:
            if count > 0:
                self._wants[id(owner)] = count
            else:
                self._wants.pop(id(owner), None)
            if count > 0 and template:
                self._templating.add(id(owner))
            else:
                self._templating.discard(id(owner))
            target = self._target()
            # (Spares already started are kept for a template's runs: they are paid for.)
            kept = self._wanted() if self._template is not None or self._templated() else target
            self._leaving.extend(self._spares[kept:])
            del self._spares[kept:]
            warmer = self._warmer
            if self._templated() and self._template is None:
                self._start_template()
            nobody = self._wanted() == 0
            if nobody:  # the next job tries a template again
                self._template_failures = 0
            retiring = self._template if nobody else None
            self._template = None if retiring is not None else self._template
            if len(self._spares) < target and (warmer is None or not warmer.is_alive()):
                warmer = self._warmer = threading.Thread(
                    target=self._warm, name="subagents-spares", daemon=True
                )
                warmer.start()
        self._dismiss_leaving()
        if retiring is not None:
            retiring.retire()
        if nobody:  # no job wants spares: leave no process behind
            if warmer is not None:
                warmer.join(GATE_WAIT + READY_WAIT + RETIRE_WAIT)
            self._dismiss_leaving(wait=True)

    def _warm(self) -> None:
        """Start spares one after another, each through the gate."""
        while True:
            with self._lock:
                if len(self._spares) >= self._target():
                    return
            try:
                spare = gated_start()
            except OSError:
                return  # no spares: launches start supervisors as they always could
            with self._lock:
                if len(self._spares) < self._target():
                    self._spares.append(spare)
                else:
                    self._leaving.append(spare)
                more = len(self._spares) < self._target()
            if more:
                spare.ready.wait(READY_WAIT)  # one at a time

    def _start_template(self) -> None:
        """(Under the lock.) Start a template now, not through the gate: it is what saves
        the others their start. It takes a place there while it imports, if one is free."""
        from subagents.launchers.template import READY_WAIT as TEMPLATE_READY_WAIT
        from subagents.launchers.template import Template  # (a job of several runs only)

        try:
            template = Template.start()
        except OSError:
            self._template_failures += 1
            return  # runs start their own supervisors, as they always could
        self._template = template
        if not self._atexit:
            self._atexit = True
            atexit.register(self._retire_template)
        placed = _GATE.acquire(blocking=False)

        def ready() -> None:
            template.wait_ready(TEMPLATE_READY_WAIT)
            if placed:
                _GATE.release()

        threading.Thread(target=ready, name="subagents-template-start", daemon=True).start()

    def fork(self, run_dir: Path) -> tuple[int, float] | None:
        """A supervisor for ``run_dir`` forked from this process's template (its pid and
        start time), or None: there is none, or it could not (a template that died is
        dropped, and the runs start their supervisors as they would without it)."""
        with self._lock:
            template = self._template
        if template is None:
            return None
        # One starting is waited for a while: it is ready sooner than a supervisor started
        # now (one not ready by then is left to get ready, and this run starts otherwise).
        template.ready.wait(READY_WAIT)
        forked = template.fork(run_dir)
        if forked is None and (template.broken or template.popen.poll() is not None):
            with self._lock:
                if self._template is template:
                    self._template = None
                    self._template_failures += 1
            template.retire(0.0)
        return forked

    def _retire_template(self) -> None:
        with self._lock:
            template, self._template = self._template, None
        if template is not None:
            template.retire()

    def template_pid(self, *, ready: bool = False) -> int | None:
        """The template's pid (``ready``: once it is ready), for tests and diagnostics."""
        with self._lock:
            template = self._template
        if template is None or (ready and not template.ready.is_set()):
            return None
        return template.pid

    def start_early(self, fork: bool = False, ahead: bool = False) -> None:
        """Start one spare now, before any job says what it wants: a command that is about to
        launch a run (``subagents run``) calls this as it starts, so the supervisor's own start
        (its interpreter and imports) goes on beside the command's instead of after it. The
        first job's ``want`` counts it as one of its spares; one never wanted is killed when
        this process exits (it was handed nothing, so it leaves nothing behind). ``fork``:
        forked from this process (a warm server's worker: ``_ForkedPopen``), if it runs no
        other thread yet. ``ahead``: forked before this process knows the command it will
        serve (a warm server's standby worker); the command's own call then only gives it
        the command's state (``Spare.adopt``), and starts one if it cannot take it."""
        with self._lock:
            waiting = [s for s in self._spares if s.ahead]
        if not ahead and waiting:
            if any([s.adopt() for s in waiting]):
                return
            self.let_go_ahead()
        fork = fork and threading.active_count() == 1
        try:
            spare = gated_start(fork=fork)
        except OSError:
            return  # the run's launch starts one as it always could
        spare.ahead = ahead
        with self._lock:
            self._spares.append(spare)
        atexit.register(self._kill_unhanded)

    def let_go_ahead(self) -> None:
        """The spares forked ahead and not given a command's state: not needed (the command
        launches nothing here), or gone. They leave (EOF on their stdin) and are reaped."""
        with self._lock:
            self._leaving.extend(s for s in self._spares if s.ahead)
            self._spares = [s for s in self._spares if not s.ahead]
        self._dismiss_leaving()

    def _kill_unhanded(self) -> None:
        """At exit: the spares still waiting (never handed a run) killed and reaped, not
        left to find out on their own once their imports are done."""
        with self._lock:
            waiting, self._spares = self._spares, []
        for spare in waiting:
            with contextlib.suppress(OSError):
                spare.popen.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                spare.popen.wait(RETIRE_WAIT)

    def take(self) -> Spare | None:
        """A spare to hand a run to (a ready one first, else the oldest still importing: it
        is ahead of a fresh start), or None."""
        with self._lock:
            # Ready ones first; the sort is stable, so the oldest first within each.
            self._spares.sort(key=lambda s: not s.ready.is_set())
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

    def waiting(self) -> list[Spare]:
        """The spares ready (or getting ready) to be handed a run."""
        with self._lock:
            return list(self._spares)

    def pids(self) -> list[int]:
        """The spares this process holds (waiting or leaving), for tests and diagnostics."""
        with self._lock:
            return [s.pid for s in self._spares + self._leaving]


SPARES = SparePool()
