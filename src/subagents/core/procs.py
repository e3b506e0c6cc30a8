"""Processes and process groups: identity (pid + start time, so a reused pid is never
mistaken), signalling a group, telling whether one still runs, and the one way anything
here is stopped: terminate, a bounded grace, then kill (:func:`escalate`, :func:`stop_group`).

Standard library at import (the supervisor uses the group primitives); psutil is imported
by the functions that read a process's start time.
"""

from __future__ import annotations

import os
import signal
import time

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.types import ProcessIdentity

# psutil derives start times from boot time + clock ticks; allow for float noise.
_SAME_START = 0.05
# What a process here takes as "stop": `subagents stop` (SIGTERM), Ctrl-C (SIGINT), its
# terminal closing (SIGHUP).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How often a wait for a group to end looks again: soon at first (most groups end within
# milliseconds of SIGTERM), then at most this often.
_LOOK_FIRST = 0.002
_LOOK_EVERY = 0.05


def identity(pid: int) -> ProcessIdentity:
    import psutil

    return {"pid": pid, "createTime": psutil.Process(pid).create_time()}


def is_alive(ident: ProcessIdentity) -> bool:
    """True when the process named by ``ident`` still runs (a zombie counts as dead)."""
    import psutil

    try:
        proc = psutil.Process(ident["pid"])
        if abs(proc.create_time() - ident["createTime"]) > _SAME_START:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, TypeError, ValueError):
        return False


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def killpg(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal a process group; False when it no longer exists or is not ours to signal.
    Signal 0 asks whether it exists at all (its zombies count: see :func:`group_alive`).

    A group we may not signal (PermissionError) is not ours: the group we started is gone
    and its id now belongs to another user's processes. It counts as gone everywhere (never
    signalled, never waited for), so no caller hangs on, or kills, someone else's group."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process group has a member that still runs. A zombie does not count: a
    killed grandchild is reparented to init, which may be slow to reap it (or never, in a
    container whose PID 1 does not), and ``killpg(pgid, 0)`` still finds its zombie."""
    if not killpg(pgid, 0):
        return False
    try:
        names = os.listdir("/proc")
    except OSError:  # no procfs: the signal probe is all there is
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            # after "(comm)": state, ppid, pgrp
            state, _ppid, pgrp = stat[stat.rfind(b")") + 2 :].split(None, 3)[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state != b"Z":
            return True
    return False


def wait_group(pgid: int, timeout: float, reap: Callable[[], object] | None = None) -> bool:
    """Wait up to ``timeout`` seconds for a process group to have no running member; True
    when it has none. ``reap`` is called at each look (a ``Popen.poll``: the leader's
    zombie is collected, which matters where there is no procfs to tell zombies apart)."""
    deadline = time.monotonic() + timeout
    pause = _LOOK_FIRST
    while True:
        if reap is not None:
            reap()
        if not group_alive(pgid):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, _LOOK_EVERY)


def escalate(
    send: Callable[[int], object],
    ended: Callable[[float], bool],
    grace: float,
    first: int = signal.SIGTERM,
) -> bool:
    """Terminate, a bounded grace, then kill: ``send(first)``, then ``ended(grace)`` waits
    at most ``grace`` seconds for the end; if it has not come, ``send(SIGKILL)``. True when
    it ended within the grace. The one sequence for a process group (:func:`stop_group`)
    and for a run's supervisor (its caller waits for its result instead)."""
    send(first)
    if ended(grace):
        return True
    send(signal.SIGKILL)
    return False


def stop_group(pgid: int, grace: float, reap: Callable[[], object] | None = None) -> bool:
    """SIGTERM a process group, SIGKILL what is left of it after ``grace`` seconds. True
    when it ended within the grace; after a SIGKILL the caller reaps what it started."""
    return escalate(lambda sig: killpg(pgid, sig), lambda t: wait_group(pgid, t, reap), grace)
