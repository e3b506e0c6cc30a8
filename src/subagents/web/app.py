"""The web app's routes (Starlette): three pages, their live streams (Server-Sent Events: one
stream a page, the server looks at the job store and run directories for it), the actions
(stop a job, apply an isolated run's changes), a small JSON API, and its own static files.

Every page is rendered whole on the server and its stream sends the same fragments again as
they change, so the first look and the live one are one code path; reading the store is
blocking work and runs in a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import CostTotals

import json
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from subagents import api, service
from subagents.errors import JobIdError, PlanError, SubagentsError, UsageError, WorktreeError
from subagents.jobs import JobStore, LiveJobs, read_run, resolve_run
from subagents.web import costpage, fleet, jobpage
from subagents.web.access import CSRF_SCOPE_KEY, Access
from subagents.web.layout import esc, page
from subagents.web.transcript import read_piece

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
FLEET_LIMIT = 200
FLEET_TICK = 1.0
JOB_TICK = 0.5
# A stream says something at least this often, so a client gone is noticed.
KEEPALIVE = 15.0


def event(name: str, data: Mapping[str, str], event_id: str | None = None) -> str:
    """One Server-Sent Event; its data is one line of JSON (ASCII: no line breaks inside)."""
    head = f"event: {name}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return head + "data: " + json.dumps(data, allow_nan=False) + "\n\n"


class WebApp:
    def __init__(self, home: Path) -> None:
        self.store = JobStore(home)
        self.home = home
        # Set as the server stops: open streams end at their next tick.
        self.stopping = threading.Event()

    # ---- pages ---------------------------------------------------------------

    def _page(
        self, request: Request, title: str, body: str, active: str, name: str
    ) -> HTMLResponse:
        csrf = str(request.scope.get(CSRF_SCOPE_KEY, ""))
        return HTMLResponse(page(title, body, csrf=csrf, active=active, name=name))

    async def fleet_page(self, request: Request) -> Response:
        filters = fleet.Filters.of(request.query_params)
        live = LiveJobs(self.home, limit=FLEET_LIMIT)
        view = await anyio.to_thread.run_sync(fleet.gather, live, filters)
        return self._page(request, "Fleet", fleet.render_page_body(view, filters), "/", "fleet")

    async def job_page(self, request: Request) -> Response:
        try:
            job_id = self.store.resolve(request.path_params["job_id"])
        except JobIdError as exc:
            return self._missing(request, str(exc))

        def gather() -> str:
            state = service.job_state(self.store, job_id)
            data = jobpage.gather(LiveJobs(self.home), state, request.query_params.get("run"))
            return jobpage.render_body(data, self.home)

        body = await anyio.to_thread.run_sync(gather)
        return self._page(request, f"job {job_id}", body, "", "job")

    async def cost_page(self, request: Request) -> Response:
        since = request.query_params.get("since", "").strip()
        session = request.query_params.get("session", "").strip()

        def report(by: str | None) -> CostTotals:
            return api.cost_report(session or None, since or None, by)

        body = await anyio.to_thread.run_sync(costpage.render_body, report, since, session)
        return self._page(request, "Cost", body, "/cost", "cost")

    def _missing(self, request: Request, message: str) -> HTMLResponse:
        response = self._page(
            request, "not found", f'<p class="problem">{esc(message)}</p>', "", ""
        )
        response.status_code = 404
        return response

    # ---- live streams --------------------------------------------------------

    def _stream(self, events: AsyncIterator[str]) -> StreamingResponse:
        return StreamingResponse(
            events, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    async def _ticks(self, every: float) -> AsyncIterator[None]:
        """Yields at once, then every ``every`` seconds until the server stops."""
        while not self.stopping.is_set():
            yield
            await anyio.sleep(every)

    async def fleet_events(self, request: Request) -> Response:
        filters = fleet.Filters.of(request.query_params)
        live = LiveJobs(self.home, limit=FLEET_LIMIT)

        def render() -> str:
            return fleet.render_fleet(fleet.gather(live, filters))

        async def events() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            last, quiet = "", 0.0
            async for _ in self._ticks(FLEET_TICK):
                html = await anyio.to_thread.run_sync(render)
                if html != last:
                    last, quiet = html, 0.0
                    yield event("fleet", {"html": html})
                else:
                    quiet += FLEET_TICK
                    if quiet >= KEEPALIVE:
                        quiet = 0.0
                        yield ": keepalive\n\n"

        return self._stream(events())

    async def job_events(self, request: Request) -> Response:
        try:
            job_id = self.store.resolve(request.path_params["job_id"])
        except JobIdError as exc:
            return self._missing(request, str(exc))
        run_id = request.query_params.get("run") or None
        # Where the transcript goes on: the browser's last event id when it reconnects,
        # else where the page's first look stopped.
        start = request.headers.get("last-event-id") or request.query_params.get("offset") or "0"
        offset = int(start) if start.isdigit() else 0
        live = LiveJobs(self.home)
        run_end_sent = request.query_params.get("ended") == "1"

        def look() -> tuple[str, list[str], bool]:
            """What to send now: the live part, the shown run's events, and whether that is
            all (the job ended, and so did the shown run, its transcript sent whole)."""
            nonlocal offset, run_end_sent
            state = service.job_state(self.store, job_id)
            data = jobpage.gather(live, state, run_id)
            html = jobpage.render_live(data)
            if run_id is None:
                if data.run_id is not None:  # the job's first run started: the page shows it
                    return html, [event("reload", {})], True
                return html, [], data.ended
            result = jobpage.read_result(self.home, run_id)  # before the transcript's last read
            run_dir = jobpage.run_dir(self.home, run_id)
            piece = read_piece(run_dir / "transcript.md", offset, final=result is not None)
            out = []
            if piece.html:
                offset = piece.offset
                out.append(event("transcript", {"html": piece.html}, str(offset)))
            if result is not None and not run_end_sent:
                run_end_sent = True
                out.append(event("run", {"html": jobpage.render_run_end(result, self.home)}))
            return html, out, data.ended and result is not None

        async def events() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            last, quiet = "", 0.0
            async for _ in self._ticks(JOB_TICK):
                html, run_events, done = await anyio.to_thread.run_sync(look)
                if html != last:
                    last, quiet = html, 0.0
                    yield event("job", {"html": html})
                for item in run_events:
                    quiet = 0.0
                    yield item
                if done:
                    yield event("end", {})
                    return
                quiet += JOB_TICK
                if quiet >= KEEPALIVE:
                    quiet = 0.0
                    yield ": keepalive\n\n"

        return self._stream(events())

    # ---- actions -------------------------------------------------------------

    async def stop(self, request: Request) -> Response:
        try:
            job_id = self.store.resolve(request.path_params["job_id"])
        except JobIdError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        state = await anyio.to_thread.run_sync(service.stop_job, self.store, job_id)
        return JSONResponse({"jobId": job_id, "status": state.get("status")})

    async def send(self, request: Request) -> Response:
        """A message to a running run's child (``subagents send``): its receipt."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        text = body.get("text") if isinstance(body, dict) else None
        mode = body.get("mode", "steer") if isinstance(body, dict) else None
        if not isinstance(text, str) or mode not in ("steer", "follow-up"):
            return JSONResponse(
                {"error": 'send a JSON object {"text": ..., "mode": "steer" | "follow-up"}'},
                status_code=400,
            )
        target = request.path_params["run_id"]
        try:
            receipt = await anyio.to_thread.run_sync(
                service.send_message,
                self.store,
                target,
                text,
                "steer" if mode == "steer" else "follow-up",
            )
        except JobIdError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except SubagentsError as exc:  # refused: ended, a CLI that takes no such message, …
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse(receipt)

    async def apply(self, request: Request) -> Response:
        def apply() -> list[str]:
            try:
                run_id = resolve_run(self.home, request.path_params["run_id"])
                _meta, result = read_run(self.home, run_id)
            except PlanError as exc:
                raise JobIdError(str(exc)) from None
            worktree = result.get("worktree") if result is not None else None
            repo = worktree.get("repo") if isinstance(worktree, dict) else None
            if not isinstance(repo, str):
                raise UsageError(
                    f"run {run_id} did not run in its own worktree (--isolate worktree)"
                )
            partial = request.query_params.get("partial") == "1"
            return api.apply_run(run_id, repo, partial=partial)

        try:
            changed = await anyio.to_thread.run_sync(apply)
        except JobIdError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except WorktreeError as exc:  # a conflict: nothing was changed
            return JSONResponse({"error": str(exc)}, status_code=409)
        except SubagentsError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"applied": changed})

    # ---- JSON for programs ---------------------------------------------------

    async def jobs_json(self, request: Request) -> Response:
        items = await anyio.to_thread.run_sync(lambda: service.list_jobs(FLEET_LIMIT, self.home))
        return JSONResponse(items)

    async def job_json(self, request: Request) -> Response:
        try:
            job_id = self.store.resolve(request.path_params["job_id"])
        except JobIdError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        state = await anyio.to_thread.run_sync(service.job_state, self.store, job_id)
        return JSONResponse(state)

    async def transcript_text(self, request: Request) -> Response:
        """A run's whole transcript.md, as plain text (a long one's page shows its end)."""
        try:
            run_id = resolve_run(self.home, request.path_params["run_id"])
        except PlanError as exc:
            return Response(str(exc), status_code=404, media_type="text/plain")
        path = jobpage.run_dir(self.home, run_id) / "transcript.md"
        if not path.is_file():
            return Response("no transcript yet", status_code=404, media_type="text/plain")
        return FileResponse(path, media_type="text/plain; charset=utf-8")

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        path = STATIC / name
        if "/" in name or path.suffix not in STATIC_TYPES or not path.is_file():
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(path.read_bytes(), media_type=STATIC_TYPES[path.suffix])


def create_app(*, token: str, port: int, home: Path) -> tuple[Any, Callable[[], None]]:
    """The app behind its access checks, and what stops its open streams."""
    web = WebApp(home)
    routes = [
        Route("/", web.fleet_page),
        Route("/job/{job_id}", web.job_page),
        Route("/cost", web.cost_page),
        Route("/events/fleet", web.fleet_events),
        Route("/events/job/{job_id}", web.job_events),
        Route("/api/jobs", web.jobs_json),
        Route("/api/jobs/{job_id}", web.job_json),
        Route("/api/jobs/{job_id}/stop", web.stop, methods=["POST"]),
        Route("/api/runs/{run_id}/apply", web.apply, methods=["POST"]),
        Route("/api/runs/{run_id}/send", web.send, methods=["POST"]),
        Route("/runs/{run_id}/transcript.md", web.transcript_text),
        Route("/static/{name}", web.static),
    ]
    return Access(Starlette(routes=routes), token, port), web.stopping.set
