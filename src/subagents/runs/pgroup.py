"""Process groups, as the supervisor sees them: signal one, tell whether one still runs.
Standard library only (the supervisor imports it)."""

from __future__ import annotations

import os
import signal


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def killpg(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
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
