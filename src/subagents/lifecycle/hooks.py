"""Lifecycle hooks: commands run when a session-log entry is written.

A hook (config ``[[hooks]]``: ``on``, ``command``, ``timeout``) runs for each entry whose
``eventType`` is in its ``on`` list (``subagent:complete`` or the short ``complete``; also
``start``, ``error``, ``aborted``; ``*`` matches all). Its ``command`` is an argv list, never
given to a shell; it gets the entry as JSON on stdin and ``SUBAGENTS_HOOK_EVENT`` /
``SUBAGENTS_JOB_ID`` in its environment, runs in its own process group, and is cut off at
its timeout (SIGTERM to the group, SIGKILL 1 s later). Output is captured (the last 4000
bytes of each stream). Processes a hook leaves behind after exiting by itself are its own
business; after a timeout the whole group is killed.

Every outcome is appended as one JSON line to the hooks log (``$SUBAGENTS_HOME/
hooks.log.jsonl``), with the same safe append as the session log. Nothing here raises.

:func:`run_hooks_detached` runs the hooks in a helper process (``python -m
subagents.lifecycle.hooks``) in its own session, so a slow hook never delays a job's result and still
runs when the caller exits. The helper runs the matching hooks one after another.

This module does not import pydantic; any object with ``on``, ``command`` and ``timeout``
(``subagents.config.Hook``, :class:`HookSpec`) is a hook.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from subagents.core import procs
from subagents.core.clock import iso
from subagents.lifecycle import sessionlog

if TYPE_CHECKING:
    from subagents.config import Settings
    from subagents.types import HookRecord, JsonObject, JsonValue

# A lifecycle entry (``types.AgentEvent``), as a hook reads it: key by key, since the detached
# helper gets it back as JSON.
Entry = Mapping[str, object]

HOOKS_LOG = "hooks.log.jsonl"
TAIL_BYTES = 4000
KILL_GRACE = 1.0  # SIGTERM -> SIGKILL
DRAIN_AFTER_EXIT = 0.2  # how long to read pipes a grandchild keeps open after the hook exited
DESKTOP_NOTICE_TIMEOUT = 5.0


class HookLike(Protocol):
    @property
    def on(self) -> Sequence[str]: ...

    @property
    def command(self) -> Sequence[str]: ...

    @property
    def timeout(self) -> float: ...


# A named tuple and a plain class, not dataclasses: making those cost every delegation ~2 ms
# of its start, for hooks that run in few of them.
class HookSpec(NamedTuple):
    """A hook without pydantic (the detached helper's, and the desktop notice's)."""

    on: tuple[str, ...]
    command: tuple[str, ...]
    timeout: float = 10.0

    @classmethod
    def from_dict(cls, data: JsonValue) -> HookSpec:
        if not isinstance(data, dict):
            raise TypeError("a hook must be an object")
        on, command, timeout = data["on"], data["command"], data.get("timeout", 10.0)
        if not isinstance(on, list) or not all(isinstance(x, str) for x in on):
            raise TypeError("hook 'on' must be a list of strings")
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(x, str) for x in command)
        ):
            raise TypeError("hook 'command' must be a non-empty list of strings")
        words, argv = [str(x) for x in on], [str(x) for x in command]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise TypeError("hook 'timeout' must be a positive number")
        return cls(tuple(words), tuple(argv), float(timeout))


def hook_to_dict(hook: HookLike) -> JsonObject:
    return {"on": list(hook.on), "command": list(hook.command), "timeout": float(hook.timeout)}


def hooks_log_path(home: Path) -> Path:
    """``home/hooks.log.jsonl``."""
    return Path(home) / HOOKS_LOG


def unknown_events(on: Sequence[str]) -> list[str]:
    """The names in a hook's ``on`` that match no event (for ``doctor`` and validation)."""
    return [name for name in on if name != "*" and sessionlog.normalize_event_type(name) is None]


