"""What `subagents run` shows on stderr while a run goes on.

On a terminal: a rich live status (spinner, elapsed time, current activity, tool
count, tokens, cost) above the scrolling progress lines. Off a terminal: plain
progress lines. Never anything on stdout.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from subagents.progress import ProgressFormatter


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class Display:
    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True, highlight=False)
        self.live_mode = enabled and self.console.is_terminal
        self.fmt = ProgressFormatter(max_len=max(40, self.console.width - 4) if self.live_mode else None)
        self.t0 = time.monotonic()
        self.tools = 0
        self.usage: dict[str, Any] = {}
        self.label = ""
        self._live: Live | None = None
        self._spinner = Spinner("dots")

    # ---- lifecycle -------------------------------------------------------

    def started(self, run_id: str, run_dir: Path, backend: str) -> None:
        self.label = run_id
        if self.enabled:
            self.console.print(f"[dim]run {run_id} ({backend}) · {run_dir}[/dim]")

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

    def __rich__(self) -> Text:
        elapsed = time.monotonic() - self.t0
        self._spinner.update()
        frame = self._spinner.render(time.monotonic())
        status = Text.assemble(
            frame if isinstance(frame, Text) else Text(str(frame)),
            " ",
            (f"{elapsed:5.1f}s", "cyan"),
            " · ",
            (self.fmt.activity() or "Starting", "bold"),
        )
        status.append(f" · {self.tools} tools", style="dim")
        total = int(self.usage.get("totalTokens") or 0)
        if total:
            status.append(f" · {_tokens(total)} tok", style="dim")
        cost = self.usage.get("cost")
        if cost:
            status.append(f" · ${cost:.4f}", style="dim")
        status.truncate(self.console.width, overflow="ellipsis")
        return status

    # ---- events ----------------------------------------------------------

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "tool_call":
            self.tools += 1
        elif kind == "usage":
            self.usage = event
        line = self.fmt.line(event)
        if line and self.enabled:
            self.console.print(Text(line), soft_wrap=not self.live_mode)

    def note(self, message: str) -> None:
        if self.enabled:
            self.console.print(f"[yellow]{message}[/yellow]")

    def finished(self, result: dict[str, Any]) -> None:
        if not self.enabled:
            return
        status = result.get("status")
        colour = "green" if status == "completed" else "red"
        usage = result.get("usage") or {}
        bits = [f"{(result.get('durationMs') or 0) / 1000:.1f}s", f"{result.get('toolCalls', 0)} tools"]
        if usage.get("totalTokens"):
            bits.append(f"{_tokens(int(usage['totalTokens']))} tokens")
        if usage.get("cost") is not None:
            bits.append(f"${usage['cost']:.4f}")
        self.console.print(f"[{colour}]{status}[/{colour}] [dim]{' · '.join(bits)} · run {result.get('runId')}[/dim]")
