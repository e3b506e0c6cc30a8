"""What `subagents run` shows on stderr while a job goes on.

On a terminal: a rich live status per run (spinner, elapsed time, current activity,
tool count, tokens, cost) below the scrolling progress lines. Off a terminal: plain
progress lines. ``--quiet``: nothing. Never anything on stdout.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from subagents.present.progress import LINE_LIMIT
from subagents.present.runstate import RunState


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


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
        self._spinner = Spinner("dots")

    # ---- lifecycle -------------------------------------------------------

    def started(self, job: Any) -> None:
        if self.enabled:
            self.console.print(
                Text(
                    f"job {job.job_id} ({job.plan.mode}) · {job.store.dir / job.job_id}",
                    style="dim",
                )
            )

    def __enter__(self) -> Display:
        if self.live_mode:
            self._live = Live(self, console=self.console, refresh_per_second=8, transient=True)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

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
            line.append(f" · {_tokens(total)} tok", style="dim")
        if run.usage.get("cost"):
            line.append(f" · ${run.usage['cost']:.4f}", style="dim")
        line.truncate(self.console.width, overflow="ellipsis")
        return line

    def __rich__(self) -> Group:
        with self._lock:
            active = [r for r in self.runs if r.t0 is not None and r.status is None]
            return Group(*(self._status_line(r) for r in active))

    # ---- events ----------------------------------------------------------

    def event(self, index: int, event: dict[str, Any]) -> None:
        with self._lock:
            run = self.runs[index] if index < len(self.runs) else self.runs[-1]
            line = run.update(event)
            if line and self.enabled and not self.live_mode:
                # Off a terminal rich would only copy the text out (tabs expanded), at
                # ~50 us a line: 10 s of a chatty run's 200k events.
                text = f"{run.label}: {line}" if self.multi else line
                self.console.file.write(text.expandtabs(8) + "\n")
                return
        if line and self.enabled:
            self.console.print(Text(f"{run.label}: " if self.multi else "") + Text(line))

    def finished(self, result: dict[str, Any]) -> None:
        if not self.enabled:
            return
        for r in result.get("runs") or []:
            status = r.get("status")
            colour = "green" if status == "completed" else "red"
            usage = r.get("usage") or {}
            bits = [f"{(r.get('durationMs') or 0) / 1000:.1f}s", f"{r.get('toolCalls', 0)} tools"]
            if usage.get("totalTokens"):
                bits.append(f"{_tokens(int(usage['totalTokens']))} tokens")
            if usage.get("cost") is not None:
                bits.append(f"${usage['cost']:.4f}")
            who = r.get("agent") or r.get("backend") or "run"
            self.console.print(
                f"[{colour}]{status}[/{colour}] [dim]{who} · {' · '.join(bits)} · run {r.get('runId')}[/dim]"
            )