def matches(hook: HookLike, event_type: str) -> bool:
    """Whether *hook* runs for *event_type* (full or short names in ``on``; ``*`` = all)."""
    target = sessionlog.normalize_event_type(event_type)
    if target is None:
        return False
    return any(name == "*" or sessionlog.normalize_event_type(name) == target for name in hook.on)


class HookOutcome:
    """How one hook's run went (a line of the hooks log)."""

    def __init__(
        self,
        command: list[str],
        event_type: str | None,
        job_id: str | None,
        outcome: Literal["ok", "failed", "timeout", "error"],
        error: str | None = None,
    ) -> None:
        self.command, self.event_type, self.job_id = command, event_type, job_id
        self.outcome: Literal["ok", "failed", "timeout", "error"] = outcome
        self.error = error
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.duration_ms = 0
        self.pid: int | None = None
        self.stdout_tail = ""
        self.stderr_tail = ""

    def to_record(self) -> HookRecord:
        """The hooks-log line."""
        return {
            "type": "hook_outcome",
            "timestamp": iso(),
            "eventType": self.event_type,
            "jobId": self.job_id,
            "command": self.command,
            "outcome": self.outcome,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "error": self.error,
            "durationMs": self.duration_ms,
            "pid": self.pid,
            "stdoutTail": self.stdout_tail,
            "stderrTail": self.stderr_tail,
        }


# ---- running one hook ---------------------------------------------------------------


def _kill_group(proc: subprocess.Popen[bytes], grace: float = KILL_GRACE) -> None:
    """SIGTERM the hook's process group, SIGKILL what is left after *grace*; reap."""
    procs.stop_group(proc.pid, grace, reap=proc.poll)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _tail(buf: bytearray) -> str:
    return bytes(buf[-TAIL_BYTES:]).decode("utf-8", errors="replace")


def _pump(
    proc: subprocess.Popen[bytes], payload: bytes, deadline: float
) -> tuple[bytearray, bytearray, bool]:
    """Feed stdin, read stdout/stderr (keeping tails) until the pipes close or the hook exits
    (then a short drain), or the deadline. Returns (stdout, stderr, timed_out)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    bufs = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    stdin_fd = proc.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    pending = memoryview(payload)
    sel = selectors.DefaultSelector()
    try:
        if pending:
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        exited_at: float | None = None
        while sel.get_map():
            now = time.monotonic()
            if proc.poll() is not None:
                if exited_at is None:
                    exited_at = now
                elif now - exited_at >= DRAIN_AFTER_EXIT:
                    break
            if now >= deadline:
                break
            for key, _ in sel.select(timeout=min(0.1, deadline - now)):
                fd = int(key.fd)
                if fd == stdin_fd:
                    try:
                        pending = pending[os.write(fd, pending) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # BrokenPipeError: the hook does not read stdin
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf = bufs[fd]
                buf += chunk
                if len(buf) > 2 * TAIL_BYTES:
                    del buf[:-TAIL_BYTES]
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    timed_out = False
    if proc.poll() is None:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    return out, err, timed_out


def _hook_env(entry: Entry) -> dict[str, str]:
    env = dict(os.environ)
    env["SUBAGENTS_HOOK_EVENT"] = str(entry.get("eventType") or "")
    env["SUBAGENTS_JOB_ID"] = str(entry.get("jobId") or "")
    return env


def run_hook(hook: HookLike, entry: Entry) -> HookOutcome:
    """Run one hook for *entry* (whether it matches is the caller's business). Never raises."""
    argv = [str(part) for part in hook.command]
    outcome = HookOutcome(
        command=argv,
        event_type=_text(entry.get("eventType")),
        job_id=_text(entry.get("jobId")),
        outcome="error",
    )
    start = time.monotonic()
    try:
        timeout = float(hook.timeout)
        payload = (
            json.dumps(entry, ensure_ascii=False, default=str, allow_nan=False).encode() + b"\n"
        )
        if not argv or not argv[0]:
            outcome.error = "empty command"
            return outcome
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                env=_hook_env(entry),
            )
        except FileNotFoundError:
            outcome.error = f"executable not found: {argv[0]}"
            return outcome
        except PermissionError:
            outcome.error = f"permission denied: {argv[0]}"
            return outcome
        except OSError as exc:
            outcome.error = f"cannot start {argv[0]}: {exc.strerror or exc}"
            return outcome
        outcome.pid = proc.pid
        try:
            out, err, timed_out = _pump(proc, payload, start + timeout)
        finally:
            if proc.poll() is None:
                timed_out = True
                _kill_group(proc)
        outcome.stdout_tail, outcome.stderr_tail = _tail(out), _tail(err)
        if timed_out:
            outcome.outcome = "timeout"
            outcome.error = f"timed out after {timeout:g}s"
        else:
            code = proc.returncode
            if code is not None and code < 0:
                outcome.outcome = "failed"
                outcome.signal = procs.signal_name(-code)
                outcome.error = f"killed by {outcome.signal}"
            else:
                outcome.exit_code = code
                outcome.outcome = "ok" if code == 0 else "failed"
                if code != 0:
                    outcome.error = f"exited with code {code}"
    except Exception as exc:  # never raise: a hook is never worth a job
        outcome.outcome = "error"
        outcome.error = f"hook runner failed: {exc!r}"
    finally:
        outcome.duration_ms = max(0, round((time.monotonic() - start) * 1000))
    return outcome


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _log(log_path: Path, record: HookRecord) -> None:
    try:
        sessionlog.append(log_path, record)
    except Exception as exc:
        with contextlib.suppress(Exception):
            print(f"subagents: cannot write the hooks log {log_path}: {exc}", file=sys.stderr)


