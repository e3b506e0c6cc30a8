"""A template: a supervisor process that has done its start-up (interpreter and imports)
once and forks a supervisor for each run directory it is handed, instead of each run
paying that start (``python -m subagents.supervisor --template``).

The handover is the spares' (handover.py): a run directory's path ended by a NUL byte on
stdin; EOF means no more runs. The template says it is ready with a line ``ready`` on its
stdout. For each path it forks; the child writes its own pid, a line, on that stdout
before anything else, then becomes what a supervisor started for the run is: a session
of its own, the signal dispositions a fresh one has, stdin from /dev/null and output to
the run's ``supervisor.log``, no other inherited descriptor, ``sys.argv`` as a fresh one's.
Its starter learns the pid from the child itself: a reply comes for every fork, even when
the template dies just after it, and none for a path it never forked (EOF, or ``0`` when
the fork failed), so a run whose reply is missing can be started another way without
ever having two supervisors.

The template reaps its children (SIGCHLD through the wakeup fd; it has no threads, so
forking is safe). It leaves on EOF (after its children, for a bounded time, so that they
are reaped) or on a stop signal. Its children are not bound to it, and go on when it is
gone, as supervisors go on without their starter; with ``--bound`` (on a Ray node, where
it stands in for the keepers: launchers/ray_keeper.py) each gets SIGTERM when it dies, and
at EOF it stays until the last has ended.

Standard library only, like the rest of the supervisor.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path

from subagents.supervisor.handover import TEMPLATE_READY, close_inherited, run_stdio

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from collections.abc import Callable
    from signal import _HANDLER  # (typeshed's: what signal.signal takes and gives back)

    Prctl = Callable[[int, int], int]

# At EOF: how long the supervisors still running are waited for (and reaped).
LEAVE_WAIT = 2.0


def serve(early: list[int], *, bound: bool = False) -> Path | None:
    """Serve run directories from stdin until EOF or a stop signal (``early``, filled by
    the supervisor's early handlers): returns None in the template, when it is done, and
    the run directory in each forked child, set up as a fresh supervisor for it."""
    # What every run imports on its way to the child (the recorder's wording).
    from subagents.present import progress  # noqa: F401

    prctl = _death_signal() if bound else None
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    previous = signal.set_wakeup_fd(wake_w)
    # (So that it reaches the wakeup fd; its children get back what it inherited.)
    chld = signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    data = b""
    template = os.getpid()
    try:
        os.write(1, TEMPLATE_READY)
        while not early:
            ready = select.select([0, wake_r], [], [])[0]
            if wake_r in ready:
                _drain(wake_r)
                _reap(children)
            if 0 not in ready:
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                # Bound, its supervisors would end with it: it stays until they have.
                _leave(children, wake_r, early, None if bound else LEAVE_WAIT)
                return None
            data += chunk
            while b"\0" in data:
                path, data = data.split(b"\0", 1)
                run_dir = Path(os.fsdecode(path))
                try:
                    pid = os.fork()
                except OSError:
                    os.write(1, b"0\n")  # its starter starts it another way
                    continue
                if pid == 0:
                    _become_supervisor(run_dir, early, (template, prctl), chld)
                    return run_dir
                children.add(pid)
        return None  # a stop signal: the supervisors go on (bound ones get theirs)
    finally:
        if os.getpid() == template:
            signal.set_wakeup_fd(previous)
            os.close(wake_r)
            os.close(wake_w)


def _become_supervisor(
    run_dir: Path, early: list[int], bind: tuple[int, Prctl | None], chld: _HANDLER
) -> None:
    """In the forked child: what a supervisor started for ``run_dir`` is, first thing.
    ``bind``: the template's pid, and the prctl to die with it; ``chld``: SIGCHLD's
    disposition as the template inherited it (as a started supervisor inherits it)."""
    early.clear()  # the template's stop requests are not this run's
    os.setsid()
    template, prctl = bind
    if prctl is not None:
        _bind(prctl, template, early)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL if chld is None else chld)
    # (The stop signals keep the early handlers __main__ put in, as in a fresh one.)
    reply = os.dup(1)
    run_stdio(run_dir)
    # Set up as a fresh one is (no descriptor of the template's left but the reply's) when
    # its starter learns of it.
    close_inherited(reply)
    with contextlib.suppress(OSError):  # its starter is gone: the run goes on regardless
        os.write(reply, b"%d\n" % os.getpid())
    os.close(reply)
    sys.argv[1:] = [str(run_dir)]


def _death_signal() -> Prctl | None:
    """The prctl(2) to set a death signal with (Linux), loaded once in the template."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl: Prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _bind(prctl: Prctl, template: int, early: list[int]) -> None:
    """SIGTERM this process when the template dies (PR_SET_PDEATHSIG); if it already has,
    the run is stopped before it starts, as the signal would have."""
    try:
        prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != template:
        early.append(signal.SIGTERM)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reap(children: set[int]) -> None:
    """Collect every child that has exited (no zombies)."""
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


def _leave(children: set[int], wake_r: int, early: list[int], wait: float | None) -> None:
    """At EOF: reap the supervisors still running as they end, for at most ``wait``
    seconds (None: until the last; then they go on without the template) or until a stop
    signal."""
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        _reap(children)
        left = None if deadline is None else deadline - time.monotonic()
        if not children or early or (left is not None and left <= 0):
            return
        if select.select([wake_r], [], [], left)[0]:
            _drain(wake_r)
