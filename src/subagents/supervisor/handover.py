"""How a supervisor process is started, and how one started ahead of its run (a warm spare,
launchers/spares.py) waits here to be handed its run directory: both ends of the handover.
Standard library only, like the supervisor."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (see state_message)
import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path

from subagents.core.files import FILE_MODE

# Started as a warm spare with SPARE_FLAG, it waits this long for a run.
SPARE_FLAG = "--spare"
# A spare forked from a warm worker rehearses its run's steps while it waits (rehearsal.py).
REHEARSE_FLAG = "--rehearse"
SPARE_WAIT = 600.0
# Started as a template with TEMPLATE_FLAG (supervisor/template.py), it forks a supervisor
# for each run directory it is handed; with BOUND_FLAG too, those die with it.
TEMPLATE_FLAG = "--template"
BOUND_FLAG = "--bound"
# What a template says on its stdout once it is ready.
TEMPLATE_READY = b"ready\n"
# Before its run, a spare forked ahead of the command it serves (a warm server's standby
# worker forks one before it knows its caller) is sent that command's process state, to
# take as its own (``adopt``): ADOPT, the length in 8 digits, then the state (marshal).
ADOPT = b"\x01"
_ADOPT_HEAD = 1 + 8
# In the run directory: the supervisor's own output, and the caller's environment for a
# supervisor that does not inherit it (tmux), read and removed as it starts.
LOG_FILE = "supervisor.log"
ENVIRON_FILE = "environ.json"


def command(run_dir: Path | None = None) -> list[str]:
    """The supervisor's command line: for ``run_dir``, or (None) a spare that waits for one."""
    return [sys.executable, "-m", "subagents.supervisor", str(run_dir) if run_dir else SPARE_FLAG]


def template_command(*, bound: bool = False) -> list[str]:
    """A template's command line (supervisor/template.py); ``bound``: its supervisors get
    SIGTERM when it dies (on a Ray node, as a keeper's do)."""
    return [sys.executable, "-m", "subagents.supervisor", TEMPLATE_FLAG, *([BOUND_FLAG] * bound)]


def await_run(stop_requested: list[int], wait: float = SPARE_WAIT) -> Path | None:
    """As a warm spare: the run directory handed over on stdin (its path, then a NUL byte,
    which no path holds), then the stdio a supervisor started for the run has
    (``run_stdio``). None, to exit quietly: EOF (not needed, or its starter is gone), a stop
    signal with no run handed over yet (``stop_requested``, filled by the supervisor's
    early signal handlers), or ``wait`` seconds without a run."""
    # What every run imports on its way to the child (the recorder's wording).
    from subagents.present import progress  # noqa: F401

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous = signal.set_wakeup_fd(wake_w)
    # Ready: stdout, a pipe to whoever started us, is closed to say so.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.close(null)
    data = b""
    try:
        deadline = time.monotonic() + wait
        while b"\0" not in (data := _adopted(data)) or data.startswith(ADOPT):
            left = deadline - time.monotonic()
            # Asked to stop: take a run already handed over (the signal then aborts it, as
            # it would a supervisor started for it), else go.
            stop = bool(stop_requested)
            ready = select.select([0, wake_r], [], [], 0 if stop else max(0.0, left))[0]
            if 0 in ready:
                chunk = os.read(0, 4096)
                if not chunk:
                    return None
                data += chunk
            elif stop or left <= 0:
                return None
    finally:
        signal.set_wakeup_fd(previous)
        os.close(wake_r)
        os.close(wake_w)
    run_dir = Path(os.fsdecode(data.split(b"\0", 1)[0]))
    run_stdio(run_dir)
    return run_dir


def state_message() -> bytes:
    """This process's environment, working directory, umask and signal state (those
    ignored, those blocked), for a spare forked before this process took them on."""
    import marshal

    umask = os.umask(0)
    os.umask(umask)
    # (_signal's, not signal's: those make an enum of every number, a tenth of a ms in all)
    ignored = []
    for number in _signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            if _signal.getsignal(number) == _signal.SIG_IGN:
                ignored.append(number)
    blocked = list(_signal.pthread_sigmask(_signal.SIG_BLOCK, []))
    body = marshal.dumps((dict(os.environb), os.getcwdb(), umask, ignored, blocked))
    return ADOPT + b"%08d" % len(body) + body


def _adopted(data: bytes) -> bytes:
    """Take on each whole state message at the front of ``data``; what is left of it."""
    while data.startswith(ADOPT) and len(data) >= _ADOPT_HEAD:
        size = int(data[1:_ADOPT_HEAD])
        if len(data) < _ADOPT_HEAD + size:
            break
        _adopt(data[_ADOPT_HEAD : _ADOPT_HEAD + size])
        data = data[_ADOPT_HEAD + size :]
    return data


def _adopt(body: bytes) -> None:
    """Become what a supervisor forked from the sender now would be: its environment,
    working directory, umask, ignored and blocked signals (but the stop signals, which the
    supervisor handles itself, as one forked then would have set them)."""
    import marshal

    from subagents.core.procs import STOP_SIGNALS

    environ, cwd, umask, ignored, blocked = marshal.loads(body)
    os.environb.clear()
    os.environb.update(environ)
    time.tzset()
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    os.umask(umask)
    for number in _signal.valid_signals():
        if number in STOP_SIGNALS:
            continue
        with contextlib.suppress(OSError, ValueError):
            if number in ignored:
                _signal.signal(number, _signal.SIG_IGN)
            elif _signal.getsignal(number) == _signal.SIG_IGN:
                _signal.signal(number, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, blocked)


def close_inherited(*keep: int) -> None:
    """Close every descriptor above 2 but ``keep``: a supervisor forked from another process
    holds none of its forker's (a caller's pipe, a socket), as one started with ``close_fds``."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def run_stdio(run_dir: Path) -> None:
    """The stdio of a supervisor started for ``run_dir``: stdin from /dev/null, stdout and
    stderr to the run's supervisor.log (if that cannot be opened, stdout to /dev/null and
    stderr as it was: the run still goes on)."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    with contextlib.suppress(OSError):
        log = os.open(run_dir / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
