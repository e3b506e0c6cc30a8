"""The supervisor: one process per run that owns the child agent.

It spawns the CLI in its own process group (stdin at /dev/null, or held by the supervisor
for a live run), mirrors stdout to ``raw.jsonl``, normalizes it to ``events.jsonl`` and
``transcript.md``, decides completion from the stream (never from the exit code alone) and
writes ``result.json`` last, once, atomically.

Run as ``python -m subagents.supervisor RUN_DIR`` (``__main__.py``). It imports only the standard
library and the small modules it needs, so it starts fast and stays small.

Beside it: ``child`` spawns the child, ``lines`` cuts its stdout into lines, ``recorder``
writes the artifacts, ``outcome`` decides how a run ended, ``phase`` keeps the run's phase,
its deadlines and the watchdog's state, ``live`` handles messages sent to the run and its
budget (with ``control``, the endpoint, and ``stdin``, the child's input), ``core.procs``
signals process groups. What stays here is the event loop that drives the phases: spawn,
read, arm and disarm completion, deadlines, signals, cleanup, finish.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from subagents.backends import Fed, Normalizer, get_backend
from subagents.core import events as ev
from subagents.core.childtext import parse_line, parse_line_fast
from subagents.core.files import dumps_fast, read_tail
from subagents.core.procs import (
    STOP_SIGNALS,
    create_time,
    first_gone,
    group_alive,
    killpg,
    signal_name,
    stop_group,
    when_gone,
)
from subagents.supervisor.child import environment, spawn
from subagents.supervisor.lines import READ_SIZE, Lines, read_ready
from subagents.supervisor.live import Live
from subagents.supervisor.outcome import Ended, decide, with_write_error
from subagents.supervisor.phase import DRAIN_AFTER_EXIT, Deadlines, Phase
from subagents.supervisor.recorder import Recorder
from subagents.supervisor.result import (
    STDERR_TAIL_BYTES,
    attach_diagnostics,
    build_result,
    finish_worktree,
    finishing,
    publish_result,
)
from subagents.supervisor.spec import RunSpec

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.supervisor.phase import Action, StopCause
    from subagents.types import JsonValue, ProcessIdentity, RunResult, Usage


# With no pidfd (not Linux), how often to look for the child's exit.
POLL_EXIT = 0.05
# After asking a live child to abort (a budget), how long its CLI has to end the turn itself.
ABORT_WITHIN = 10.0
MAX_NOISE_NOTICES = 20
# From this many parsed lines on, JSON goes through orjson: its import (~15 ms) is more
# than a short run's lines cost through json, a tenth of what a long run's do.
FAST_JSON_AFTER = 300
# And from the first line this long: json would cost it more than the import (~3 ns a byte
# more, to read it and write its event), and twice the memory (a str of it, then its bytes).
FAST_JSON_LINE = 4 << 20


class Supervisor:
    def __init__(
        self,
        run_dir: Path,
        spec: RunSpec,
        echo: Callable[[str], None] | None = None,
        early_signals: list[int] | None = None,
    ) -> None:
        self.run_dir = run_dir
        # Stop requests that came while the process was still starting (see __main__.py).
        self.early_signals = early_signals if early_signals is not None else []
        self.spec = spec
        self.echo = echo
        self.started_at = time.time()
        self.t0 = time.monotonic()
        self.norm: Normalizer | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.out_fd = -1  # the read end of the child's stdout
        self.pgid = 0
        # Where the run is (and why it stops), and every point in time it acts at.
        self.phase = Phase()
        self.deadlines = Deadlines(self.t0, spec.timeout, spec.stallTimeout, spec.toolTimeout)
        self.watch = self.deadlines.watch  # (read on every event: one lookup, not two)
        self.forced_cleanup = False
        self.abort_signal: str | None = None
        self.abort_why: str | None = None  # a stop not asked for by a signal's sender
        self.noise_lines = 0
        self.parsed = 0
        self._parse: Callable[[bytes | bytearray], JsonValue] = parse_line
        self.heard_at = self.t0  # when stdout last said anything (the time of the read)
        self.lines = Lines(lambda *_: True, self.handle_line)
        self.chunk = bytearray(READ_SIZE)
        self.eof = False
        self.rec = Recorder(run_dir)
        self.backend = get_backend(spec.backend)
        self.live = Live(self, self.backend)
        self.sel: selectors.BaseSelector = selectors.DefaultSelector()
        # What the run's earlier children did (a follow-up continued in a new process):
        # turns, usage and tool calls, added to the current one's.
        self.carry: tuple[int, Usage, int] | None = None
        self._echo_fmt: ProgressFormatter | None = None
        if echo is not None:
            from subagents.present.progress import ProgressFormatter

            self._echo_fmt = ProgressFormatter()

    # ---- artifacts -------------------------------------------------------

    def emit(self, event: ev.Event) -> None:
        """Record an event of the supervisor's own (a notice, the start, the end), stamped now."""
        self.rec.stamp()
        self.record(event)

    def record(self, event: ev.Event) -> None:
        """Record an event under the current stamp (for the stream's, the time of the read)."""
        if event["type"] == "tool_call":
            self.watch.tool_started(event["toolCallId"], self.heard_at)
        elif event["type"] == "tool_result":
            self.watch.tool_ended(event["toolCallId"])
        elif event["type"] == "usage":
            turns = self.norm.turns if self.norm is not None else 0
            if self.carry is not None:  # the run's totals, not this child's alone
                ev.add_usage(event, self.carry[1])
                turns += self.carry[0]
            event["turns"] = turns
        self.rec.record(event)
        if self.echo is not None and self._echo_fmt is not None:
            line = self._echo_fmt.line(event)
            if line:
                self.echo(line)

    def flush(self) -> None:
        self.rec.flush()

    # ---- stream ----------------------------------------------------------

    def handle_line(self, line: bytearray) -> None:
        """One whole line (no newline), which ``norm.wants``. The caller holds no other
        reference to it, so the line's bytes are freed as soon as it is parsed."""
        norm = self.norm
        assert norm is not None
        self.parsed += 1
        if self._parse is parse_line and (
            self.parsed == FAST_JSON_AFTER or len(line) >= FAST_JSON_LINE
        ):
            self._parse = parse_line_fast
            self.rec.dumps = dumps_fast
        try:
            # Invalid UTF-8 and lone surrogates become U+FFFD here, before anything is
            # written: the line (and the answer in it) survives, and no write can fail on it.
            obj = self._parse(line)
        except ValueError:
            obj = None
        if type(obj) is not dict:
            self.noise_lines += 1
            if line.strip() and self.noise_lines <= MAX_NOISE_NOTICES:
                preview = line[:200].decode("utf-8", "replace")
                self.record(
                    ev.notice("warn", f"non-JSON line on stdout ({len(line)} bytes): {preview}")
                )
            return
        del line  # parsed: what follows holds the value, not the line's bytes too
        try:
            fed = norm.feed(obj)
        except Exception as exc:  # a normalizer bug must not lose the run
            fed = Fed(
                [ev.notice("warn", f"could not normalize a {obj.get('type')!r} line: {exc!r}")]
            )
        for event in fed:
            self.record(event)
        phase = self.phase
        was_terminal = phase.terminal
        terminal = was_terminal if fed.terminal is None else fed.terminal
        if self.live.active or fed.writes or fed.receipts or fed.asks:
            self.on_action(self.live.after_line(fed, terminal))
        if terminal and not was_terminal:
            self.at_rest()
        elif was_terminal and not terminal:
            self.go_on()

    def handle_skipped(self, tail: bytes) -> None:
        """The end of a line the normalizer skips unparsed, which may still change the end."""
        norm = self.norm
        assert norm is not None
        fed = norm.skipped(tail)
        if fed is not None and fed.terminal is False and self.phase.terminal:
            self.go_on()

    def on_data(self, n: int) -> None:
        """The first ``n`` bytes of ``self.chunk`` were just read."""
        now = time.monotonic()
        self.heard_at = now
        self.watch.heard(now)
        self.rec.stamp()
        with memoryview(self.chunk) as view, view[:n] as data:
            self.rec.raw(data)
        self.lines.feed(self.chunk, n)

    def end_of_stream(self) -> None:
        self.rec.stamp()
        self.lines.end()
        if self.norm is not None:
            for event in self.norm.finish():
                self.record(event)

    # ---- completion ------------------------------------------------------

    def at_rest(self) -> None:
        """The child ended its turn: the run goes on (a follow-up), or completion is armed."""
        self.phase.rest()
        if self.spec.live:
            self.deadlines.abort = None  # a child asked to abort ended its turn: it did
        if self.live.at_rest(self.phase.stopped) == "go on":
            self.go_on()
        else:
            self.arm()

    def go_on(self) -> None:
        """The child's turn goes on (or a new one started): completion is disarmed."""
        self.phase.go_on()
        self.deadlines.grace = None

    def totals(self) -> tuple[int, Usage]:
        """The run's model turns and usage so far (all its children's)."""
        norm = self.norm
        assert norm is not None
        if self.carry is None:
            return norm.turns, norm.usage
        turns, usage, _ = self.carry
        return turns + norm.turns, ev.add_usage(usage.copy(), norm.usage)

    def stop_for_limit(self) -> None:
        """A budget ran out: the run ends as stopped by it (a live child is asked to end its
        turn, and stopped if it has not within the kill grace and ``ABORT_WITHIN``; any
        other is stopped now)."""
        self.phase.stop_for("limit")
        if not self.spec.live:
            self.terminate_group("limit")
            return
        norm = self.norm
        assert norm is not None
        self.live.take(norm.abort())
        self.deadlines.abort = time.monotonic() + self.spec.killGrace + ABORT_WITHIN

    def arm(self) -> None:
        """Completion: the child has the grace to exit (a run already stopping or draining
        has its own deadlines)."""
        if self.phase.name == "at_rest":
            self.phase.to("grace")
            self.deadlines.grace = time.monotonic() + self.spec.grace

    def child_alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def terminate_group(self, cause: StopCause | None) -> None:
        """SIGTERM the child's group now, SIGKILL after the kill grace: procs.stop_group's
        sequence, kept as deadlines of the event loop, which reads the child meanwhile.
        ``cause``: why (None: a cleanup after the answer)."""
        if cause is not None:
            self.phase.stop_for(cause)
        deadlines = self.deadlines
        if deadlines.kill is None:
            killpg(self.pgid, signal.SIGTERM)
            deadlines.kill = time.monotonic() + self.spec.killGrace
            self.phase.signalled()
        deadlines.grace = None

    def on_deadlines(self, now: float) -> None:
        self.live.on_deadlines(now)
        deadlines = self.deadlines
        if deadlines.passed(deadlines.abort, now):
            deadlines.abort = None
            self.terminate_group("limit")  # the CLI did not end the turn: stop it
        if not self.child_alive():
            return
        if deadlines.passed(deadlines.handshake, now):
            deadlines.handshake = None
            self.handshake_overdue()
        if deadlines.passed(deadlines.grace, now):
            self.forced_cleanup = True
            self.terminate_group(None)
        if deadlines.passed(deadlines.timeout, now) and deadlines.kill is None:
            self.emit(ev.stopping(f"timed out after {self.spec.timeout:g}s"))
            self.terminate_group("timeout")
        if deadlines.kill is None and deadlines.grace is None:
            self.watchdog(now)
        if deadlines.passed(deadlines.kill, now):
            killpg(self.pgid, signal.SIGKILL)
            deadlines.kill = now + 3600  # sent; nothing more to escalate to

    def handshake_overdue(self) -> None:
        """The child has not answered its handshake in time: the normalizer's failure is
        the run's outcome (a terminal line), and the child is stopped without waiting."""
        norm = self.norm
        assert norm is not None
        fed = norm.handshake_overdue()
        if fed is None:
            return
        self.rec.stamp()
        for event in fed:
            self.record(event)
        if not self.phase.terminal:
            self.at_rest()
        self.terminate_group(None)

    def on_action(self, action: Action | None) -> None:
        """What live control asked for (a message, a budget, a request at the endpoint)."""
        if action == "limit":
            self.stop_for_limit()

    def watchdog(self, now: float) -> None:
        """A stall is a notice, or the end by policy; a tool call past its timeout is the end."""
        due = self.watch.due(now)
        if due == "tool_timeout":
            limit = self.spec.toolTimeout
            self.emit(ev.stopping(f"a tool call ran longer than {limit:g} s"))
            self.terminate_group("tool_timeout")
        elif due == "stalled":
            idle = now - self.watch.active_at
            self.emit(ev.stalled(time.time() - idle, idle))
            self.flush()
            if self.spec.onStall == "abort":
                self.terminate_group("stalled")

    def on_signal(self, signum: int) -> None:
        if self.abort_signal is not None:
            killpg(self.pgid, signal.SIGKILL)  # asked twice: no more patience
            return
        self.abort_signal = signal_name(signum)
        if self.abort_why is None and (gone := first_gone(self.spec.watch)) is not None:
            self.process_gone(gone, signal_self=False)  # what the stop was for, whoever sent it
        what = self.abort_why or f"supervisor received {self.abort_signal}"
        self.emit(ev.stopping(what))
        if self.child_alive():
            self.terminate_group("aborted")
        else:
            self.phase.stop_for("aborted")

    def next_wakeup(self, now: float) -> float | None:
        poll = now + POLL_EXIT if self.child_alive() and not self._have_pidfd else None
        return self.deadlines.next_wakeup(now, self.live.next_deadline(), poll)

    # ---- main loop -------------------------------------------------------

    def spawn(self, argv: list[str]) -> str | None:
        """Start the child; return an error message when it could not start."""
        child = spawn(self.spec, argv, environment(self.run_dir, self.spec))
        if isinstance(child, str):
            return child
        self.proc = child.proc
        self.out_fd = child.out_fd
        self.pgid = child.proc.pid
        self.rec.open()  # the run's files: made once its first child is on its way
        self.norm = self.backend.live_normalizer() if self.spec.live else self.backend.normalizer()
        self.lines = Lines(self.norm.wants, self.handle_line, self.handle_skipped)
        if child.stdin_fd >= 0:
            self.live.started(child.stdin_fd, self.sel)
            if self.norm.handshake_timeout:  # (ACP's initialize)
                self.deadlines.handshake = time.monotonic() + self.norm.handshake_timeout
        return None

    def run(self) -> RunResult:
        # (a stand-in until the child is spawned: finish() reads it)
        self.norm = self.backend.normalizer()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous_wakeup = signal.set_wakeup_fd(wake_w)
        for s in STOP_SIGNALS:
            signal.signal(s, lambda *_: None)  # the wakeup fd carries the signal number
        try:
            # A process the run is bound to that is already gone stops it before it starts;
            # one that goes later stops it as `subagents stop` would (SIGTERM, here).
            if (gone := first_gone(self.spec.watch)) is not None:
                self.process_gone(gone, signal_self=False)
                self.early_signals.append(signal.SIGTERM)
            else:
                when_gone(self.spec.watch, self.process_gone)
            if self.early_signals:  # asked to stop before the child was even spawned
                self.rec.open()
                self.on_signal(self.early_signals[0])
                return self.finish()
            spawn_error = self.spawn(self.spec.argv)
            if spawn_error is not None:
                self.rec.open()
                self.emit(ev.error(spawn_error, fatal=True))
                return self.finish(spawn_error=spawn_error)
            self.phase.to("running")
            self.started()
            # After the spawn, not before: the child starts without waiting for it.
            self.live.listen(self.sel)
            self.sel.register(wake_r, selectors.EVENT_READ, "signal")
            while True:
                self.loop(wake_r)
                if not self.continued():
                    break
            return self.finish()
        finally:
            signal.set_wakeup_fd(previous_wakeup)
            for fd in (wake_r, wake_w):
                os.close(fd)
            self.sel.close()

    def started(self) -> None:
        assert self.proc is not None
        spec = self.spec
        self.emit(
            ev.run_started(
                spec.backend,
                spec.agent,
                spec.requestedModel,
                spec.cwd,
                self.proc.pid,
                create_time(self.proc.pid),
            )
        )
        self.flush()

    def continued(self) -> bool:
        """The child exited after its answer with a follow-up waiting, and takes no input
        while it runs: the follow-up continues the conversation in a new child of this run
        (the backend's resume, as ``continue`` does). False: the run ends."""
        norm = self.norm
        assert norm is not None and self.proc is not None
        if self.phase.stopped or self.abort_signal is not None:
            return False
        follow = self.live.continuation(self.phase.terminal)
        if follow is None:
            return False
        mid, text = follow
        resume = self.backend.resume_point(str(self.run_dir), {"sessionId": norm.session_id})
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        self.cleanup_group()
        turns, usage = self.totals()
        self.carry = (turns, usage, (self.carry[2] if self.carry else 0) + norm.tool_calls)
        argv = self.backend.build_argv(self.spec.argv[0], self.live.request(text, resume))
        self.eof = False
        self.deadlines.new_child()
        self.emit(ev.notice("info", f"continuing the conversation with follow-up {mid}"))
        error = self.spawn(argv)
        if error is not None:
            self.live.receipt(mid, "refused", error)
            self.emit(ev.error(error, fatal=True))
            return False
        self.live.receipt(mid, "delivered")
        self.phase.to("running")
        self.phase.terminal = False  # a new child: its own turn has not ended
        self.started()
        return True

    def process_gone(self, ident: ProcessIdentity, signal_self: bool = True) -> None:
        """A process the run is bound to ended (``watch``: the caller's ``--parent-pid``)."""
        self.abort_why = f"process {ident['pid']}, which the run was bound to, ended"
        if signal_self:
            os.kill(os.getpid(), signal.SIGTERM)

    _have_pidfd = False

    def loop(self, wake_r: int) -> None:
        """Read the current child until it is gone and its output is drained."""
        assert self.proc is not None
        out_fd = self.out_fd
        os.set_blocking(out_fd, False)
        sel = self.sel
        sel.register(out_fd, selectors.EVENT_READ, "out")
        assert self.proc.stderr is not None
        err_fd = self.proc.stderr.fileno()
        os.set_blocking(err_fd, False)
        sel.register(err_fd, selectors.EVENT_READ, "err")
        pidfd = -1
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(self.proc.pid)
                sel.register(pidfd, selectors.EVENT_READ, "exit")
                self._have_pidfd = True
        deadlines = self.deadlines
        try:
            while True:
                now = time.monotonic()
                self.on_deadlines(now)
                if not self.child_alive():
                    self.phase.exited()
                    if self.eof:
                        break
                    if deadlines.drain is None:
                        deadlines.drain = now + DRAIN_AFTER_EXIT
                    elif now >= deadlines.drain:
                        break
                for key, _ in sel.select(self.next_wakeup(now)):
                    if key.data == "out":
                        self.read_out(out_fd, sel)
                    elif key.data == "err":
                        self.read_err(err_fd, sel)
                    elif key.data == "exit":
                        sel.unregister(pidfd)
                        self.proc.poll()
                    elif key.data == "signal":
                        self.read_signals(wake_r)
                    elif key.data is self.live.writer:  # the child's stdin has room
                        self.live.writer.on_writable()
                    elif self.live.server is not None:  # a connection, or a request on one
                        self.on_action(self.live.on_ready(key.fileobj))
                if not self._have_pidfd:
                    self.proc.poll()
        finally:
            self.read_err(err_fd, None)  # what is already in the pipe; never wait for more
            for fd in (out_fd, err_fd, pidfd):
                with contextlib.suppress(KeyError, ValueError):
                    sel.unregister(fd)
            os.close(out_fd)
            self.out_fd = -1
            if pidfd >= 0:
                os.close(pidfd)
            self._have_pidfd = False
            self.end_of_stream()
            self.flush()

    def read_out(self, fd: int, sel: selectors.BaseSelector) -> None:
        # Read everything available now so a chatty child never backs up its pipe.
        if read_ready(fd, self.chunk, self.on_data):
            self.eof = True
            sel.unregister(fd)
        self.flush()

    def read_err(self, fd: int, sel: selectors.BaseSelector | None) -> None:
        chunk = self.chunk
        ended = read_ready(fd, chunk, lambda n: self.rec.stderr_log.write(memoryview(chunk)[:n]))
        if ended and sel is not None:
            sel.unregister(fd)

    def read_signals(self, wake_r: int) -> None:
        with contextlib.suppress(BlockingIOError):
            for signum in os.read(wake_r, 64):
                self.on_signal(signum)

    # ---- outcome ---------------------------------------------------------

    def cleanup_group(self) -> None:
        """Whatever the child left in its group (a grandchild holding stdout) goes too; a
        process killed here makes the cleanup a forced one."""
        if not self.pgid or not group_alive(self.pgid):
            return
        self.forced_cleanup = True
        stop_group(self.pgid, self.spec.killGrace)

    def finish(self, spawn_error: str | None = None) -> RunResult:
        norm = self.norm
        assert norm is not None
        terminal = self.phase.terminal or self.live.answer_stands()
        messages, limit = self.live.finish()
        proc = self.proc
        exit_code: int | None = None
        sig: str | None = None
        if proc is not None:
            rc = proc.wait()
            self.rec.stderr_log.close()  # its tail is part of the diagnosis below
            if rc < 0:
                sig = signal_name(-rc)
            else:
                exit_code = rc
            self.cleanup_group()
        self.phase.to("finished")
        ended = Ended(
            self.spec,
            norm,
            lambda: read_tail(self.run_dir / "stderr.log", STDERR_TAIL_BYTES),
            terminal=terminal,
            spawn_error=spawn_error,
            cause=self.phase.cause,
            abort_signal=self.abort_signal,
            abort_why=self.abort_why,
            exit_code=exit_code,
            sig=sig,
            limit_error=self.live.budget.message() if self.live.budget else None,
        )
        status, error = decide(ended)
        structured: JsonValue = None
        if self.spec.outputSchema is not None and status == "completed":
            from subagents.supervisor.answer import FAILED, check

            structured, problem = check(self.spec, norm)
            if problem is not None:  # failed; the raw answer stays in finalText
                status, error = "failed", f"{FAILED}: {problem}"
        duration_ms = round((time.monotonic() - self.t0) * 1000)
        self.rec.flush(force=True)
        status, error = with_write_error(status, error, self.rec.write_error)
        if status != "completed" and not spawn_error:
            self.emit(ev.error(error or status, fatal=True))
        self.emit(ev.run_finished(status, exit_code, sig, duration_ms))
        self.flush()
        _, usage = self.totals()
        result = build_result(
            self.spec,
            self.run_dir,
            status=status,
            started_at=self.started_at,
            completed_at=self.started_at + duration_ms / 1000,
            stop_reason=norm.stop_reason,
            raw_stop_reason=norm.raw_stop_reason,
            final_text=norm.final_text,
            error_message=error,
            exit_code=exit_code,
            signal=sig,
            forced_cleanup=self.forced_cleanup,
            usage=usage,
            tool_calls=norm.tool_calls + (self.carry[2] if self.carry else 0),
            model=norm.model,
            session_id=norm.session_id,
        )
        result["messages"] = messages
        result["limit"] = limit
        if self.live.approvals is not None and self.live.approvals.records:
            result["approvals"] = self.live.approvals.records
        if self.spec.schemaHash is not None:
            result["structured"] = structured if status == "completed" else None
            result["schemaHash"] = self.spec.schemaHash
        with finishing(self.run_dir):
            if self.spec.worktree:
                finish_worktree(result, self.spec, self.run_dir)
            if status != "completed":
                attach_diagnostics(result, self.run_dir)
            self.rec.close()
            publish_result(self.run_dir, result)
        return result
