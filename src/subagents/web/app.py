"""The web app's routes (Starlette): three pages, their live streams (Server-Sent Events, all
woken by one watcher of the store), the actions (stop a job, send to a run, apply an isolated
run's changes), a small JSON API, a run's files as text, and its own static files.

Every page is rendered whole on the server from its templates and its stream sends the same
fragments again as they change (the page's script puts each in place, keeping what did not
change), so the first look and the live one are one code path; reading the store is blocking
work and runs in a worker thread. Every id a request names is resolved by ``ids.target``;
every refusal is one of :data:`ERRORS`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from subagents import api, service
from subagents.errors import (
    DamagedRecord,
    JobBusyError,
    JobIdError,
    MessageRefused,
    SubagentsError,
    UsageError,
    WorktreeError,
)
from subagents.service import JobStore, LiveJobs, read_run
from subagents.web import again, costpage, fleet, jobpage, memo
from subagents.web.access import CSRF_SCOPE_KEY, Access
from subagents.web.ids import Target, target
from subagents.web.maprows import RowsQuery
from subagents.web.needs import WaitingSource, inbox_waiting
from subagents.web.templates import render, url
from subagents.web.transcript import FIRST_LOOK, block_start, next_piece
from subagents.web.watch import StoreWatcher

if TYPE_CHECKING:
    from subagents.types import ApprovalChoice, CostTotals

STATIC = Path(__file__).parent / "static"
FLEET_LIMIT = 200
# A stream says something at least this often, so a client gone is noticed.
KEEPALIVE = 10.0
# Each refusal's status: the nearest class of an error raised by a route (its MRO decides).
ERRORS: dict[type[Exception], int] = {
    JobIdError: 404,
    JobBusyError: 409,
    MessageRefused: 409,
    WorktreeError: 409,
    DamagedRecord: 422,
    UsageError: 400,
    SubagentsError: 409,
}
# The choices an inbox item may be decided with, as a request names them.
CHOICES: Mapping[object, ApprovalChoice] = {
    "allow": "allow",
    "always": "always",
    "deny": "deny",
    "answer": "answer",
}
SKIPPED = Markup(
    '<p class="muted">{} bytes of the transcript are not shown here: '
    '<a href="{}">the whole transcript</a> (as text).</p>'
)


def event(name: str, data: Mapping[str, str], event_id: str | None = None) -> str:
    """One Server-Sent Event; its data is one line of JSON (ASCII: no line breaks inside)."""
    head = f"event: {name}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return head + "data: " + json.dumps(data, allow_nan=False) + "\n\n"


def refusal(request: Request, exc: Exception) -> Response:
    """An error a route raised, as its status: JSON for the API, text for a run's files and
    the streams, a page naming the reason for a page."""
    status = next((ERRORS[c] for c in type(exc).__mro__ if c in ERRORS), 400)
    path = request.url.path
    if path.startswith("/api/"):
        return JSONResponse({"error": str(exc)}, status_code=status)
    if path.startswith(("/runs/", "/events/")):
        return PlainTextResponse(str(exc), status_code=status)
    frame = _frame(request, "not found" if status == 404 else "refused", "", "")
    html = render("problem.html", message=str(exc), **frame)
    return HTMLResponse(html, status_code=status)


async def _text_of(request: Request) -> str:
    """The ``text`` of a request's JSON object (UsageError: none, or empty)."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise UsageError('send a JSON object {"text": ...} with the message')
    return text


def _frame(request: Request, title: str, active: str, name: str) -> dict[str, str]:
    """What the base template needs besides the page's own values."""
    csrf = str(request.scope.get(CSRF_SCOPE_KEY, ""))
    return {"title": title, "csrf": csrf, "active": active, "name": name}


