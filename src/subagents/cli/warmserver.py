"""The warm command server: a process that has imported the run path once, and forks a
worker that becomes each ``subagents run`` / ``continue`` handed to it (cli/warmclient.py),
as Mercurial's chg, Gradle's daemon and Bazel's server do for theirs.

Started by a command that found none (as that command exits), in its own session, with no
streams, in /. It holds a lock beside its socket (one server per socket), imports what the
commands need, freezes the heap for the garbage collector (so the forked workers share its
pages), listens, and serves with one thread: its socket and one pidfd per live worker.

A request is taken from this user only (the socket's peer credentials), by a server whose
interpreter and loaded files are the caller's: every loaded module's file is re-checked
(mtime and size) first, when their directories' inotify queue says something there
changed, and one that changed (an upgrade, an edit) gets the answer "stale",
and this server stops taking requests (its workers still end as they would) and exits.

The worker is forked ahead of its request while no command runs (a standby: ``_stand_by``),
with the supervisor its run will need forked ahead by it (launchers/spares.py), and has
rehearsed a command's first steps (``_rehearse``); a request that finds none has one forked
for it. The worker (``_become``): its own process group, the caller's signal dispositions
and mask, cwd, whole environment, umask, streams (fds 0-2, received), ``sys.argv``; then
the very command line an in-process command runs (``entry.in_process``), ending as the
interpreter would (its exit code, atexit handlers, flushed streams). It starts only once
the caller, told its pid, has said it waits for it (then the server says go, on the socket
pair the request, its streams and its connection came by): a caller that gave up first
runs the command itself, so no command ever runs twice, or not at all.

The worker's end (exit code or signal) is sent to the caller; if the caller goes away while
its worker runs (killed), the worker is killed, as the command itself would have been.
The server exits after ``SUBAGENTS_WARM_IDLE`` seconds (default 600) with no request and no
worker, or once its socket file is removed or replaced.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import os
import select
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from subagents.cli import warmclient as wire
from subagents.core import inotify

IDLE = 600.0
LOCK_WAIT = 5.0  # a server that is leaving (stale) releases the lock before its workers end
# How often a server checks that its socket file is still its own (a stat): one whose file
# was removed or replaced leaves within a second, not five, its memory with it.
LOOK_EVERY = 1.0
REQUEST_WAIT = 5.0  # a caller sends its whole request at once, right after connecting
# A standby worker is replaced after this long, well inside its supervisor's MAX_AGE.
STANDBY_AGE = 240.0
# What the run path imports (tests/test_layout.py: RUN_PATH), imported before serving.
WARM_MODULES = (
    "subagents.cli.app",
    "subagents.cli.delegate",
    "subagents.cli.repos",
    "subagents.cli.background",
    "subagents.service",
    "subagents.config",
    "subagents.launchers.process",
    "subagents.launchers.spares",
    "subagents.launchers.local",
    "subagents.runs.launch",
    "subagents.runs.monitor",
    "subagents.runs.handle",
    "subagents.runs.control",
    "subagents.runs.checks",
    "subagents.runs.acpcheck",
    "subagents.runs.approvalcheck",
    "subagents.runs.versions",
    "subagents.jobs.runner",
    "subagents.jobs.orchestrator",
    "subagents.jobs.planning",
    "subagents.jobs.records",
    "subagents.jobs.store",
    "subagents.jobs.budget",
    "subagents.jobs.tasks",
    "subagents.backends.acp",
    "subagents.backends.tools",
    # Each child CLI's, imported by the worker and by the supervisor it forks for a run.
    "subagents.backends.pi",
    "subagents.backends.claude",
    "subagents.backends.codex",
    "subagents.backends.gemini",
    "subagents.backends.opencode",
    "subagents.core.upgrade",
    "subagents.core.tail",
    "subagents.core.waker",
    "subagents.core.controlsock",
    "subagents.lifecycle.sessionlog",
    "subagents.lifecycle.hooks",
    "subagents.present.answer",
    "subagents.present.outcome",
    "subagents.present.roles",
    "subagents.present.progress",
    "subagents.supervisor.result",
    # The supervisor's, for the one a worker forks (launchers/spares.py: _ForkedPopen).
    "subagents.supervisor.main",
    "subagents.supervisor.handover",
    "subagents.supervisor.rehearsal",
    "runpy",
    "subagents.cli.entry",
    "subagents.types",
    # The standard library's, imported as first used on the way.
    "ctypes",
    "difflib",
    "getpass",
    "heapq",
    "importlib.util",
)


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("SUBAGENTS_WARM_IDLE", "") or IDLE))
    except ValueError:
        return IDLE


@dataclass
class Worker:
    pid: int
    pidfd: int
    conn: socket.socket | None  # None once its caller went away


@dataclass
class Standby:
    """A worker forked ahead of the next request, with the supervisor its run will need
    forked ahead too (``_stand_by``): a request then waits for neither fork."""

    pid: int
    pidfd: int
    sock: socket.socket  # the request (with its streams and connection), then the go
    made: float = field(default_factory=time.monotonic)


@dataclass
class Server:
    path: str
    key: bytes
    fingerprint: bytes
    files: list[tuple[str, int, int]]
    listener: socket.socket | None = None
    lock: int | None = None
    inode: int = 0
    workers: dict[int, Worker] = field(default_factory=dict)  # by pidfd
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    last: float = field(default_factory=time.monotonic)
    started: float = field(default_factory=time.time)
    served: int = 0  # workers started
    wake: tuple[int, ...] = ()  # the signal wakeup pipe
    standby: Standby | None = None
    # The loaded files' directories, watched: nothing there since the last look, no file
    # to look at (a tenth of a request's time otherwise: ~200 stat calls).
    watch: inotify.Inotify | None = None

    def changed(self) -> bool:
        """Whether any loaded module's file differs from when it was imported."""
        if self.watch is not None:
            with contextlib.suppress(OSError, ValueError):
                if not self.watch.read(0):
                    return False
        for path, mtime, size in self.files:
            try:
                st = os.stat(path)
            except OSError:
                return True
            if (st.st_mtime_ns, st.st_size) != (mtime, size):
                return True
        return False

    def ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def stop_listening(self) -> None:
        """No more requests: the socket file removed if still ours, the lock released (a new
        server may start while this one's workers end)."""
        if self.listener is not None:
            self.selector.unregister(self.listener)
            if self.ours():
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            self.listener.close()
            self.listener = None
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None
        self.drop_standby()

    def stand_by(self) -> Standby:
        """Fork a worker for the next request, ahead of it (``_stand_by``)."""
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the standby
            try:
                ours.close()
                self.leave()
                _stand_by(theirs)
            finally:
                os._exit(1)  # only if _stand_by itself failed (it exits)
        theirs.close()
        standby = Standby(pid, os.pidfd_open(pid), ours)
        self.selector.register(standby.pidfd, selectors.EVENT_READ, lambda: self.reap(standby))
        return standby

    def drop_standby(self) -> None:
        """The standby leaves (EOF on its socket; its supervisor forked ahead with it); its
        end is reaped as it comes."""
        if self.standby is not None:
            self.standby.sock.close()
            self.standby = None

    def reap(self, standby: Standby) -> None:
        """A standby that ended before a request was handed to it."""
        self.selector.unregister(standby.pidfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(standby.pid, 0)
        os.close(standby.pidfd)
        standby.sock.close()
        if self.standby is standby:
            self.standby = None

    def keep_standby(self) -> None:
        """One standby while listening, none older than a spare may be (launchers/spares.py:
        MAX_AGE): a supervisor forked ahead too long ago is not handed a run. Made once no
        worker runs (a caller's next command comes after its last one ended): its forks
        would take a core from the commands running."""
        if self.listener is None or self.workers:
            return
        if self.standby is not None and time.monotonic() - self.standby.made > STANDBY_AGE:
            self.drop_standby()
        if self.standby is None:
            with contextlib.suppress(OSError):
                self.standby = self.stand_by()

    def serve(self) -> None:
        idle = idle_seconds()
        self.last = time.monotonic()  # idle from when it serves, not from before it listened
        while self.listener is not None or self.workers:
            self.keep_standby()
            if self.listener is not None and not self.workers:
                left = idle - (time.monotonic() - self.last)
                if left <= 0 or not self.ours():
                    self.stop_listening()
                    continue
                timeout: float | None = min(left, LOOK_EVERY)
            else:
                timeout = LOOK_EVERY if self.listener is not None else None
            for key, _ in self.selector.select(timeout):
                key.data()
            if self.listener is not None and not self.ours():
                self.stop_listening()

    def accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        kept = False
        try:
            kept = self.handle(conn)
        except (OSError, ValueError, IndexError):
            pass  # a caller that went away or sent nonsense: it runs in-process
        finally:
            if not kept:
                conn.close()

    def handle(self, conn: socket.socket) -> bool:
        """One request: True when a worker now runs for it (the connection is kept)."""
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        caller, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            return False
        conn.settimeout(REQUEST_WAIT)
        head, fds, _flags, _addr = socket.recv_fds(conn, wire.HEADER, 3)
        try:
            if head == wire.PING and not fds:
                pong = b"%s %d %.3f %d\n" % (wire.PONG, os.getpid(), self.started, self.served)
                conn.sendall(pong)
                return False
            if len(fds) != 3 or not head.isdigit():
                conn.sendall(wire.REFUSED + b"\n")
                return False
            body = _read(conn, int(head))
            fields = body.split(b"\0")
            if fields[0] != wire.PROTOCOL or fields[1] != self.key or fields[2] != self.fingerprint:
                conn.sendall(wire.REFUSED + b"\n")
                return False
            if self.changed():
                conn.sendall(wire.STALE + b"\n")
                self.stop_listening()
                return False
            try:  # a request, and its cwd still there (else in-process says so)
                request = Request.parse(fields)
                os.close(os.open(request.cwd, os.O_RDONLY | os.O_DIRECTORY))
            except (OSError, ValueError, IndexError):
                conn.sendall(wire.REFUSED + b"\n")
                return False
            return self.start(conn, request, body, fds, caller)
        finally:
            for fd in fds:
                os.close(fd)

    def start(
        self, conn: socket.socket, request: Request, body: bytes, fds: list[int], caller: int
    ) -> bool:
        """The standby (one forked now if none was ready) becomes the request's worker."""
        standby, self.standby = self.standby, None
        if standby is None:
            standby = self.stand_by()
        self.selector.unregister(standby.pidfd)
        worker = Worker(standby.pid, standby.pidfd, conn)
        self.workers[worker.pidfd] = worker
        self.selector.register(worker.pidfd, selectors.EVENT_READ, lambda: self.ended(worker))
        try:
            sent = b"%d\0%b" % (caller, body)
            socket.send_fds(
                standby.sock, [b"%0*d" % (wire.HEADER, len(sent))], [conn.fileno(), *fds]
            )
            standby.sock.sendall(sent)
            socket.send_fds(conn, [wire.STARTED + b" %d\n" % worker.pid], [worker.pidfd])
            # Started only once the caller says it waits for it: a caller that gave up
            # (its own timeout) runs the command itself, and it must not run twice.
            if _read(conn, len(wire.GO)) != wire.GO:
                raise ConnectionError("no go from the caller")
            standby.sock.sendall(b"g")
        except OSError:
            worker.conn = None  # the worker reads EOF, exits, and is reaped
            return False
        finally:
            standby.sock.close()
        conn.settimeout(None)
        self.selector.register(conn, selectors.EVENT_READ, lambda: self.caller_gone(worker))
        self.served += 1
        self.last = time.monotonic()  # idle from a command's end; a ping is not a command
        return True

    def stop_on_signals(self) -> None:
        """SIGTERM, SIGINT, SIGHUP: no more requests; the workers running end as they would
        (their callers wait for them), then this process exits."""
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, lambda *_: None)  # woken through the wakeup fd instead

        def woken() -> None:
            with contextlib.suppress(OSError):
                os.read(wake_r, 512)
            self.stop_listening()

        self.wake = (wake_r, wake_w)
        self.selector.register(wake_r, selectors.EVENT_READ, woken)

    def leave(self) -> None:
        """In a worker: nothing of the server's kept open."""
        signal.set_wakeup_fd(-1)
        for fd in self.wake:
            os.close(fd)
        self.selector.close()
        if self.listener is not None:
            self.listener.close()
        if self.lock is not None:
            os.close(self.lock)
        for worker in self.workers.values():
            os.close(worker.pidfd)
            if worker.conn is not None:
                worker.conn.close()
        if self.standby is not None:
            os.close(self.standby.pidfd)
            self.standby.sock.close()
        if self.watch is not None:
            self.watch.close()

    def caller_gone(self, worker: Worker) -> None:
        if worker.conn is None:
            return  # its worker ended in this same round: told, and let go
        with contextlib.suppress(OSError):
            if worker.conn.recv(64):
                return  # nothing is expected; a caller that sends more still waits
        # Killed (it leaves by itself only once its worker has ended, and a pidfd names that
        # process alone, ended or not): its command dies with it.
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(worker.pidfd, signal.SIGKILL)
        self.let_go(worker)

    def ended(self, worker: Worker) -> None:
        _, status = os.waitpid(worker.pid, 0)
        self.selector.unregister(worker.pidfd)
        os.close(worker.pidfd)
        del self.workers[worker.pidfd]
        self.last = time.monotonic()
        if worker.conn is None:
            return
        code = os.waitstatus_to_exitcode(status)
        end = b"signal %d\n" % -code if code < 0 else b"exit %d\n" % code
        with contextlib.suppress(OSError):  # (the worker may have told it first)
            worker.conn.sendall(end)
        self.let_go(worker)

    def let_go(self, worker: Worker) -> None:
        """Done with a worker's caller: its connection closed, heard from no more."""
        assert worker.conn is not None
        self.selector.unregister(worker.conn)
        worker.conn.close()
        worker.conn = None


