"""The starter's side of a supervisor template (supervisor/template.py): one process that
did a supervisor's start-up once and forks a supervisor for each run directory handed to
it, so that a job's runs stop paying an interpreter's start and imports each.

Handing it a run is a write (the path and a NUL) and a reply (the pid of the supervisor
forked for it, a line, written by that supervisor itself). One run is handed at a time
(a lock), so replies never cross. A reply that does not come means no supervisor was
forked for the run (see the template's docstring): the caller starts one another way.

Like a spare, a template is used only while this process's environment and working
directory are those it was started with: its supervisors inherit them.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from subagents.core import procs
from subagents.supervisor import handover

# How long a fork's reply may take before the template counts as stuck (and is killed).
REPLY_WAIT = 10.0
# Then how long what it forked has to tell its pid (a reply after a fallback start would be
# a second supervisor for the run; EOF comes as soon as no fork is left to reply).
LAST_REPLY_WAIT = 60.0
# How long a template may take to be ready (its imports, on a loaded machine).
READY_WAIT = 30.0
# How long a leaving template may take to exit (it reaps its last supervisors first).
RETIRE_WAIT = 5.0


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


class Template:
    """A template process this one started, and the pipe pair to it."""

    def __init__(
        self, popen: subprocess.Popen[bytes], environ: dict[str, str], kept: bool = False
    ) -> None:
        self.popen = popen
        self.kept = kept
        self.environ = environ
        self.cwd = _cwd()
        self.ready = threading.Event()
        self.broken = False
        self._lock = threading.Lock()
        self._buf = b""

    @classmethod
    def start(cls, keeper: Sequence[str] = ()) -> Template:
        """Start a template here (OSError when it cannot be started); ``wait_ready`` next.
        ``keeper``: through this command (a Ray host's keeper, in its spare mode: it says
        the template's pid first), its supervisors bound to it."""
        # os.environ, as a fresh supervisor gets it (spares.py), not the C library's copy,
        # which a library may change (seen: COLUMNS and LINES under pytest).
        environ = dict(os.environ)
        popen = subprocess.Popen(
            [*keeper, *handover.template_command(bound=bool(keeper))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environ,
            start_new_session=True,
            close_fds=True,
        )
        return cls(popen, environ, bool(keeper))

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_ready(self, timeout: float) -> None:
        """Until the template has said it is ready, or ``timeout`` (then it is broken)."""
        deadline = time.monotonic() + timeout
        line = self._line(timeout)
        if self.kept and line is not None and line.isdigit():  # its keeper's line first
            line = self._line(max(0.0, deadline - time.monotonic()))
        if line != handover.TEMPLATE_READY.strip():
            self.broken = True
        self.ready.set()

    def usable(self) -> bool:
        """Ready, running, and in the environment a fresh supervisor would get."""
        return (
            self.ready.is_set()
            and not self.broken
            and self.popen.poll() is None
            and self.cwd is not None
            and self.cwd == _cwd()
            and self.environ == dict(os.environ)
        )

    def fork(self, run_dir: Path) -> tuple[int, float] | None:
        """A supervisor forked for ``run_dir``: its pid and start time; None when none was
        (the template is unusable, or gone: then it is broken)."""
        with self._lock:
            if not self.usable() or self.popen.stdin is None:
                return None
            try:
                self.popen.stdin.write(os.fsencode(run_dir) + b"\0")
                self.popen.stdin.flush()
            except (OSError, ValueError):  # it is gone (or was dismissed meanwhile)
                self.broken = True
                return None
            line = self._line(REPLY_WAIT)
            if line is None and self.popen.poll() is None:
                # Stuck: killed, then whatever it forked still tells its pid (or nothing).
                self.popen.kill()
                line = self._line(LAST_REPLY_WAIT)
            if line is None:
                self.broken = True
                return None
            pid = int(line) if line.isdigit() else 0
            if pid <= 0:  # its fork failed; it still serves
                return None
        # 0.0 when it has already ended and been reaped: its monitor sees it gone.
        return pid, procs.create_time(pid) or 0.0

    def _line(self, timeout: float) -> bytes | None:
        """The next line of its stdout, or None at EOF or after ``timeout``."""
        out = self.popen.stdout
        if out is None:
            return None
        deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError, ValueError):
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([out], [], [], left)[0]:
                    return None
                chunk = os.read(out.fileno(), 4096)
                if not chunk:
                    return None
                self._buf += chunk
            line, self._buf = self._buf.split(b"\n", 1)
            return line.strip()
        return None

    def dismiss(self) -> None:
        """EOF on its stdin: it reaps its last supervisors (bound: waits for them) and exits."""
        with contextlib.suppress(OSError, ValueError):
            if self.popen.stdin is not None:
                self.popen.stdin.close()

    def retire(self, wait: float = RETIRE_WAIT) -> None:
        """``dismiss`` it, then reap it (killed if it has not exited within ``wait``). Its
        supervisors still running go on (unless bound to it)."""
        self.dismiss()
        try:
            self.popen.wait(wait)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        with contextlib.suppress(OSError):
            if self.popen.stdout is not None:
                self.popen.stdout.close()
