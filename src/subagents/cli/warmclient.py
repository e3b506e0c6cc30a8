"""The client of the warm command server (cli/warmserver.py): a ``run`` or ``continue``
handed to an already-imported process instead of paying this interpreter's imports.

A warm server is a process that has imported what those commands need and waits on a Unix
socket in a private per-user directory. The command line, the whole environment, the
working directory, the umask and the standard streams (fds 0, 1, 2, passed as they are) go
to it; it forks a worker that becomes this command (cli/warmserver.py says how), and this
process only waits: it forwards the stop signals it gets to the worker, and ends as the
worker ended (its exit code, or killed by the same signal). Killed itself, the worker is
killed too, as this process's own death would have ended the command.

Taken only when nothing can tell the difference: none of fds 0-2 is a terminal (a person at
one runs in-process: job control stays simple), the platform can pass fds and has pidfds
(Linux), ``SUBAGENTS_WARM`` is not ``0``, the process is not sandboxed (no_new_privs or
seccomp: its sandbox must bind the run too), and the server's interpreter, package, start-up
settings and process attributes (cgroup, namespaces, CPU set, nice, limits, groups) are this
process's. Anything else, or anything going wrong before the worker started, and the command
runs in-process as it always did, then starts a server for the next call as it exits.

Standard library C modules only (``_socket``, ``_signal``): this runs before everything.
"""

import _signal  # type: ignore[import-not-found]  # loaded at every start; signal's enums are not
import os
import sys

TYPE_CHECKING = False  # not typing's: this runs before every import
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# The signals forwarded to the worker while it runs (a stop, a hang-up, a user's).
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
PROTOCOL = b"subagents-warm/1"
# The server's answers: the worker's pid (and its pidfd), or why not (then in-process).
STARTED, STALE, REFUSED = b"started", b"stale", b"refused"
# The end: b"exit N" or b"signal N".
HEADER = 10  # the request's length, in decimal digits, before it
GO = b"go\n"  # the caller's word that it now waits for the worker (which starts then)
HANDSHAKE_WAIT = 5.0
# Asked instead (no fds): b"pong PID STARTED SERVED" (``subagents doctor``, tests, benchmarks).
PING, PONG = b"ping".ljust(HEADER), b"pong"
# Said when neither the worker nor the server could tell how the command ended.
GONE = b"subagents: the warm server ended before this command did; how it ended is unknown\n"


