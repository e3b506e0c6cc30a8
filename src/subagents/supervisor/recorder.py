"""A run's artifacts as the supervisor writes them: ``raw.jsonl`` (verbatim), ``events.jsonl``
(numbered canonical events), ``transcript.md`` (the shared progress wording) with
``transcript.times`` (when each read's part of it was written: ``core.stamps``) and the capped
``stderr.log``. Writes are best effort: the first that fails (a full disk) is remembered as
the run's true cause, and ``result.json`` is still written. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from subagents.core import stamps
from subagents.core.files import FILE_MODE, describe_os_error, dumps, open_private
from subagents.supervisor.stderrlog import StderrLog

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

    from subagents.types import Event


_BUFFER = 1 << 20
# An event line shorter than this is joined and written in one call; a longer one (an
# answer) is written in pieces rather than copied.
_JOIN_BELOW = 1 << 16


class Recorder:
    """Made before the child is spawned; its files opened (:meth:`open`) just after, so the
    child starts without waiting for five files to be made."""

    def __init__(self, run_dir: Path) -> None:
        from subagents.present.progress import ProgressFormatter, transcript_entry

        self.run_dir = run_dir
        self.opened = False
        self.seq = 0
        self._ts = b""
        self._now = 0.0
        self._timed = -1.0  # the time transcript.times says last (a new one adds a record)
        self._transcript_size = 0
        self.stamp()
        self.dumps: Callable[[object], bytes] = dumps
        self.write_error: str | None = None
        self.dirty = False
        self._fmt = ProgressFormatter()
        self._transcript_entry = transcript_entry

    def open(self) -> None:
        """Make the run's artifact files (once; before anything is recorded). Raises
        OSError: the supervisor's caller ends the run with it as the cause."""
        if self.opened:
            return
        self.opened = True
        run_dir = self.run_dir
        # Big buffers: the supervisor flushes after each read anyway, and a write system call
        # every 8 KiB (the default) cost a tenth of a long run's time per event.
        self.events_f: IO[bytes] = open_private(run_dir / "events.jsonl", "wb", _BUFFER)
        # Unbuffered: each chunk read goes straight to the kernel in one write.
        self.raw_f: IO[bytes] = open_private(run_dir / "raw.jsonl", "wb", buffering=0)
        self.transcript_f: IO[str] = open_private(
            run_dir / "transcript.md", "w", _BUFFER, encoding="utf-8"
        )
        self.times_f: IO[bytes] = open_private(run_dir / stamps.NAME, "wb", _BUFFER)
        # The child's stderr comes through a pipe so the log can be capped (head and tail).
        self.stderr_log = StderrLog(
            os.open(run_dir / "stderr.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        )

    def stamp(self) -> None:
        """Stamp the events recorded from now on with the time now (ms): the supervisor
        stamps once per read, so the lines read together share their time of arrival and no
        event pays for reading and rounding the clock."""
        self._now = round(time.time(), 3)
        self._ts = b',"ts":' + repr(self._now).encode() + b","

    def record(self, event: Event) -> None:
        """Number and stamp one canonical event, write it and its transcript entry.

        The line is ``{"seq":N,"ts":T,`` and then the event's own JSON without its ``{``:
        the same bytes as dumping ``{"seq": N, "ts": T, **event}``, without building that
        dict (events never carry ``seq`` or ``ts`` themselves)."""
        self.seq += 1
        try:
            body = self.dumps(event)
            write = self.events_f.write
            if len(body) < _JOIN_BELOW:
                write(b'{"seq":%d%b%b\n' % (self.seq, self._ts, body[1:]))
            else:  # a big answer's line is not copied once more
                write(b'{"seq":%d%b' % (self.seq, self._ts))
                with memoryview(body) as view, view[1:] as rest:
                    write(rest)
                write(b"\n")
            del body  # written: a big answer is not held twice while it is worded below
            entry = self._transcript_entry(event, self._fmt)
            if entry:
                if self._now != self._timed:
                    self._timed = self._now
                    self.times_f.write(stamps.record(self._transcript_size, self._now))
                self.transcript_f.write(entry)
                # Its size in bytes (an ASCII string says so at no cost; others are encoded).
                self._transcript_size += len(entry) if entry.isascii() else len(entry.encode())
        except OSError as exc:
            self.note_write_error(exc, "events.jsonl")
        self.dirty = True

    def raw(self, data: bytes | memoryview) -> None:
        try:
            self.raw_f.write(data)
        except OSError as exc:
            self.note_write_error(exc, "raw.jsonl")

    def note_write_error(self, exc: OSError, name: str) -> None:
        if self.write_error is None:
            self.write_error = f"could not write {name}: {describe_os_error(exc)}"

    def flush(self, force: bool = False) -> None:
        if not (self.dirty or force):
            return
        self.dirty = False
        # The times before the transcript: a reader that sees a chunk finds its time.
        for f, name in (
            (self.events_f, "events.jsonl"),
            (self.times_f, stamps.NAME),
            (self.transcript_f, "transcript.md"),
        ):
            try:
                f.flush()
            except OSError as exc:
                self.note_write_error(exc, name)

    def close(self) -> None:
        for f in (self.events_f, self.raw_f, self.times_f, self.transcript_f):
            with contextlib.suppress(OSError):
                f.close()
