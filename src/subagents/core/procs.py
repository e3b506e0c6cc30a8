"""Process identity (pid + start time, so a reused pid is never mistaken) and group kills."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

import psutil

# psutil derives start times from boot time + clock ticks; allow for float noise.
_SAME_START = 0.05


def identity(pid: int) -> dict[str, Any]:
    return {"pid": pid, "createTime": psutil.Process(pid).create_time()}


def is_alive(ident: dict[str, Any]) -> bool:
    """True when the process named by ``ident`` still runs (a zombie counts as dead)."""
    try:
        proc = psutil.Process(int(ident["pid"]))
        if abs(proc.create_time() - float(ident["createTime"])) > _SAME_START:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, TypeError, ValueError):
        return False


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
        return True
    return False