def wanted(environ: "Mapping[str, str]") -> bool:
    """Whether to hand this command (one a server serves: entry.py) to a warm server."""
    if environ.get("SUBAGENTS_WARM") == "0":
        return False
    if not (hasattr(os, "pidfd_open") and sys.platform == "linux"):
        return False
    return not any(_isatty(fd) for fd in (0, 1, 2)) and not sandboxed()


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _status() -> dict[str, str]:
    try:
        with open("/proc/self/status", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def sandboxed() -> bool:
    """no_new_privs or a seccomp filter: a sandbox (landlock, bubblewrap, a CLI's own) that
    a server started elsewhere would not share; such a command runs in-process."""
    status = _status()
    return status.get("NoNewPrivs", "0").strip() != "0" or status.get("Seccomp", "0").strip() != "0"


def socket_dir(environ: "Mapping[str, str]") -> str | None:
    """The private directory of this user's warm servers, made if missing; None when it
    cannot be trusted (not ours, a link, open to others)."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    uid = os.getuid()
    where = f"{runtime}/subagents" if runtime else f"/tmp/subagents-{uid}"
    try:
        os.mkdir(where, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(where)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        return None
    return where


def _loaded_package() -> str:
    package = sys.modules.get("subagents")
    return str(getattr(package, "__file__", None) or "")


def key(path: list[str] | None = None) -> bytes:
    """What makes two interpreters the same for a command: the executable, the subagents
    package loaded, the import path (``path``; default: ours but its first entry, the
    script's dir or the cwd, sent apart) and the start-up settings read from the
    environment (encoding, flags)."""
    env = sorted(
        f"{k}={v}"
        for k, v in os.environ.items()
        if k.startswith("PYTHON") or k in ("LC_ALL", "LC_CTYPE", "LANG")
    )
    parts = [
        sys.executable,
        _loaded_package(),
        repr(sys.path[1:] if path is None else path),
        repr(sys.flags),
    ]
    parts += [repr(sys.warnoptions), repr(sorted(sys._xoptions.items())), *env]
    return os.fsencode("\n".join(parts))


def fingerprint() -> bytes:
    """The process attributes a forked worker keeps from its server, not from the client: a
    command is handed over only when they are the same (else it runs in-process)."""
    import resource

    parts = []
    try:
        with open("/proc/self/cgroup", "rb") as f:
            parts.append(f.read())
    except OSError:
        parts.append(b"?")
    for ns in ("cgroup", "ipc", "mnt", "net", "pid", "user", "uts"):
        try:
            parts.append(b"%d" % os.stat(f"/proc/self/ns/{ns}").st_ino)
        except OSError:
            parts.append(b"?")
    parts.append(repr(sorted(os.sched_getaffinity(0))).encode())
    parts.append(b"%d" % os.getpriority(os.PRIO_PROCESS, 0))
    parts.append(repr((os.getuid(), os.geteuid(), os.getgid(), os.getegid())).encode())
    parts.append(repr(sorted(os.getgroups())).encode())
    limits = [getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_")]
    parts.append(repr([resource.getrlimit(n) for n in sorted(limits)]).encode())
    return b"\n".join(parts)


def socket_name(environ: "Mapping[str, str]", path: list[str] | None = None) -> str | None:
    """This interpreter's server's socket (``path``: its import path, as for ``key``)."""
    where = socket_dir(environ)
    if where is None:
        return None
    # FNV-1a over the key: the name only keeps different interpreters apart (the server
    # compares the whole key); hashlib's import would cost more than this.
    h = 0xCBF29CE484222325
    for byte in key(path):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    name = f"{where}/warm-{h:016x}.sock"
    return name if len(os.fsencode(name)) < 108 else None  # sockaddr_un's limit


def _ignored() -> list[int]:
    """The signals this process was started with ignored (SIG_IGN): a fresh interpreter
    keeps them so, and so does the worker (and what it starts)."""

    out = []
    for n in range(1, _signal.NSIG):
        try:
            if _signal.getsignal(n) == _signal.SIG_IGN and n not in (
                _signal.SIGPIPE,
                _signal.SIGXFSZ,  # Python's own at every start
            ):
                out.append(n)
        except (OSError, ValueError):
            continue
    return out


def request(args: list[str]) -> bytes:
    """What the server needs to become this command (NUL-separated: none of it holds one)."""

    umask = os.umask(0)
    os.umask(umask)
    main = sys.modules.get("__main__")
    package = getattr(main, "__package__", None)
    blocked = _signal.pthread_sigmask(_signal.SIG_BLOCK, [])
    fields = [
        PROTOCOL,
        key(),
        fingerprint(),
        os.getcwdb(),
        os.fsencode(sys.path[0] if sys.path else ""),
        b"-" if package is None else package.encode(),
        b"%d" % umask,
        ",".join(str(n) for n in _ignored()).encode(),
        ",".join(str(int(n)) for n in blocked).encode(),
        os.fsencode(sys.argv[0] if sys.argv else "subagents"),
        b"%d" % len(args),
        *(os.fsencode(a) for a in args),
        *(k + b"=" + v for k, v in os.environb.items()),
    ]
    return b"\0".join(fields)


def _line(data: bytes, recv: "Callable[[int], bytes]") -> tuple[bytes, bytes]:
    """The first line of what the server sent (``data``, then read on), and what follows."""
    while b"\n" not in data:
        chunk = recv(256)
        if not chunk:
            raise ConnectionError("the warm server went away")
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line, rest


def handed_over(args: list[str]) -> bytes | None:
    """Run this command in a warm server's worker and end as it ended (never returns then).
    Otherwise, nothing changed here: why not (``STALE`` or ``None``: no server, start one
    once this command is done; ``REFUSED``: one is there, but not for this process)."""
    import _socket

    path = socket_name(os.environ)
    if path is None:
        return REFUSED
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        # Bounded: a server that does not answer (stopped, wedged) costs this much, once.
        sock.settimeout(HANDSHAKE_WAIT)
        try:
            sock.connect(path)
        except OSError:
            return None
        try:
            body = request(args)
        except OSError:  # the cwd is gone: in-process says so
            return REFUSED
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)]
        sock.sendmsg([b"%0*d" % (HEADER, len(body))], ancillary)
        sock.sendall(body)
        data, ancdata, _flags, _addr = sock.recvmsg(64, _socket.CMSG_SPACE(4))
        received = [
            int.from_bytes(d[:4], sys.byteorder, signed=True)
            for level, kind, d in ancdata
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS and len(d) >= 4
        ]
        try:
            answer, rest = _line(data, sock.recv)
            if answer.startswith(STARTED + b" ") and received:
                # The worker waits for this: once sent, the command is the worker's (never
                # run here too); unsent (a timeout, the server gone), it never runs.
                sock.sendall(GO)
                sock.settimeout(None)
                _follow(sock.recv, received[0], rest)
        finally:
            for fd in received:
                os.close(fd)
        return STALE if answer == STALE else REFUSED
    except OSError:
        return None  # a server that went away, or did not answer in time
    finally:
        sock.close()


def _follow(recv: "Callable[[int], bytes]", pidfd: int, rest: bytes) -> None:
    """The worker runs: forward stop signals to it (through its pidfd: never another process
    that got its pid), then end as it ended."""

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 (contextlib's import is not free here)
            _signal.pidfd_send_signal(pidfd, signum)
        except OSError:
            pass  # it has just ended: its end is on its way

    for name in FORWARDED:
        number = getattr(_signal, name)
        if _signal.getsignal(number) != _signal.SIG_IGN:
            _signal.signal(number, forward)
    import select

    try:
        # Its exit code from the worker itself as it leaves (or from the server, which saw
        # it end); its death by a signal from the server.
        end, _ = _line(rest, recv)
        kind, _, number = end.partition(b" ")
        code = int(number)
    except (OSError, ValueError):
        # The server died under us and then its worker, by a signal: how is known to the
        # worker's parent only. We end with the worker, as a command that failed.
        select.select([pidfd], [], [])  # readable once the worker has exited
        os.write(2, GONE)
        os._exit(1)
    if kind == b"signal":
        select.select([pidfd], [], [])  # (told by the server, once the worker is gone)
        _signal.signal(code, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [code])
        os.kill(os.getpid(), code)
        code = 128 + code  # a signal whose default is not to end a process
    os._exit(code)


def start_server() -> None:
    """A server for the next command, started as this one exits: in its own session, with
    no terminal and no streams of ours (it must not hold a pipe a caller reads to EOF), in
    /, with this interpreter's start-up flags and this environment (its key is ours)."""
    import subprocess

    # -c, not -m: the cwd (sys.path[0]) leaves the import path before anything is imported.
    argv = [
        sys.executable,
        *subprocess._args_from_interpreter_flags(),  # type: ignore[attr-defined]
        "-c",
        "import sys; del sys.path[0]; from subagents.cli.warmserver import main; main()",
    ]
    # Popen's fork and exec, not os.posix_spawn: glibc's leaves its own internal signals
    # (32, 33) ignored in the new process, and every run's child would inherit that.
    try:  # noqa: SIM105
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
    except OSError:
        pass  # no warm server then: commands run in-process


def ping(path: str) -> tuple[int, float, int] | None:
    """The pid of the server serving at ``path``, when it started (epoch) and how many
    commands it has served, or None."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(path)
        sock.sendall(PING)
        answer, _ = _line(b"", sock.recv)
        word, pid, started, served = answer.split(b" ")
        return (int(pid), float(started), int(served)) if word == PONG else None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