class WebApp:
    def __init__(self, home: Path, waiting: WaitingSource | None = None) -> None:
        self.home = home
        # What waits on a person (by default the approvals inbox): "Needs you" lists it.
        self.waiting = waiting if waiting is not None else inbox_waiting(home)
        self.store = JobStore(home)
        # Set as the server stops: open streams end at their next wake.
        self.stopping = threading.Event()
        self.watcher = StoreWatcher(home, self.stopping)
        self.streams = 0  # the live streams open now (each ends when its client goes)

    def _target(self, request: Request, job: bool = True) -> Target:
        """The job and run a request names (``{job_id}``/``{run_id}`` in its path, ``run``
        in its query): :func:`subagents.web.ids.target`."""
        params = request.path_params
        run = params.get("run_id") or request.query_params.get("run") or None
        return target(self.store, params.get("job_id") if job else None, run)

    # ---- pages ---------------------------------------------------------------

    async def fleet_page(self, request: Request) -> Response:
        filters = fleet.Filters.of(request.query_params)
        live = LiveJobs(self.home, limit=FLEET_LIMIT)
        view = await anyio.to_thread.run_sync(fleet.gather, live, filters, self.waiting)
        frame = _frame(request, "Fleet", "/", "fleet")
        return HTMLResponse(fleet.render_page_body(view, filters, **frame))

    async def job_page(self, request: Request) -> Response:
        def page() -> str:
            where = self._target(request)
            state = service.job_state(self.store, where.job_id)
            data = jobpage.gather(LiveJobs(self.home), state, where.run_id)
            frame = _frame(request, f"job {where.job_id}", "", "job")
            rows = RowsQuery.of(request.query_params)
            return jobpage.render_body(data, self.home, rows, **frame)

        return HTMLResponse(await anyio.to_thread.run_sync(page))

    async def cost_page(self, request: Request) -> Response:
        since = request.query_params.get("since", "").strip()
        session = request.query_params.get("session", "").strip()

        def report(by: str | None) -> CostTotals:
            return api.cost_report(session or None, since or None, by)

        frame = _frame(request, "Cost", "/cost", "cost")
        body = await anyio.to_thread.run_sync(
            lambda: costpage.render_body(report, since, session, **frame)
        )
        return HTMLResponse(body)

    # ---- live streams --------------------------------------------------------

    def _stream(self, events: AsyncIterator[str]) -> StreamingResponse:
        """A live stream of ``events``. When its client goes, the server cancels it where
        it waits (Starlette listens for the disconnect beside it), so nothing of it is left
        drawing or reading: :attr:`streams` counts it until then."""

        async def counted() -> AsyncIterator[str]:
            self.streams += 1
            try:
                async for item in events:
                    yield item
            finally:
                self.streams -= 1

        return StreamingResponse(
            counted(), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    async def fleet_events(self, request: Request) -> Response:
        filters = fleet.Filters.of(request.query_params)
        live = LiveJobs(self.home, limit=FLEET_LIMIT)

        def draw() -> str:
            # One drawing a change for all the streams of these filters, not one each (the
            # watcher in the key: its count is this server's).
            return memo.latest(
                ("fleet", self.watcher, filters),
                self.watcher.version,
                lambda: fleet.render_fleet(fleet.gather(live, filters, self.waiting)),
            )

        async def events() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            last = ""
            async for changed in self.watcher.changes(KEEPALIVE):
                html = await anyio.to_thread.run_sync(draw) if changed else last
                if html != last:
                    last = html
                    yield event("fleet", {"html": html})
                elif not changed:
                    yield ": keepalive\n\n"

        return self._stream(events())

    async def job_events(self, request: Request) -> Response:
        where = await anyio.to_thread.run_sync(self._target, request)
        job_id, run_id = where.job_id, where.run_id
        # Where the transcript goes on: the browser's last event id when it reconnects,
        # else where the page's first look stopped.
        start = request.headers.get("last-event-id") or request.query_params.get("offset") or "0"
        offset = int(start) if start.isdigit() else 0
        live = LiveJobs(self.home)
        run_end_sent = request.query_params.get("ended") == "1"
        rows = RowsQuery.of(request.query_params)  # which of a map's rows the page shows

        def look() -> tuple[str, bool]:
            """The live part, and whether that is all there is to show (the job ended)."""
            state = service.job_state(self.store, job_id)
            data = jobpage.gather(live, state, run_id)
            if run_id is None and data.run_id is not None:
                return "", True  # the job's first run started: the page reloads to show it
            return jobpage.render_live(data, self.home, rows), data.ended

        def more() -> tuple[list[str], bool]:
            """The shown run's next events (a piece of its transcript at most
            :data:`~subagents.web.transcript.CHUNK` long, its end), and whether the run ended
            and all was sent."""
            nonlocal offset, run_end_sent
            assert run_id is not None
            result = jobpage.read_result(self.home, run_id)  # before the transcript's read
            path = jobpage.run_dir(self.home, run_id) / "transcript.md"
            out = []
            size = path.stat().st_size if path.exists() else 0
            if size - offset > FIRST_LOOK:  # far behind: on from near the end, as a page is
                skip = block_start(path, size - FIRST_LOOK)
                whole = url(f"/runs/{run_id}/transcript.md")
                out.append(event("transcript", {"html": SKIPPED.format(skip - offset, whole)}))
                offset = skip
            piece = next_piece(path, offset, final=result is not None)
            if piece.html:
                offset = piece.offset
                out.append(event("transcript", {"html": piece.html}, str(offset)))
            if piece.offset < size and piece.html:
                return out, False  # more to read now
            if result is not None and not run_end_sent:
                run_end_sent = True
                out.append(event("run", {"html": jobpage.render_run_end(result, self.home)}))
            return out, result is not None

        async def events() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            last = ""
            async for changed in self.watcher.changes(KEEPALIVE):
                if not changed:
                    yield ": keepalive\n\n"
                    continue
                html, ended = await anyio.to_thread.run_sync(look)
                if run_id is None and ended and not html:
                    yield event("reload", {})
                    return
                if html != last:
                    last = html
                    yield event("job", {"html": html})
                run_done = run_id is None
                while run_id is not None:  # a piece an event; the client may go between
                    items, run_done = await anyio.to_thread.run_sync(more)
                    for item in items:
                        yield item
                    if run_done or not items:
                        break
                if ended and run_done:
                    yield event("end", {})
                    return

        return self._stream(events())

    # ---- actions -------------------------------------------------------------

    async def stop(self, request: Request) -> Response:
        where = await anyio.to_thread.run_sync(self._target, request)
        state = await anyio.to_thread.run_sync(service.stop_job, self.store, where.job_id)
        return JSONResponse({"jobId": where.job_id, "status": state.get("status")})

    async def rerun(self, request: Request) -> Response:
        """The job's plan again, as a new job: ``{"jobId"}`` of it."""
        where = await anyio.to_thread.run_sync(self._target, request)
        new = await anyio.to_thread.run_sync(again.rerun, self.store, where.job_id)
        return JSONResponse({"jobId": new})

    async def carry_on(self, request: Request) -> Response:
        """The run's child resumes its conversation with ``{"text"}``: ``{"jobId"}``."""
        text = await _text_of(request)
        where = await anyio.to_thread.run_sync(self._target, request, False)
        assert where.run_id is not None
        new = await anyio.to_thread.run_sync(again.carry_on, where.run_id, text)
        return JSONResponse({"jobId": new})

    async def send(self, request: Request) -> Response:
        """A message to a running run's child (``subagents send``): its receipt."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        text = body.get("text") if isinstance(body, dict) else None
        mode = body.get("mode", "steer") if isinstance(body, dict) else None
        if not isinstance(text, str) or mode not in ("steer", "follow-up"):
            raise UsageError('send a JSON object {"text": ..., "mode": "steer" | "follow-up"}')
        if not text.strip():
            raise UsageError("the message is empty")
        where = await anyio.to_thread.run_sync(self._target, request, False)
        assert where.run_id is not None
        receipt = await anyio.to_thread.run_sync(
            service.send_message,
            self.store,
            where.run_id,
            text,
            "steer" if mode == "steer" else "follow-up",
        )
        return JSONResponse(receipt)

    async def decide(self, request: Request) -> Response:
        """An inbox item decided (docs/approvals.md): ``{"choice": "allow" | "always" |
        "deny" | "answer", "reason"?, "answers"?}``; the decision, or why it cannot be taken
        (nothing changed)."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        choice, reason, answers = body.get("choice"), body.get("reason"), body.get("answers")
        texts = isinstance(answers, list) and all(isinstance(a, str) for a in answers)
        if (
            choice not in CHOICES
            or not isinstance(reason, str | None)
            or not (answers is None or texts)
        ):
            raise UsageError(
                'send a JSON object {"choice": "allow" | "always" | "deny" | "answer",'
                ' "reason"?: text, "answers"?: [text, …]}'
            )
        decision = await anyio.to_thread.run_sync(
            lambda: service.decide(
                request.path_params["item"],
                CHOICES[choice],
                reason=reason or None,
                answers=answers,
                home=self.home,
            )
        )
        return JSONResponse(decision)

    async def apply(self, request: Request) -> Response:
        def apply() -> list[str]:
            run_id = self._target(request, job=False).run_id
            assert run_id is not None
            _meta, result = read_run(self.home, run_id)
            worktree = result.get("worktree") if result is not None else None
            repo = worktree.get("repo") if isinstance(worktree, dict) else None
            if not isinstance(repo, str):
                raise UsageError(
                    f"run {run_id} did not run in its own worktree (--isolate worktree)"
                )
            partial = request.query_params.get("partial") == "1"
            return api.apply_run(run_id, repo, partial=partial)

        return JSONResponse({"applied": await anyio.to_thread.run_sync(apply)})

    # ---- JSON for programs, a run's files as text ----------------------------

    async def jobs_json(self, request: Request) -> Response:
        items = await anyio.to_thread.run_sync(lambda: service.list_jobs(FLEET_LIMIT, self.home))
        return JSONResponse(items)

    async def job_json(self, request: Request) -> Response:
        where = await anyio.to_thread.run_sync(self._target, request)
        state = await anyio.to_thread.run_sync(service.job_state, self.store, where.job_id)
        return JSONResponse(state)

    async def run_file(self, request: Request) -> Response:
        """A run's transcript.md or changes.patch whole, as plain text (a page shows a part)."""
        where = await anyio.to_thread.run_sync(self._target, request, False)
        assert where.run_id is not None
        name = request.url.path.rsplit("/", 1)[-1]
        path = jobpage.run_dir(self.home, where.run_id) / name
        if not path.is_file():
            return PlainTextResponse(f"no {name} (yet)", status_code=404)
        return FileResponse(path, media_type="text/plain; charset=utf-8")

    async def answer_text(self, request: Request) -> Response:
        """A run's answer (or why it failed) whole, as plain text."""
        where = await anyio.to_thread.run_sync(self._target, request, False)
        assert where.run_id is not None
        result = await anyio.to_thread.run_sync(read_run, self.home, where.run_id)
        run = result[1]
        if run is None:
            return PlainTextResponse("the run has not ended", status_code=404)
        text = run.get("finalText") if run.get("status") == "completed" else None
        text = text or run.get("diagnostics") or run.get("errorMessage") or ""
        return PlainTextResponse(str(text), media_type="text/plain; charset=utf-8")


def create_app(
    *, token: str, port: int, home: Path, waiting: WaitingSource | None = None
) -> tuple[Access, Callable[[], None]]:
    """The app behind its access checks, and what stops its open streams (``waiting``: the
    requests waiting on a person, for "Needs you"; default: the approvals inbox)."""
    web = WebApp(home, waiting)
    routes: list[Any] = [
        Route("/", web.fleet_page),
        Route("/job/{job_id}", web.job_page),
        Route("/cost", web.cost_page),
        Route("/events/fleet", web.fleet_events),
        Route("/events/job/{job_id}", web.job_events),
        Route("/api/jobs", web.jobs_json),
        Route("/api/jobs/{job_id}", web.job_json),
        Route("/api/jobs/{job_id}/stop", web.stop, methods=["POST"]),
        Route("/api/jobs/{job_id}/rerun", web.rerun, methods=["POST"]),
        Route("/api/runs/{run_id}/apply", web.apply, methods=["POST"]),
        Route("/api/runs/{run_id}/continue", web.carry_on, methods=["POST"]),
        Route("/api/runs/{run_id}/send", web.send, methods=["POST"]),
        Route("/api/approvals/{item}/decide", web.decide, methods=["POST"]),
        Route("/runs/{run_id}/transcript.md", web.run_file),
        Route("/runs/{run_id}/changes.patch", web.run_file),
        Route("/runs/{run_id}/answer.txt", web.answer_text),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers: dict[Any, Callable[[Request, Exception], Response]] = dict.fromkeys(ERRORS, refusal)
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.web = web
    return Access(app, token, port), web.stopping.set
