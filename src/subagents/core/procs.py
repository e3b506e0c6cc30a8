"""Processes and process groups: identity (pid + start time, so a reused pid is never
mistaken), signalling a group, telling whether one still runs.

Standard library at import (the supervisor uses the group primitives); psutil is imported
by the functions that read a process's start time.
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from subagents.types import ProcessIdentity

# psutil derives start times from boot time + clock ticks; allow for float noise.
_SAME_START = 0.05


def identity(pid: int) -> ProcessIdentity:
    import psutil

    return {"pid": pid, "createTime": psutil.Process(pid).create_time()}


def is_alive(ident: Mapping[str, Any]) -> bool:
    """True when the process named by ``ident`` still runs (a zombie counts as dead)."""
    import psutil

    try:
        proc = psutil.Process(int(ident["pid"]))
        if abs(proc.create_time() - float(ident["createTime"])) > _SAME_START:
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
    """Signal a process group; False when it no longer exists (or is not ours to signal).
    Signal 0 asks whether it exists at all (its zombies count: see :func:`group_alive`)."""
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
