"""What `subagents run` shows on stderr while a job goes on.

On a terminal: a rich live status per run (spinner, elapsed time, current activity,
tool count, tokens, cost) below the scrolling progress lines. Off a terminal: plain
progress lines, one per event that makes one. ``--quiet``: nothing. Never anything on
stdout.

On a terminal nothing is drawn per event: an event only updates the run's state, and a
painter thread draws at most ``REFRESH_PER_SECOND`` times a second (a draw prints the
lines made since the last one and redraws the status), so a burst of 10k tool calls
costs a few draws, not 10k. A draw prints all its lines when there are at most
``BURST``. Past that it is coalesced: it prints, in order, the lines that must be seen
(a run's start and end, errors, notices: up to ``KEEP`` of them) and, for each run,
``(+N more)`` for the lines it leaves out, then that run's latest line, so the last
activity before the end is always shown. ``transcript.md`` (``subagents logs``) keeps
every line, in the same words.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from subagents.present import outcome
from subagents.present.figures import money, tokens
from subagents.present.progress import LINE_LIMIT
from subagents.present.runstate import RunState

if TYPE_CHECKING:
    from subagents.service import PreparedJob
    from subagents.types import Event, JobResult

REFRESH_PER_SECOND = 10
# Lines a draw prints in full; past that (in a tenth of a second) the draw is coalesced.
BURST = 10
# Lines that must be seen that a coalesced draw keeps (the rest count as left out).
KEEP = 20
# Events whose line a coalesced draw keeps.
MUST_SHOW = frozenset({"run_started", "run_finished", "error", "notice"})


class Pending:
    """The progress lines made since the last draw: at most ``KEEP`` plus one a run once
    coalesced (``BURST`` + 1 before), whatever the number of events."""

    def __init__(self) -> None:
        self._seq = 0
        self._lines: list[tuple[int, int, str, bool]] = []  # (seq, run, line, must show)
        self._coalesced = False
        self._kept: list[tuple[int, int, str]] = []  # must-show lines, once coalesced
        self._last: dict[int, tuple[int, str]] = {}  # run -> its latest other line
        self._skipped: dict[int, int] = {}  # run -> lines left out

    def __bool__(self) -> bool:
        return bool(self._lines or self._kept or self._last)

    def add(self, index: int, line: str, must_show: bool) -> None:
        self._seq += 1
        if self._coalesced:
            self._fold(self._seq, index, line, must_show)
            return
        self._lines.append((self._seq, index, line, must_show))
        if len(self._lines) > BURST:
            self._coalesced = True
            for entry in self._lines:
                self._fold(*entry)
            self._lines = []

    def _fold(self, seq: int, index: int, line: str, must_show: bool) -> None:
        if must_show and len(self._kept) < KEEP:
            self._kept.append((seq, index, line))
            return
        if index in self._last:
            self._skipped[index] = self._skipped.get(index, 0) + 1
        self._last[index] = (seq, line)

    def take(self) -> list[tuple[int, str, bool]]:
        """Empty the window: the lines to print now, in order, as ``(run, line, is a
        "(+N more)" marker)``."""
        if not self._coalesced:
            out = [(i, line, False) for _, i, line, _ in self._lines]
        else:
            chosen = [*self._kept, *((seq, i, line) for i, (seq, line) in self._last.items())]
            out = []
            for seq, i, line in sorted(chosen):
                left_out = self._skipped.get(i, 0)
                if left_out and self._last[i][0] == seq:
                    out.append((i, f"(+{left_out:,} more)", True))
                out.append((i, line, False))
        self._lines, self._kept, self._last, self._skipped = [], [], {}, {}
        self._coalesced = False
        return out


class Display:
    def __init__(
        self, enabled: bool = True, labels: list[str] | None = None, console: Console | None = None
    ) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.live_mode = enabled and self.console.is_terminal
        labels = labels or ["run"]
        self.multi = len(labels) > 1
        width = max(40, self.console.width - 4) if self.live_mode else LINE_LIMIT
        self.runs = [
            RunState(f"[{i + 1}] {label}" if self.multi else label, width)
            for i, label in enumerate(labels)
        ]
        self._live: Live | None = None
        self._lock = threading.Lock()
        self._pending = Pending()
        self._stop = threading.Event()
        self._painter: threading.Thread | None = None
        self._spinner = Spinner("dots")

    # ---- lifecycle -------------------------------------------------------

    def started(self, job: PreparedJob) -> None:
        if self.enabled:
            self.console.print(
                Text(
                    f"job {job.job_id} ({job.plan.mode}) · {job.store.dir / job.job_id}",
                    style="dim",
                )
            )

    def __enter__(self) -> Display:
        if self.live_mode:
            # Drawn only by the painter (auto_refresh off): one thread, a bounded rate.
            self._live = Live(self, console=self.console, auto_refresh=False, transient=True)
            self._live.__enter__()
            self._stop.clear()
            self._painter = threading.Thread(target=self._paint, name="display", daemon=True)
            self._painter.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._painter is not None:
            self._stop.set()
            self._painter.join()
            self._painter = None
        if self._live is not None:
            with contextlib.suppress(OSError):  # the terminal is gone: the job still ends
                self.draw()  # the final state: whatever came after the painter's last draw
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def _paint(self) -> None:
        try:
            while not self._stop.wait(1 / REFRESH_PER_SECOND):
                self.draw()
        except OSError:  # the terminal is gone (EIO, EPIPE): nothing more to draw on
            return

    def draw(self) -> None:
        """Print the lines made since the last draw (coalesced past ``BURST``) above the
        status, and redraw the status."""
        with self._lock:
            lines = self._pending.take()
        if not lines:
            if self._live is not None:
                self._live.refresh()
            return
        texts = []
        for index, line, marker in lines:
            text = Text(f"{self.runs[index].label}: " if self.multi else "")
            text.append(line, style="dim" if marker else "")
            texts.append(text)
        self.console.print(Group(*texts))  # the live status is redrawn below them

    def _status_line(self, run: RunState) -> Text:
        now = time.monotonic()
        frame = self._spinner.render(now)
        line = Text.assemble(frame if isinstance(frame, Text) else Text(str(frame)), " ")
        if self.multi:
            line.append(f"{run.label} ", style="bold")
        line.append(f"{now - (run.t0 or now):5.1f}s", style="cyan")
        line.append(" · ")
        line.append(run.fmt.activity() or "Starting", style="bold")
        line.append(f" · {run.tools} tools", style="dim")
        total = int(run.usage.get("totalTokens") or 0)
        if total:
            line.append(f" · {tokens(total)} tok", style="dim")
        if run.usage.get("cost"):
            line.append(f" · {money(run.usage['cost'])}", style="dim")
        line.truncate(self.console.width, overflow="ellipsis")
        return line

    def __rich__(self) -> Group:
        with self._lock:
            active = [r for r in self.runs if r.t0 is not None and r.status is None]
            return Group(*(self._status_line(r) for r in active))

    # ---- events ----------------------------------------------------------

    def event(self, index: int, event: Event) -> None:
        with self._lock:
            index = min(index, len(self.runs) - 1)
            run = self.runs[index]
            line = run.update(event)
            if not line or not self.enabled:
                return
            if self.live_mode:
                self._pending.add(index, line, event.get("type") in MUST_SHOW)
                return
            # Off a terminal rich would only copy the text out (tabs expanded), at ~50 us
            # a line: 10 s of a chatty run's 200k events.
            text = f"{run.label}: {line}" if self.multi else line
            self.console.file.write(text.expandtabs(8) + "\n")

    def finished(self, result: JobResult) -> None:
        """Each run's outcome (dim), then the job's in the words of its notice:
        ``✓ job … · pi · 3.4s · 60 tokens · $0.00004 · "DONE"``."""
        if not self.enabled:
            return
        runs = result.get("runs") or []
        for i, r in enumerate(runs):
            tools = int(r.get("toolCalls") or 0)
            bits = [
                f"{outcome.mark(r.get('status'))} {r.get('status')}",
                r.get("agent") or r.get("backend") or "run",
                *outcome.figures(r.get("durationMs"), r.get("usage")),
                f"{tools} tool{'' if tools == 1 else 's'}",
                *outcome.live_notes(r),
                f"run {r.get('runId')}",
            ]
            label = f"[{i + 1}] " if len(runs) > 1 else ""
            self._line(Text(label + " · ".join(str(b) for b in bits), style="dim"))
        colour = "green" if result.get("status") == "completed" else "red"
        self._line(Text(outcome.job_line(result), style=colour))

    def _line(self, line: Text) -> None:
        """One line, never wrapped onto more: cut to a terminal's width, as activity is."""
        if self.live_mode:
            line.truncate(self.console.width, overflow="ellipsis")
        self.console.print(line)
