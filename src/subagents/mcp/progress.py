"""MCP progress notifications for a foreground job: canonical events from run threads, with a
heartbeat. A job of several runs reports all of them in each message
(``[1] ✓ 3.1s · [2] $ sleep 3; ls``), not only the run that spoke last."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import TYPE_CHECKING

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context

from subagents import service
from subagents.mcp.results import PROGRESS_MAX_LEN, cap, elapsed
from subagents.present.runstate import RunState, runs_line

if TYPE_CHECKING:
    from subagents.types import Event

HEARTBEAT_SECONDS = 8.0  # a quiet run still reports at least this often (< 10 s)


class ProgressReporter:
    """Canonical events (from run threads) → MCP progress notifications, with a heartbeat."""

    def __init__(self, ctx: Context, prepared: service.PreparedJob) -> None:
        self.ctx = ctx
        self.token = anyio.lowlevel.current_token()
        labels = service.run_labels(prepared)
        self.multi = len(labels) > 1
        self.runs = [RunState(label, max_len=PROGRESS_MAX_LEN) for label in labels]
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.count = 0
        self._send, self._recv = anyio.create_memory_object_stream[str](math.inf)

    def on_event(self, index: int, event: Event) -> None:
        """Called from run threads."""
        with self.lock:
            run = self.runs[min(index, len(self.runs) - 1)]
            line = run.update(event)
            if line and self.multi:
                line = runs_line(self.runs, PROGRESS_MAX_LEN)
        if line:
            with contextlib.suppress(Exception):  # the call is gone: nobody to tell
                anyio.from_thread.run_sync(self._send.send_nowait, cap(line), token=self.token)

    def close(self) -> None:
        self._send.close()

    def heartbeat(self) -> str:
        took = elapsed(time.monotonic() - self.started)
        with self.lock:
            if self.multi:
                return cap(f"still running ({took}): {runs_line(self.runs, PROGRESS_MAX_LEN)}")
            activity = self.runs[0].fmt.activity()
        return cap(f"still running: {activity or 'starting'} ({took})")

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
