"""Foreground jobs: driven in this server process for one tool call, aborted with it.

A call ends early three ways, and each aborts its job (process groups killed, the job ends
``aborted``): the client cancels it (MCP cancellation), the client goes away (its HTTP
connection closes: ``transport.BearerAuth`` sets the request's ``CLIENT_GONE`` event), or the
server shuts down. The SDK cancels the handler on the first; on the legacy streamable HTTP wire
it does not on the second, hence the event.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from subagents import service
from subagents.mcp.progress import ProgressReporter
from subagents.service import Job

if TYPE_CHECKING:
    from subagents.types import JobResult

CANCEL_WAIT_SECONDS = 90.0  # how long an aborted call waits for its job to end
CLIENT_GONE = "subagents.client_gone"  # ASGI scope key: an anyio.Event set on http.disconnect


def client_gone(ctx: Context) -> anyio.Event | None:
    """The event set when this call's HTTP client disconnects (None over stdio)."""
    request = None
    with contextlib.suppress(Exception):  # no request context: not called over a transport
        request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    event = scope.get(CLIENT_GONE) if isinstance(scope, dict) else None
    return event if isinstance(event, anyio.Event) else None


class ForegroundJobs:
    """The jobs this server drives in the foreground, by id (so ``subagent_cancel`` stops them here)."""

    def __init__(self) -> None:
        self._running: dict[str, Job] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._running.get(job_id)

    async def run(
        self,
        ctx: Context,
        prepared: service.PreparedJob,
        on_end: Callable[[str], Awaitable[None]],
    ) -> JobResult:
        """Drive the job in a worker thread, streaming progress; ``on_end(job_id)`` once it ended.
        A cancelled call, or a client gone, aborts the job."""
        from subagents.service import lifecycle_for

        job = Job(prepared.store, prepared.job_id, prepared.plan)
        lifecycle = lifecycle_for(
            prepared.store.home, prepared.plan, background=False, settings=prepared.settings
        )
        reporter = ProgressReporter(ctx, prepared)
        token = anyio.lowlevel.current_token()
        finished = threading.Event()
        results: list[JobResult] = []
        failures: list[BaseException] = []

        def work() -> None:
            try:
                results.append(job.run(on_event=reporter.on_event, lifecycle=lifecycle))
            except BaseException as exc:
                failures.append(exc)
            finally:
                finished.set()
                with contextlib.suppress(Exception):
                    anyio.from_thread.run_sync(reporter.close, token=token)

        gone = client_gone(ctx)
        with self._lock:
            self._running[prepared.job_id] = job
        try:
            await reporter.send(
                f"job {prepared.job_id} started: {prepared.plan.mode}, "
                f"{len(prepared.plan.requests)} run(s)"
            )
            threading.Thread(
                target=work, name=f"subagents-mcp-job-{prepared.job_id}", daemon=True
            ).start()
            async with anyio.create_task_group() as tg:
                if gone is not None:
                    tg.start_soon(_cancel_when_set, gone, tg.cancel_scope)
                await reporter.pump()  # returns once the job has ended (the worker closes it last)
                tg.cancel_scope.cancel()
        finally:
            if not finished.is_set():
                # Cancelled, or the client went away: abort the job and wait for its end,
                # shielded so the cleanup itself cannot be cut short.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(job.cancel)
                    await anyio.to_thread.run_sync(finished.wait, CANCEL_WAIT_SECONDS)
            with self._lock:
                self._running.pop(prepared.job_id, None)
            with anyio.CancelScope(shield=True):
                await on_end(prepared.job_id)
        if failures:
            raise failures[0]
        if not results:
            raise ToolError(
                f"job {prepared.job_id} was aborted but had not ended {CANCEL_WAIT_SECONDS:g} s later"
            )
        return results[0]


async def _cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
