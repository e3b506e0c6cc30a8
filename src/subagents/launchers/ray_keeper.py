"""Between a Ray host actor and a run's supervisor:
``python -I -S ray_keeper.py HOST_PID LOG ARGV...``.

When an actor's process exits, Ray SIGKILLs that process's children. The supervisor must
not be one of them: killed so, it could not kill its child's process group (its own
session), which would live on. So the host's child is this keeper, and the supervisor
is the keeper's child, set to get SIGTERM when the keeper dies (``PR_SET_PDEATHSIG``):
Ray kills the keeper, the supervisor aborts the run and takes its child's group with it.
The keeper asks the same of its own parent, the host (``HOST_PID``), first thing: so the
host starts it without a ``preexec_fn``, which would make every start a full ``fork`` of
the host's large process instead of a ``vfork``.

``LOG`` is where the supervisor's output goes; ``-`` starts a warm spare instead (a
supervisor that waits for its run directory, supervisor/handover.py): it reads the run
from the keeper's stdin, and says it is ready by closing the keeper's stdout, which it
shares.

Standard library only, run isolated (``-I -S``): it starts in a few milliseconds.
It prints the supervisor's pid, then waits for it and exits with its code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

SPARE = "-"


def die_with_parent() -> None:
    """In a child before exec: SIGTERM it when its parent dies (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def main(argv: list[str]) -> int:
    host, log_path, command = int(argv[0]), argv[1], argv[2:]
    die_with_parent()
    if os.getppid() != host:  # the host died before that: nobody needs this run
        return 1
    if log_path == SPARE:
        # Its stdin and stdout are ours: the run comes in on one, "ready" is the other's EOF.
        proc = subprocess.Popen(
            command,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        print(proc.pid, flush=True)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        return proc.wait()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            preexec_fn=die_with_parent,
        )
    print(proc.pid, flush=True)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
