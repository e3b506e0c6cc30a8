"""MCP progress notifications for a foreground job: canonical events from run threads, with a heartbeat."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context

from subagents import api
from subagents.mcp.results import PROGRESS_MAX_LEN, cap, elapsed
from subagents.present.progress import ProgressFormatter

HEARTBEAT_SECONDS = 8.0  # a quiet run still reports at least this often (< 10 s)


class ProgressReporter:
    """Canonical events (from run threads) → MCP progress notifications, with a heartbeat."""

    def __init__(self, ctx: Context, prepared: api.PreparedJob) -> None:
        self.ctx = ctx
        self.token = anyio.lowlevel.current_token()
        labels = api.run_labels(prepared)
        self.multi = len(labels) > 1
        self.formatters = [ProgressFormatter(max_len=PROGRESS_MAX_LEN) for _ in labels]
        self.active: dict[int, float] = {}  # run index -> when it started
        self.last_index: int | None = None
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.count = 0
        self._send, self._recv = anyio.create_memory_object_stream[str](math.inf)

    def on_event(self, index: int, event: dict[str, Any]) -> None:
        """Called from run threads."""
        with self.lock:
            fmt = self.formatters[index] if index < len(self.formatters) else self.formatters[-1]
            kind = event.get("type")
            if kind == "run_started":
                self.active[index] = time.monotonic()
            elif kind == "run_finished":
                self.active.pop(index, None)
            self.last_index = index
            line = fmt.line(event)
        if line:
            text = cap(f"[{index + 1}] {line}" if self.multi else line)
            with contextlib.suppress(Exception):  # the call is gone: nobody to tell
                anyio.from_thread.run_sync(self._send.send_nowait, text, token=self.token)

    def close(self) -> None:
        self._send.close()

    def heartbeat(self) -> str:
        with self.lock:
            index = (
                self.last_index if self.last_index in self.active else next(iter(self.active), None)
            )
            activity = self.formatters[index].activity() if index is not None else None
        what = activity or "starting"
        if self.multi and index is not None:
            what = f"[{index + 1}] {what}"
        return cap(f"still running: {what} ({elapsed(time.monotonic() - self.started)})")

    async def send(self, message: str) -> None:
        self.count += 1
        with contextlib.suppress(Exception):  # progress is best effort: never fail the job over it
            await self.ctx.report_progress(self.count, None, cap(message))

    async def pump(self) -> None:
        """Forward lines until the job ends; a heartbeat whenever it has been quiet a while."""
        async with self._recv:
            while True:
                line: str | None = None
                with anyio.move_on_after(HEARTBEAT_SECONDS):
                    try:
                        line = await self._recv.receive()
                    except anyio.EndOfStream:
                        return
                await self.send(line if line is not None else self.heartbeat())