def _read(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the caller went away mid-request")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _stdio(fd: int, like: io.TextIOWrapper) -> io.TextIOWrapper:
    """A text stream on ``fd`` as a fresh interpreter makes it (this one's own streams were
    made by the same interpreter, start-up settings and kind of file: not a terminal)."""
    mode = "rb" if fd == 0 else "wb"
    raw = io.FileIO(fd, mode, closefd=False)
    buffer: Any = raw  # unbuffered, as with -u
    if fd == 0:
        buffer = io.BufferedReader(raw)
    elif not like.write_through:
        buffer = io.BufferedWriter(raw)
    stream = io.TextIOWrapper(
        buffer,
        encoding=like.encoding,
        errors=like.errors,
        newline="\n",
        line_buffering=like.line_buffering,
        write_through=like.write_through,
    )
    stream.mode = "r" if fd == 0 else "w"  # type: ignore[misc]
    return stream


@dataclass
class Request:
    """What a caller sent (warmclient.request), read and checked before any fork."""

    cwd: bytes
    path0: str
    package: str | None
    umask: int
    ignored: list[int]
    blocked: list[int]
    argv: list[str]
    environ: dict[bytes, bytes]

    @classmethod
    def parse(cls, fields: list[bytes]) -> Request:
        """ValueError or IndexError for a request that is not one."""
        cwd, path0, package, umask, ignored, blocked, argv0, argc = fields[3:11]
        count = int(argc)
        if len(fields) < 11 + count:
            raise ValueError("a short request")
        return cls(
            cwd,
            os.fsdecode(path0),
            None if package == b"-" else package.decode(),
            int(umask),
            [int(n) for n in ignored.split(b",") if n],
            [int(n) for n in blocked.split(b",") if n],
            [os.fsdecode(a) for a in (argv0, *fields[11 : 11 + count])],
            dict(item.split(b"=", 1) for item in fields[11 + count :] if b"=" in item),
        )


def _stand_by(sock: socket.socket) -> None:
    """In a standby worker: fork the supervisor a run will need, before the command is
    known (it takes the command's state once it is: ``Spare.adopt``); wait for a request (its
    caller's pid and request, its connection and streams) and for the go; then become the
    command. EOF or anything else first, and it exits (its supervisor with it: EOF)."""
    from subagents.launchers import start_spare_early

    start_spare_early(fork=True, ahead=True)
    if not select.select([sock], [], [], 0)[0]:  # (one forked for a request waiting: none)
        _rehearse()
    try:
        head, fds, _flags, _addr = socket.recv_fds(sock, wire.HEADER, 4)
        if len(fds) != 4 or not head.isdigit():
            os._exit(0)
        caller, body = _read(sock, int(head)).split(b"\0", 1)
        request = Request.parse(body.split(b"\0"))
        conn = socket.socket(fileno=fds[0])
        if sock.recv(1) != b"g":  # the caller runs the command itself
            os._exit(0)
    except (OSError, ValueError, IndexError):
        os._exit(0)
    sock.close()
    _become(request, fds[1:], conn, int(caller))


def _rehearse() -> None:
    """In a standby worker: what every command does first, once ahead and nothing acted
    on (click's parse of a ``run``, a thread, a one-task job planned and checked and its
    CLI's version read, in the server's own environment): the pages it touches become this
    process's own and its caches are made before the command comes, not while it waits (a
    fork's first parse costs several times its second: ~4 ms of each command in all)."""
    import threading

    from subagents.cli import app
    from subagents.cli.entry import WARM_COMMANDS
    from subagents.supervisor import handover

    with contextlib.suppress(Exception):
        for name in WARM_COMMANDS:
            group = app.main.make_context("subagents", [name, "-q", "x"])
            command = app.main.get_command(group, name)
            if command is not None:
                command.make_context(name, ["-q", "x"], parent=group)
    with contextlib.suppress(Exception):  # (what its spare will be sent: handover.py)
        handover.state_message()
    # A thread started and ended: the C library keeps its stack for the next (a fork's first
    # thread costs ~0.5 ms more than its second).
    thread = threading.Thread(target=int, name="subagents-rehearsal")
    thread.start()
    thread.join()
    with contextlib.suppress(Exception):  # a job planned and checked: nothing recorded
        from pathlib import Path

        from subagents import service

        service.rehearse_delegation(Path(os.getcwd()), os.environ)


def _become(request: Request, fds: list[int], conn: socket.socket, caller: int) -> None:
    """In the worker: become the caller's command, run it, and exit as it ended (told to
    the caller on ``conn`` too: it hears its exit code even if this server dies meanwhile).
    The caller (its pid: ``caller``) is the command's process as its user knows it."""
    os.setpgid(0, 0)
    from subagents.core import procs

    procs.set_command_pid(caller)
    # Signals as a fresh interpreter started by the caller has them.
    for name in (*wire.FORWARDED, "SIGCHLD"):
        number = getattr(signal, name)
        handler = signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL
        signal.signal(number, handler)
    for n in request.ignored:
        with contextlib.suppress(OSError, ValueError):  # one this platform keeps as it is
            signal.signal(n, signal.SIG_IGN)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_SETMASK, request.blocked)
    os.umask(request.umask)
    os.chdir(request.cwd)
    os.environb.clear()
    os.environb.update(request.environ)
    time.tzset()
    _forget_click()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    streams = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    made = [_stdio(fd, like) for fd, like in enumerate(streams)]  # type: ignore[arg-type]
    sys.stdin, sys.stdout, sys.stderr = made
    # What the interpreter made them at its start, as in a fresh one (typeshed: Final).
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc]
    sys.argv = request.argv
    if sys.path:
        sys.path[0] = request.path0
    # click names the program from __main__'s package and argv[0]: the caller's, not ours.
    sys.modules["__main__"].__package__ = request.package

    def tell(code: int) -> None:
        # Everything is written and flushed: the caller's streams are let go (/dev/null in
        # their place, so that no thread left writes into a file opened meanwhile), then the
        # caller is told and ends at once, its caller's reads of our output ended too; this
        # process's own teardown (unmapping its heap: a few ms) goes on by itself.
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
        with contextlib.suppress(OSError):
            conn.sendall(b"exit %d\n" % code)

    from subagents.cli import app

    app.TELL_EXIT.append(tell)  # a command leaving by exit_now
    code = _run()
    tell(code)
    os._exit(code)


