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
    from collections.abc import Callable, Mapping, Sequence

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


# The variable naming the run in its child's environment, which every process the child
# starts inherits: what tells the run's leftovers from strangers once its child is gone.
RUN_ENV = "SUBAGENTS_RUN_ID"
# The process its user started for this command when that is not this one: a warm command
# server's worker (cli/warmserver.py) runs the command of its caller, the process the user
# sees, waits for and may kill (see :func:`command_pid`).
_command_pid: int | None = None


def command_pid() -> int:
    """The pid of this command's process as its user knows it: this process's, or in a warm
    server's worker its caller's (what a foreground job is bound to, and what its runs say
    they were bound to once it is gone)."""
    return _command_pid if _command_pid is not None else os.getpid()


def set_command_pid(pid: int) -> None:
    """In a warm server's worker: the caller is this command's process (``command_pid``)."""
    global _command_pid
    _command_pid = pid


def _proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after ``(comm)`` (state first); None when the
    process does not exist. OSError when there is no procfs."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        if not os.path.isdir("/proc/self"):
            raise OSError("no procfs") from None
        return None
    return stat[stat.rfind(b")") + 2 :].split()


_boot: list[float] = []


def _boot_time() -> float:
    if not _boot:
        with open("/proc/stat", "rb") as f:
            _boot.append(float(next(ln for ln in f if ln.startswith(b"btime")).split()[1]))
    return _boot[0]


def create_time(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds, psutil's ``create_time``), or None when
    there is no such process. Standard library where there is a procfs (the supervisor
    records its child's with it), psutil elsewhere."""
    try:
        fields = _proc_stat(pid)
        if fields is None:
            return None
        return int(fields[19]) / os.sysconf("SC_CLK_TCK") + _boot_time()
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, ValueError):
        return None


def identity(pid: int) -> ProcessIdentity:
    """``pid`` as a record names it; ProcessLookupError when there is no such process."""
    when = create_time(pid)
    if when is None:
        raise ProcessLookupError(f"no process {pid}")
    return {"pid": pid, "createTime": when}


def _same(ident: ProcessIdentity) -> tuple[int, bool] | None:
    """``(pid, zombie)`` while the process named by ``ident`` is still the one it names
    (its start time matches); None when it is gone or the record says nothing usable."""
    try:
        pid, recorded = int(ident["pid"]), float(ident["createTime"])
    except (KeyError, TypeError, ValueError):
        return None
    if pid <= 0:
        return None
    when = create_time(pid)
    if when is None or abs(when - recorded) > _SAME_START:
        return None
    try:
        fields = _proc_stat(pid)
    except OSError:
        import psutil

        try:
            return pid, psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return None
    return None if fields is None else (pid, fields[0] == b"Z")


def is_alive(ident: ProcessIdentity) -> bool:
    """True when the process named by ``ident`` still runs (a zombie counts as dead)."""
    same = _same(ident)
    return same is not None and not same[1]


def first_gone(idents: Sequence[ProcessIdentity]) -> ProcessIdentity | None:
    """The first of ``idents`` that no longer runs, or None while they all do."""
    return next((ident for ident in idents if not is_alive(ident)), None)


def when_gone(idents: Sequence[ProcessIdentity], then: Callable[[ProcessIdentity], object]) -> None:
    """Call ``then(ident)`` once, from a daemon thread, when the first of ``idents`` (the
    processes a job is bound to: ``--parent-pid``) no longer runs. A process killed outright
    tells nobody: its end is looked for twice a second."""
    if not idents:
        return
    import threading

    def watch() -> None:
        while (gone := first_gone(idents)) is None:
            time.sleep(0.5)
        then(gone)

    threading.Thread(target=watch, name="subagents-watch", daemon=True).start()


def which(name: str, path: str | None = None) -> str | None:
    """What ``shutil.which(name, path=path)`` finds, on POSIX, without importing shutil (and
    the bz2, lzma and zlib it imports: ~3 ms of every delegation, which looks up its CLI)."""
    if os.path.dirname(name):
        return name if _runnable(name) else None
    if path is None:
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for directory in path.split(os.pathsep):
        if directory not in seen:
            seen.add(directory)
            candidate = os.path.join(directory, name)
            if _runnable(candidate):
                return candidate
    return None


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)


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
    members = _group_members(pgid)
    return members is None or bool(members)


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


def end_recorded_group(child: Mapping[str, object], run_id: str) -> str:
    """SIGKILL what is left of a run's child whose supervisor is gone, as recorded in its
    ``run_started`` event (``pid``, ``createTime``): the one rule for a pid read from a
    record. Its process group is signalled only while its leader is still the recorded
    process (its start time matches; a zombie too); with the leader gone, only the members
    of its group that carry the run's id in their environment (``RUN_ENV``, inherited from
    the child) and started after it. Anything else with that number now is someone else's.
    Returns what was done, for the run's error message."""
    pid = child.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return "its child was never recorded"
    created = child.get("createTime")
    if not isinstance(created, (int, float)) or isinstance(created, bool):
        return f"its child (pid {pid}) was not signalled: its start time was not recorded"
    if _same({"pid": pid, "createTime": float(created)}) is not None:
        killpg(pid, signal.SIGKILL)
        return f"its child (pid {pid}) was killed"
    killed = []
    for member in _group_members(pid) or []:
        when = create_time(member)
        if when is None or when < created - _SAME_START:
            continue
        if _carries(member, f"{RUN_ENV}={run_id}".encode()) and _kill(member):
            killed.append(member)
    if killed:
        left = ", ".join(map(str, killed))
        return f"its child (pid {pid}) had ended; what it left (pid {left}) was killed"
    return f"its child (pid {pid}) had already ended"


def _group_members(pgid: int) -> list[int] | None:
    """The processes of group ``pgid`` that are not zombies; None without a procfs."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            fields = _proc_stat(int(name))
            if fields is not None and fields[0] != b"Z" and int(fields[2]) == pgid:
                found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _carries(pid: int, entry: bytes) -> bool:
    """Whether process ``pid`` started with ``entry`` (``NAME=value``) in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:
        return False


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True
