"""Job-ended notifications: who is subscribed to ``subagent://jobs/{id}``, and telling them.

Both kinds of client are served: 2026 clients listen through the SDK's subscription bus,
2025-era clients subscribe with ``resources/subscribe`` (which MCPServer no longer serves, so
it is registered here on the low-level server). A background job is watched from a thread
until it ends; a foreground job's end is announced by whoever drove it.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from subagents import service
from subagents.mcp.results import job_uri
from subagents.service import JobStore

WATCH_SLICE_SECONDS = 60.0  # a background watcher re-checks that the server still runs this often
SEND_SECONDS = 5.0  # one notification to one subscriber may take this long; then it is dropped


class JobNotifier:
    """The subscribers of job resources, and the watchers of background jobs, of one server."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.bus = InMemorySubscriptionBus()
        self._subscribers: dict[str, dict[str, ServerSession]] = {}  # uri -> connection -> session
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def close(self) -> None:
        """Stop the background watchers (each within one ``WATCH_SLICE_SECONDS``)."""
        self._closed.set()

    def install(self, lowlevel: Server[Any]) -> None:
        """Serve 2025-era ``resources/subscribe`` and ``resources/unsubscribe`` on ``lowlevel``."""
        lowlevel.add_request_handler(
            "resources/subscribe", SubscribeRequestParams, self._on_subscribe
        )
        lowlevel.add_request_handler(
            "resources/unsubscribe", UnsubscribeRequestParams, self._on_unsubscribe
        )

    @staticmethod
    def _connection_key(ctx: ServerRequestContext[Any, Any]) -> str:
        headers = getattr(ctx.request, "headers", None)
        sid = headers.get("mcp-session-id") if headers is not None else None
        return str(sid) if sid else "stdio"

    async def _on_subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        with self._lock:
            self._subscribers.setdefault(str(params.uri), {})[self._connection_key(ctx)] = (
                ctx.session
            )
        return EmptyResult()

    async def _on_unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        with self._lock:
            self._subscribers.get(str(params.uri), {}).pop(self._connection_key(ctx), None)
        return EmptyResult()

    async def job_updated(self, job_id: str) -> None:
        """Tell subscribers that ``subagent://jobs/<id>`` changed (2026 listen streams and 2025 subscriptions)."""
        uri = job_uri(job_id)
        with contextlib.suppress(Exception):
            await self.bus.publish(ResourceUpdated(uri=uri))
        with self._lock:
            sessions = list(self._subscribers.get(uri, {}).items())
        for key, session in sessions:
            try:
                with anyio.fail_after(SEND_SECONDS):
                    await session.send_resource_updated(uri)
            except Exception:  # the connection is gone: forget it
                with self._lock:
                    self._subscribers.get(uri, {}).pop(key, None)

    def watch_in_background(self, job_id: str, token: anyio.lowlevel.EventLoopToken) -> None:
        """A watcher thread for a detached job: when it ends, notify (on the loop of ``token``)."""

        def run() -> None:
            while not self._closed.is_set():
                try:
                    done = service.wait_job(self.store, job_id, timeout=WATCH_SLICE_SECONDS)
                except Exception:
                    return
                if done is not None:
                    with contextlib.suppress(Exception):
                        anyio.from_thread.run(self.job_updated, job_id, token=token)
                    return

        threading.Thread(target=run, name=f"subagents-mcp-watch-{job_id}", daemon=True).start()