def run_hooks(entry: Entry, hooks: Sequence[HookLike], log_path: Path) -> list[HookOutcome]:
    """Run, one after another, each hook whose ``on`` matches ``entry["eventType"]``; append
    each outcome to *log_path*. Returns the outcomes. Never raises."""
    outcomes: list[HookOutcome] = []
    try:
        event_type = str(entry.get("eventType") or "")
        selected = [hook for hook in hooks if matches(hook, event_type)]
    except Exception:
        return outcomes
    for hook in selected:
        outcome = run_hook(hook, entry)
        outcomes.append(outcome)
        _log(log_path, outcome.to_record())
    return outcomes


# ---- detached -----------------------------------------------------------------------

_HELPER_CODE = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from subagents.lifecycle.hooks import main; raise SystemExit(main())"
)


def run_hooks_detached(entry: Entry, hooks: Sequence[HookLike], log_path: Path) -> None:
    """Like :func:`run_hooks`, without holding up the caller: the matching hooks run in a
    helper process in its own session (it outlives the caller). Returns at once; spawns
    nothing when no hook matches. Never raises (a failure to spawn is logged)."""
    try:
        event_type = str(entry.get("eventType") or "")
        selected = [hook_to_dict(hook) for hook in hooks if matches(hook, event_type)]
        if not selected:
            return
        payload = json.dumps(
            {"entry": entry, "hooks": selected, "logPath": str(log_path)},
            ensure_ascii=False,
            default=str,
            allow_nan=False,
        ).encode()
        # The directory holding this copy of the package (src/, not the package itself,
        # whose modules must not shadow the standard library's: subagents/types.py), so the
        # helper runs the same code (without touching PYTHONPATH, which the hooks inherit).
        package_parent = str(Path(__file__).resolve().parents[2])
        proc = subprocess.Popen(
            [sys.executable, "-c", _HELPER_CODE, package_parent],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(payload)
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        # Reap it when it ends, so a long-lived caller collects no zombies.
        threading.Thread(target=proc.wait, name="subagents-hooks-reaper", daemon=True).start()
    except Exception as exc:
        with contextlib.suppress(Exception):
            _log(
                log_path,
                HookOutcome(
                    command=[sys.executable, "-m", "subagents.lifecycle.hooks"],
                    event_type=_text(entry.get("eventType")),
                    job_id=_text(entry.get("jobId")),
                    outcome="error",
                    error=f"cannot start the hooks helper: {exc}",
                ).to_record(),
            )


def main(argv: Sequence[str] | None = None) -> int:
    """The detached helper: ``python -m subagents.lifecycle.hooks [FILE]`` reads
    ``{"entry": {...}, "hooks": [{"on", "command", "timeout"}], "logPath": "..."}`` as JSON
    from FILE or stdin and runs the hooks."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        raw = Path(args[0]).read_bytes() if args else sys.stdin.buffer.read()
        payload: JsonValue = json.loads(raw)
        if not isinstance(payload, dict):
            raise TypeError("the input must be an object")
        entry, given, log = payload["entry"], payload["hooks"], payload["logPath"]
        if not isinstance(entry, dict):
            raise TypeError("'entry' must be an object")
        if not isinstance(given, list) or not isinstance(log, str):
            raise TypeError("'hooks' must be a list and 'logPath' a path")
        hooks = [HookSpec.from_dict(item) for item in given]
        log_path = Path(log)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"subagents.lifecycle.hooks: bad input: {exc}", file=sys.stderr)
        return 2
    run_hooks(entry, hooks, log_path)
    return 0


# ---- desktop notice -----------------------------------------------------------------


def _notice_text(entry: Entry) -> str:
    text = str(entry.get("summary") or entry.get("eventType") or "subagents")
    text = " ".join(text.split()) or "subagents"
    return " " + text if text.startswith("-") else text  # never read as an option


def desktop_notice_command(entry: Entry) -> list[str] | None:
    """The command showing *entry*'s summary as a desktop notification: ``notify-send`` when
    it is on PATH, ``osascript`` on macOS (the text passed as an argument, never as script
    source), else None."""
    text = _notice_text(entry)
    if procs.which("notify-send"):
        return ["notify-send", "subagents", text]
    if sys.platform == "darwin" and procs.which("osascript"):
        return [
            "osascript",
            "-e",
            "on run argv",
            "-e",
            'display notification (item 1 of argv) with title "subagents"',
            "-e",
            "end run",
            text,
        ]
    return None


def desktop_notice_hook(entry: Entry) -> HookSpec | None:
    """An extra hook for config ``notify_desktop``: the notice for a job's end."""
    command = desktop_notice_command(entry)
    if command is None:
        return None
    return HookSpec(
        on=sessionlog.END_EVENT_TYPES, command=tuple(command), timeout=DESKTOP_NOTICE_TIMEOUT
    )


if __name__ == "__main__":
    raise SystemExit(main())


# ---- a lifecycle entry's hooks, from the settings ------------------------------------


def configured_hooks(cwd: Path, settings: Settings | None = None) -> tuple[list[HookLike], bool]:
    """The hooks and ``notify_desktop`` of the settings for work in ``cwd``; none when the
    settings cannot be read (a job was planned with valid ones: never fail over hooks).
    ``settings``: those just read for ``cwd`` with this process's environment (a job's
    planning), not read again."""
    if settings is None:
        from subagents.config import load_settings
        from subagents.errors import ConfigError

        try:
            settings = load_settings(cwd)
        except ConfigError:
            return [], False
    return list(settings.hooks), settings.notify_desktop


def fire(home: Path, entry: Entry, hooks: Sequence[HookLike], notify_desktop: bool) -> None:
    """Run the hooks an entry matches (and the desktop notice of a job's end), detached.
    Never raises."""
    to_run = list(hooks)
    if notify_desktop and entry.get("eventType") in sessionlog.END_EVENT_TYPES:
        notice = desktop_notice_hook(entry)
        if notice is not None:
            to_run.append(notice)
    if to_run:
        with contextlib.suppress(Exception):
            run_hooks_detached(entry, to_run, hooks_log_path(home))