def _run() -> int:
    """The command, and its end as the interpreter makes it: the exit code of SystemExit (a
    message printed), a traceback and 1, or death by SIGINT for an uncaught KeyboardInterrupt."""
    from subagents.cli.entry import in_process

    code, interrupted = 0, False
    try:
        in_process(start_server=False, warm=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code, interrupted = 1, isinstance(exc, KeyboardInterrupt)
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()  # the interpreter's own at exit
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as the interpreter exits when its streams cannot be flushed
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _lock(path: str) -> int | None:
    """This socket's lock, held while serving; None if another server holds it still."""
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


# What gettext reads to choose a language (the help options' text, made ahead by _click_made).
LOCALE_VARS = (b"LANGUAGE", b"LC_ALL", b"LC_MESSAGES", b"LANG")
# The locale the help options were made in; None: none made ahead.
_made_in: tuple[bytes | None, ...] | None = None


def _click_made() -> None:
    """What click makes at a command's first parse and keeps on the command, made here once
    for the commands served, not in every worker (~5 ms of each): each one's help option,
    whose text comes from gettext (a dozen stat calls). Only with a click that keeps it
    where a worker whose caller's locale differs can drop it (``_forget_click``)."""
    global _made_in
    import click

    from subagents.cli import app
    from subagents.cli.entry import WARM_COMMANDS

    if not hasattr(app.main, "_help_option"):
        return
    _made_in = tuple(os.environb.get(name) for name in LOCALE_VARS)
    group = click.Context(app.main, info_name="subagents", **app.main.context_settings)
    app.main.get_help_option(group)
    for name in WARM_COMMANDS:
        command = app.main.get_command(group, name)
        if command is not None:
            command.get_help_option(click.Context(command, info_name=name, parent=group))


def _forget_click() -> None:
    """In a worker: the help options made ahead dropped (made again as in-process, in its
    caller's locale) when that locale is not the one they were made in."""
    if _made_in is None or _made_in == tuple(os.environb.get(n) for n in LOCALE_VARS):
        return
    from subagents.cli import app

    for command in (app.main, *app.main.commands.values()):
        command._help_option = None


# What changes a loaded file (or its directory entry) as ``Server.changed`` compares it.
_CHANGES = (
    inotify.MODIFY
    | inotify.ATTRIB
    | inotify.CLOSE_WRITE
    | inotify.MOVED_FROM
    | inotify.MOVED_TO
    | inotify.CREATE
    | inotify.DELETE
    | inotify.DELETE_SELF
    | inotify.MOVE_SELF
)


def _watch(files: list[tuple[str, int, int]]) -> inotify.Inotify | None:
    """The directories of ``files`` watched for changes (made before their files are read:
    a change from then on is seen); None where that cannot be (every look reads them all)."""
    try:
        watch = inotify.Inotify()
    except OSError:
        return None
    try:
        for directory in sorted({os.path.dirname(path) for path, _, _ in files}):
            watch.add_watch(directory, _CHANGES)
    except OSError:
        watch.close()
        return None
    return watch


def _loaded() -> list[tuple[str, int, int]]:
    """The file of every loaded module, as it is now (path, mtime, size)."""
    files = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            with contextlib.suppress(OSError):
                st = os.stat(path)
                files.append((path, st.st_mtime_ns, st.st_size))
    return files


def _warm() -> None:
    """Import the run path."""
    for name in WARM_MODULES:
        __import__(name)
    with contextlib.suppress(Exception):  # (never a reason not to serve)
        _click_made()
    # First-use costs that depend on nothing of a caller's: the C library's handle (inotify).
    # and the boot time (a process's identity: its start time).
    from subagents.core import inotify, procs

    with contextlib.suppress(OSError, AttributeError):
        inotify._c_library()
    with contextlib.suppress(OSError, ValueError, StopIteration):
        procs._boot_time()
    # (and this uid's login, where no LOGNAME or USER says it: the password database's)
    from subagents.lifecycle import sessionlog

    sessionlog.passwd_name(os.getuid())
    # orjson for the records' JSON (core.files: _dump_json), ~1 ms once the rest is imported.
    from subagents.core import files

    with contextlib.suppress(ImportError):
        files.orjson_module()


def main() -> None:
    os.chdir("/")
    path = wire.socket_name(os.environ, sys.path)
    if path is None:
        return
    lock = _lock(path)
    if lock is None:
        return  # another server is serving here
    _warm()
    watch = _watch(_loaded())
    server = Server(path, wire.key(sys.path), wire.fingerprint(), _loaded(), lock=lock)
    server.watch = watch
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # one left by a server that was killed (the lock says none serves)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    server.listener = listener
    server.inode = os.stat(path).st_ino
    server.selector.register(listener, selectors.EVENT_READ, server.accept)
    server.stop_on_signals()
    gc.collect()
    gc.freeze()  # the workers share these pages: no collection touches them
    server.serve()


if __name__ == "__main__":
    main()
