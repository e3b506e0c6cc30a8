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

Standard library only, run isolated (``-I -S``), and no more of it than ``os`` (and
``ctypes`` for the death signal): it starts once a run on every node, and ``subprocess``
alone (with the ``locale``, ``re`` and ``enum`` it imports) cost more than the rest of its
start. It prints the supervisor's pid, then waits for it and exits with its code.
"""

from __future__ import annotations

import os
import signal
import sys

SPARE = "-"


def die_with_parent() -> None:
    """In a child before exec: SIGTERM it when its parent dies (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        import ctypes

        # (Not contextlib.suppress: importing contextlib would double the keeper's start.)
        try:  # noqa: SIM105
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def spawn(command: list[str], stdio: tuple[int, int, int]) -> int:
    """``command`` in a session of its own with ``stdio`` as its fds 0-2 and no other, set
    to die with this process; its pid once it runs (OSError, with its errno, if it could
    not be run: told back through a pipe that its exec closes)."""
    ready, told = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: nothing but system calls until the exec
        try:
            os.close(ready)
            os.setsid()
            die_with_parent()
            for fd, std in zip(stdio, (0, 1, 2), strict=True):
                os.dup2(fd, std)
            os.closerange(3, told)
            os.closerange(told + 1, os.sysconf("SC_OPEN_MAX"))
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(told, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(told)
    with os.fdopen(ready, "rb") as f:
        failed = f.read()
    if failed:
        os.waitpid(pid, 0)
        raise OSError(int(failed), os.strerror(int(failed)), command[0])
    return pid


def main(argv: list[str]) -> int:
    host, log_path, command = int(argv[0]), argv[1], argv[2:]
    die_with_parent()
    if os.getppid() != host:  # the host died before that: nobody needs this run
        return 1
    null = os.open(os.devnull, os.O_RDWR)
    if log_path == SPARE:
        # Its stdin and stdout are ours: the run comes in on one, "ready" is the other's EOF.
        pid = spawn(command, (0, 1, null))
        os.write(1, b"%d\n" % pid)
        os.dup2(null, 0)
        os.dup2(null, 1)
    else:
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        pid = spawn(command, (null, log, log))
        os.close(log)
        os.write(1, b"%d\n" % pid)
    os.close(null)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
