"""The MCP server: any MCP client can delegate tasks to child coding agents.

``subagents mcp`` serves over stdio; ``subagents mcp --http [--port N]`` serves streamable
HTTP on 127.0.0.1 only, behind a bearer token (``$SUBAGENTS_MCP_TOKEN``, else one generated
and printed on stderr). A thin layer over ``subagents.api``: the same job shape, the same
checks, the same progress lines as the command line.

Tools: ``subagent`` (one task, several in parallel, or a chain; foreground with progress, or
background), ``subagent_status``, ``subagent_result``, ``subagent_cancel``, ``list_agents``.
Resource template: ``subagent://jobs/{id}`` (the job's state as JSON); when a job started
through this server ends, subscribers get a resource-updated notification.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import math
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp_types import (
    CallToolResult,
    EmptyResult,
    SubscribeRequestParams,
    TextContent,
    ToolAnnotations,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, ConfigDict, Field

from subagents import api, ids, paths
from subagents.jobs import TERMINAL, JobIdError, JobStore
from subagents.jobspec import PlanError, parse_job
from subagents.orchestrator import Job
from subagents.progress import ProgressFormatter

SERVER_NAME = "subagents"
TOKEN_ENV = "SUBAGENTS_MCP_TOKEN"
DEFAULT_PORT = 8765
JOB_URI = "subagent://jobs/{id}"
PROGRESS_MAX_LEN = 200  # characters in one progress message
HEARTBEAT_SECONDS = 8.0  # a quiet run still reports at least this often (< 10 s)
MAX_WAIT_SECONDS = 600.0  # cap on subagent_result's wait_seconds
CANCEL_WAIT_SECONDS = 90.0  # how long a cancelled call waits for its job to end
WATCH_SLICE_SECONDS = 60.0  # a background watcher re-checks that the server still runs this often

INSTRUCTIONS = """\
Delegate tasks to child coding agents (pi, Claude Code, Codex, Gemini CLI, OpenCode) that run
headless in their own processes. Use `subagent` with `task` for one task, `tasks` for several
independent tasks side by side, or `chain` for steps where each can use the previous answer
through the literal text {previous}. Children start with no memory of this conversation: give
each task everything it needs. Long work: pass `background: true`, then `subagent_result`
(with `wait_seconds`) or `subagent_status`; `subagent_cancel` stops a job. `list_agents` shows
the named agents (model, tools, system prompt) you can pass as `agent`."""


class StepArg(BaseModel):
    """One task of a parallel job or one step of a chain."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(
        description="What the child agent should do; self-contained (the child sees nothing else)."
    )
    agent: str | None = Field(
        default=None,
        description="Named agent for this step (see list_agents); default: the call's `agent`.",
    )
    cwd: str | None = Field(
        default=None, description="Working directory for this step (relative to the call's cwd)."
    )
    model: str | None = Field(
        default=None, description="Model for this step (for pi: provider/id)."
    )
    backend: str | None = Field(
        default=None, description="Agent CLI: pi, claude, codex, gemini or opencode."
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Wall-clock limit for this step, seconds."
    )


StepList = list[str | StepArg]

SUBAGENT_DESCRIPTION = """\
Run a task on a child coding agent and return its final answer.

Give exactly one of:
- `task` (+ optional `agent`): one task;
- `tasks`: several independent tasks run side by side (answers come back in the same order);
- `chain`: steps run one after another; `{previous}` in a step is replaced by the previous answer.
Items of `tasks`/`chain` are strings or {task, agent?, cwd?, model?, backend?, timeout?}.
Top-level `agent`, `model`, `backend`, `timeout` apply to every step that does not set its own.

In the foreground (default) the call streams progress and returns the answer text plus the
structured job result (status, usage, each run's result). With `background: true` it returns
{"jobId": ...} at once; follow with subagent_status / subagent_result / subagent_cancel or
read the resource subagent://jobs/{jobId}. A failed job returns an error result with the
diagnostics: what went wrong, exit status, stderr tail, last tool calls."""


@dataclass
class _Watch:
    """A job started through this server, watched so its end can be announced."""

    job_id: str
    token: anyio.lowlevel.EventLoopToken


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cap(text: str, limit: int = PROGRESS_MAX_LEN) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _session_part(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "", text)[:32]
    return cleaned or ids.new_id()


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m{seconds % 60:02d}s"


def job_uri(job_id: str) -> str:
    return JOB_URI.replace("{id}", job_id)


# ---- turning results into text -------------------------------------------------------


def _run_label(index: int, run: dict[str, Any]) -> str:
    return f"[{index + 1}] {run.get('agent') or run.get('backend') or 'run'}"


def _failure_text(run: dict[str, Any]) -> str:
    return str(
        run.get("diagnostics") or run.get("errorMessage") or f"the run ended {run.get('status')}"
    ).rstrip()


def answer_text(result: dict[str, Any]) -> str:
    """The text a model reads: the answer; for parallel jobs each answer; on failure the diagnostics."""
    runs: list[dict[str, Any]] = result.get("runs") or []
    status = result.get("status")
    job_id = result.get("jobId")
    if result.get("mode") == "parallel":
        parts = [f"job {job_id} · parallel · {status}"]
        for i, run in enumerate(runs):
            body = (
                (run.get("finalText") or "").rstrip()
                if run.get("status") == "completed"
                else _failure_text(run)
            )
            parts.append(f"## {_run_label(i, run)}: {run.get('status')}\n\n{body}")
        return "\n\n".join(parts)
    if status == "completed":
        return str(result.get("finalText") or "").rstrip() or "(the agent gave an empty answer)"
    parts = [f"job {job_id} · {result.get('mode')} · {status}"]
    for i, run in enumerate(runs):
        if run.get("status") == "completed":
            continue
        parts.append(f"## {_run_label(i, run)}: {run.get('status')}\n\n{_failure_text(run)}")
    if not runs:
        parts.append(str(result.get("errorMessage") or "no run was started"))
    return "\n\n".join(parts)


RUN_KEYS = (
    "runId",
    "agent",
    "backend",
    "model",
    "status",
    "finalText",
    "errorMessage",
    "toolCalls",
    "durationMs",
)


def compact_result(result: dict[str, Any]) -> dict[str, Any]:
    """The structured result a parent model reads (some clients show it instead of the text):
    status and answer first, each run without its paths and bulky fields. The whole job
    result stays available as the resource ``subagent://jobs/{id}``."""
    runs = result.get("runs") or []
    out: dict[str, Any] = {"status": result.get("status"), "answer": result.get("finalText")}
    if result.get("mode") == "parallel":
        out["answer"] = [r.get("finalText") for r in runs]
    out.update(
        {
            "jobId": result.get("jobId"),
            "mode": result.get("mode"),
            "usage": result.get("usage"),
            "durationMs": result.get("durationMs"),
        }
    )
    out["runs"] = [{k: r.get(k) for k in RUN_KEYS if r.get(k) is not None} for r in runs]
    failures = [
        r.get("diagnostics")
        for r in runs
        if r.get("status") != "completed" and r.get("diagnostics")
    ]
    if failures:
        out["diagnostics"] = failures
    return out


def result_to_tool_result(result: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=answer_text(result))],
        structured_content=compact_result(result),
        is_error=result.get("status") != "completed",
    )


def status_summary(state: dict[str, Any], activity: str | None) -> dict[str, Any]:
    """A compact view of a job's state: what subagent_status answers."""
    keys = (
        "jobId",
        "mode",
        "status",
        "background",
        "session",
        "agents",
        "startedAt",
        "completedAt",
        "durationMs",
        "usage",
        "runIds",
        "errorMessage",
    )
    summary = {k: state[k] for k in keys if state.get(k) is not None}
    if activity:
        summary["activity"] = activity
    if state.get("runs") is not None:
        summary["runs"] = [
            {
                k: r.get(k)
                for k in (
                    "runId",
                    "agent",
                    "backend",
                    "status",
                    "errorMessage",
                    "durationMs",
                    "toolCalls",
                )
            }
            for r in state["runs"]
        ]
        summary["finalText"] = state.get("finalText")
    return summary


# ---- the server --------------------------------------------------------------------------


class SubagentsMCP:
    """One MCP server (one process): its tools, its job resource and its running jobs."""

    def __init__(self, home: Any = None) -> None:
        self.home = home or paths.state_home()
        self.store = JobStore(self.home)
        self.session_id = (
            f"mcp-{ids.new_id()}"  # one lifecycle session per server process / connection
        )
        self.bus = InMemorySubscriptionBus()
        self.mcp: MCPServer[Any] = MCPServer(
            SERVER_NAME,
            instructions=INSTRUCTIONS,
            version=_version(),
            subscriptions=self.bus,
            log_level="WARNING",
        )
        self._running: dict[str, Job] = {}  # foreground jobs driven here
        self._subscribers: dict[
            str, dict[str, ServerSession]
        ] = {}  # uri -> connection key -> session
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._register()

    def close(self) -> None:
        self._closed.set()

    # ---- sessions and notifications ------------------------------------------------

    def session_for(self, ctx: Context | None) -> str:
        """``mcp-<id>``: per HTTP session (its Mcp-Session-Id), else per server process."""
        headers = None
        with contextlib.suppress(Exception):
            headers = ctx.headers if ctx is not None else None
        sid = headers.get("mcp-session-id") if headers else None
        return f"mcp-{_session_part(sid)}" if sid else self.session_id

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

    async def notify_job_updated(self, job_id: str) -> None:
        """Tell subscribers that ``subagent://jobs/<id>`` changed (2026 listen streams and 2025 subscriptions)."""
        uri = job_uri(job_id)
        with contextlib.suppress(Exception):
            await self.bus.publish(ResourceUpdated(uri=uri))
        with self._lock:
            sessions = list(self._subscribers.get(uri, {}).items())
        for key, session in sessions:
            try:
                with anyio.fail_after(5):
                    await session.send_resource_updated(uri)
            except Exception:  # the connection is gone: forget it
                with self._lock:
                    self._subscribers.get(uri, {}).pop(key, None)

    def _watch_in_background(self, watch: _Watch) -> None:
        """A watcher thread per background job: when the job ends, notify subscribers."""

        def run() -> None:
            while not self._closed.is_set():
                try:
                    done = api.wait_job(self.store, watch.job_id, timeout=WATCH_SLICE_SECONDS)
                except Exception:
                    return
                if done is not None:
                    with contextlib.suppress(Exception):
                        anyio.from_thread.run(
                            self.notify_job_updated, watch.job_id, token=watch.token
                        )
                    return

        threading.Thread(
            target=run, name=f"subagents-mcp-watch-{watch.job_id}", daemon=True
        ).start()

    # ---- tools -------------------------------------------------------------------------

    def _register(self) -> None:
        mcp = self.mcp
        read_only = ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        )
        mcp.add_tool(
            self.subagent,
            name="subagent",
            title="Delegate to a subagent",
            description=SUBAGENT_DESCRIPTION,
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=False,
                open_world_hint=True,
            ),
        )
        mcp.add_tool(
            self.subagent_status,
            name="subagent_status",
            title="Job status",
            annotations=read_only,
            description="The state of a job: status, current activity, runs. `job_id` is any unique prefix of the id.",
        )
        mcp.add_tool(
            self.subagent_result,
            name="subagent_result",
            title="Job result",
            annotations=read_only,
            description=(
                "The answer of a job (as `subagent` returns it), waiting up to `wait_seconds` (max 600) for it to end. "
                "If the job is still running when the wait ends, says so: call again to keep waiting."
            ),
        )
        mcp.add_tool(
            self.subagent_cancel,
            name="subagent_cancel",
            title="Cancel a job",
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=True,
                open_world_hint=False,
            ),
            description="Stop a job: every run's process group is killed and the job ends 'aborted'.",
        )
        mcp.add_tool(
            self.list_agents,
            name="list_agents",
            title="List agents",
            annotations=read_only,
            description="The named agents `subagent` accepts as `agent`: name, source, description, backend, model, tools.",
        )
        mcp.resource(
            JOB_URI,
            name="job",
            title="Subagent job",
            mime_type="application/json",
            description="A job's state (job.json): status, runs, usage, final answer when done.",
        )(self.job_resource)
        # 2025-era clients subscribe with resources/subscribe (MCPServer serves only the 2026 listen
        # streams): serve it on the low-level server so both kinds of client get job-ended updates.
        lowlevel = self.mcp._lowlevel_server
        lowlevel.add_request_handler(
            "resources/subscribe", SubscribeRequestParams, self._on_subscribe
        )
        lowlevel.add_request_handler(
            "resources/unsubscribe", UnsubscribeRequestParams, self._on_unsubscribe
        )

    def _resolve(self, job_id: str) -> str:
        try:
            return self.store.resolve(job_id)
        except JobIdError as exc:
            raise ToolError(str(exc)) from None

    async def subagent(
        self,
        ctx: Context,
        task: Annotated[
            str | None, Field(description="One task for one child agent (self-contained).")
        ] = None,
        agent: Annotated[
            str | None,
            Field(
                description="Named agent (see list_agents); for `tasks`/`chain`, the default for every step."
            ),
        ] = None,
        tasks: Annotated[
            StepList | None, Field(description="Several independent tasks, run side by side.")
        ] = None,
        chain: Annotated[
            StepList | None,
            Field(
                description="Steps run in order; '{previous}' in a step is the previous step's answer."
            ),
        ] = None,
        cwd: Annotated[
            str | None,
            Field(description="Working directory for the child(ren); default: the server's."),
        ] = None,
        model: Annotated[
            str | None,
            Field(description="Model for every step that does not set one (for pi: provider/id)."),
        ] = None,
        backend: Annotated[
            str | None,
            Field(
                description="Agent CLI for every step that does not set one: pi, claude, codex, gemini, opencode."
            ),
        ] = None,
        timeout: Annotated[
            float | None, Field(gt=0, description="Wall-clock limit per run, seconds.")
        ] = None,
        background: Annotated[
            bool, Field(description="Return {jobId} at once; the job runs on in a detached driver.")
        ] = False,
        concurrency: Annotated[
            int | None,
            Field(ge=1, description="For `tasks`: how many run at once (default from config, 4)."),
        ] = None,
    ) -> CallToolResult:
        mode, spec = build_spec(
            task=task,
            tasks=tasks,
            chain=chain,
            agent=agent,
            model=model,
            backend=backend,
            timeout=timeout,
            concurrency=concurrency,
        )
        session = self.session_for(ctx)
        try:
            prepared = await anyio.to_thread.run_sync(
                lambda: api.prepare_job(spec, cwd=cwd, session=session, background=background)
            )
        except api.BadRequest as exc:
            raise ToolError(rename_fields(str(exc), mode)) from None
        token = anyio.lowlevel.current_token()
        if background:
            job_id = await anyio.to_thread.run_sync(api.start_background, prepared)
            self._watch_in_background(_Watch(job_id, token))
            text = (
                json.dumps({"jobId": job_id}) + "\nThe job runs in the background: follow it with "
                f'subagent_status / subagent_result(job_id="{job_id}", wait_seconds=…) or read {job_uri(job_id)}.'
            )
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content={"jobId": job_id}
            )
        result = await self._run_foreground(ctx, prepared)
        return result_to_tool_result(result)

    async def _run_foreground(self, ctx: Context, prepared: api.PreparedJob) -> dict[str, Any]:
        """Drive the job in a worker thread, streaming progress; a cancelled call aborts the job."""
        from subagents.lifecycle import lifecycle_for

        job = Job(prepared.store, prepared.job_id, prepared.plan)
        lifecycle = lifecycle_for(prepared.store.home, prepared.plan, background=False)
        reporter = _ProgressReporter(ctx, prepared)
        token = anyio.lowlevel.current_token()
        finished = threading.Event()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = job.run(on_event=reporter.on_event, lifecycle=lifecycle)
            except BaseException as exc:
                box["error"] = exc
            finally:
                finished.set()
                with contextlib.suppress(Exception):
                    anyio.from_thread.run_sync(reporter.close, token=token)

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
            await (
                reporter.pump()
            )  # returns once the job has ended: the worker closes the reporter last
        finally:
            if not finished.is_set():
                # The call was cancelled (or the client went away): abort the job and wait for its
                # end, shielded so the cleanup itself cannot be cut short.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(job.cancel)
                    await anyio.to_thread.run_sync(finished.wait, CANCEL_WAIT_SECONDS)
                    await self.notify_job_updated(prepared.job_id)
            with self._lock:
                self._running.pop(prepared.job_id, None)
        if "error" in box:
            raise box["error"]
        await self.notify_job_updated(prepared.job_id)
        result: dict[str, Any] = box["result"]
        return result

    async def subagent_status(
        self,
        job_id: Annotated[str, Field(description="The job id (or any unique prefix).")],
    ) -> CallToolResult:
        jid = self._resolve(job_id)
        state, activity = await anyio.to_thread.run_sync(self._state_and_activity, jid)
        summary = status_summary(state, activity)
        text = api.describe_job(state)
        if activity and state.get("status") not in TERMINAL:
            text += f"\nnow: {activity}"
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=summary
        )

    def _state_and_activity(self, job_id: str) -> tuple[dict[str, Any], str | None]:
        state = api.job_state(self.store, job_id)
        activity = None
        if state.get("status") not in TERMINAL:
            activity = api.current_activity(self.store.home, state.get("runIds") or [])
        return state, activity

    async def subagent_result(
        self,
        ctx: Context,
        job_id: Annotated[str, Field(description="The job id (or any unique prefix).")],
        wait_seconds: Annotated[
            float,
            Field(
                ge=0,
                description="Wait up to this many seconds for the job to end (max 600; 0: answer at once).",
            ),
        ] = 0,
    ) -> CallToolResult:
        jid = self._resolve(job_id)
        wait = min(max(0.0, float(wait_seconds)), MAX_WAIT_SECONDS)
        deadline = time.monotonic() + wait
        started = time.monotonic()
        progress = 0
        while True:
            left = deadline - time.monotonic()
            result = await anyio.to_thread.run_sync(
                functools.partial(
                    api.wait_job, self.store, jid, timeout=max(0.0, min(left, HEARTBEAT_SECONDS))
                ),
                abandon_on_cancel=True,
            )
            if result is not None:
                return result_to_tool_result(result)
            if time.monotonic() >= deadline:
                break
            state, activity = await anyio.to_thread.run_sync(self._state_and_activity, jid)
            progress += 1
            with contextlib.suppress(Exception):
                await ctx.report_progress(
                    progress,
                    None,
                    _cap(
                        f"still running: {activity or state.get('status')} "
                        f"({_elapsed(time.monotonic() - started)})"
                    ),
                )
        state, activity = await anyio.to_thread.run_sync(self._state_and_activity, jid)
        if state.get("status") in TERMINAL and "runs" in state:
            return result_to_tool_result(state)
        text = (
            f"job {jid} is still running ({state.get('status')}"
            + (f": {activity}" if activity else "")
            + "). Call subagent_result again with wait_seconds to keep waiting, or subagent_cancel to stop it."
        )
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=status_summary(state, activity),
        )

    async def subagent_cancel(
        self,
        job_id: Annotated[str, Field(description="The job id (or any unique prefix).")],
    ) -> CallToolResult:
        jid = self._resolve(job_id)
        with self._lock:
            local = self._running.get(jid)
        with anyio.CancelScope(shield=True):  # a stop half done is worse than a slow answer
            if local is not None:
                # Driven by this server: stop it here (signalling its driver would stop the server).
                await anyio.to_thread.run_sync(local.cancel)
                ended = await anyio.to_thread.run_sync(
                    functools.partial(api.wait_job, self.store, jid, CANCEL_WAIT_SECONDS)
                )
                state = ended or api.job_state(self.store, jid)
            else:
                before = await anyio.to_thread.run_sync(api.job_state, self.store, jid)
                if before.get("status") in TERMINAL:
                    text = f"job {jid} had already ended: {before.get('status')}"
                    return CallToolResult(
                        content=[TextContent(type="text", text=text)],
                        structured_content=status_summary(before, None),
                    )
                state = await anyio.to_thread.run_sync(api.stop_job, self.store, jid)
        text = f"job {jid}: {state.get('status')}"
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=status_summary(state, None),
        )

    async def list_agents(self) -> CallToolResult:
        found = await anyio.to_thread.run_sync(api.discover_agents)
        agents = [
            {
                "name": a.name,
                "source": a.source,
                "description": a.description,
                "backend": a.backend,
                "model": a.model,
                "tools": a.tools,
                "path": str(a.path) if a.path else None,
            }
            for a in sorted(found.agents.values(), key=lambda a: a.name)
        ]
        lines = [f"- {a['name']} ({a['source']}): {a['description']}" for a in agents] or [
            "no agents found"
        ]
        lines += [f"warning: {p}" for p in found.problems]
        return CallToolResult(
            content=[TextContent(type="text", text="\n".join(lines))],
            structured_content={"agents": agents, "problems": [str(p) for p in found.problems]},
        )

    async def job_resource(self, id: str) -> str:  # the URI template names it {id}
        try:
            jid = self.store.resolve(id)
        except JobIdError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        state = await anyio.to_thread.run_sync(api.job_state, self.store, jid)
        return json.dumps(state, ensure_ascii=False, indent=1)


class _ProgressReporter:
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
            text = _cap(f"[{index + 1}] {line}" if self.multi else line)
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
        return _cap(f"still running: {what} ({_elapsed(time.monotonic() - self.started)})")

    async def send(self, message: str) -> None:
        self.count += 1
        with contextlib.suppress(Exception):  # progress is best effort: never fail the job over it
            await self.ctx.report_progress(self.count, None, _cap(message))

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


# ---- building the job spec from the tool's arguments ---------------------------------------


def build_spec(
    *,
    task: str | None,
    tasks: StepList | None,
    chain: StepList | None,
    agent: str | None = None,
    model: str | None = None,
    backend: str | None = None,
    timeout: float | None = None,
    concurrency: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """The job shape (``{mode, tasks|steps, concurrency?}``) for the ``subagent`` tool's arguments."""
    given = [
        name
        for name, value in (("task", task), ("tasks", tasks), ("chain", chain))
        if value is not None
    ]
    if not given:
        raise ToolError(
            "no task given: pass 'task' (one task), 'tasks' (several, in parallel) or 'chain' (steps in order)"
        )
    if len(given) > 1:
        raise ToolError(
            f"give only one of 'task', 'tasks' or 'chain', not {' and '.join(repr(g) for g in given)}"
        )
    defaults: dict[str, Any] = {
        "agent": agent,
        "model": model,
        "backend": backend,
        "timeout": timeout,
    }

    def step(item: str | StepArg) -> dict[str, Any]:
        data: dict[str, Any] = (
            {"task": item} if isinstance(item, str) else item.model_dump(exclude_none=True)
        )
        for key, value in defaults.items():
            if value is not None and data.get(key) is None:
                data[key] = value
        return data

    if task is not None:
        if not task.strip():
            raise ToolError("task: the task is empty")
        mode, key, items = "single", "steps", [step(task)]
    elif tasks is not None:
        if not tasks:
            raise ToolError("tasks: the list is empty (give at least one task)")
        mode, key, items = "parallel", "tasks", [step(t) for t in tasks]
    else:
        assert chain is not None
        if not chain:
            raise ToolError("chain: the list is empty (give at least one step)")
        mode, key, items = "chain", "steps", [step(t) for t in chain]
    spec: dict[str, Any] = {"mode": mode, key: items}
    if concurrency is not None:
        spec["concurrency"] = concurrency
    try:
        parse_job(spec, "subagent")  # checked here so the message names this tool's fields
    except PlanError as exc:
        raise ToolError(rename_fields(str(exc), mode)) from None
    return mode, spec


def rename_fields(message: str, mode: str) -> str:
    """Job-shape field names → this tool's (``steps.0.agent`` → ``agent`` or ``chain.0.agent``)."""
    message = re.sub(r"^(subagent|job): ", "", message)
    if mode == "single":
        return re.sub(r"\b(steps|tasks)\.0\.", "", message)
    if mode == "chain":
        return re.sub(r"\bsteps\.(\d+)\.", r"chain.\1.", message)
    return message


# ---- serving ---------------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("subagents")
    except PackageNotFoundError:
        return "0"


async def _until_signalled(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main``; SIGTERM/SIGINT cancel it cleanly, so foreground jobs are aborted, not orphaned."""
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(
                signal.SIGTERM, signal.SIGINT, signal.SIGHUP
            ) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch_signals)
        await main()
        tg.cancel_scope.cancel()


def serve_stdio() -> None:
    server = SubagentsMCP()
    try:
        anyio.run(_until_signalled, server.mcp.run_stdio_async)
    finally:
        server.close()


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, else 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        auth = b""
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                auth = value
                break
        scheme, _, given = auth.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "invalid_token",
                "error_description": "missing or wrong bearer token (see SUBAGENTS_MCP_TOKEN)",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="subagents", error="invalid_token"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_token(env: dict[str, str] | None = None) -> tuple[str, bool]:
    """The bearer token: ``$SUBAGENTS_MCP_TOKEN``, else ``mcp_token`` in the user config, else a
    new random one (second item True)."""
    from subagents.config import load_settings

    env = dict(os.environ) if env is None else env
    token = (load_settings(env=env).mcp_token or "").strip()  # the env var overrides the file
    if token:
        return token, False
    return secrets.token_urlsafe(32), True


def serve_http(port: int = DEFAULT_PORT) -> None:
    """Streamable HTTP on 127.0.0.1:``port`` (0: any free port) at ``/mcp``, behind a bearer token."""
    import uvicorn

    token, generated = http_token()
    server = SubagentsMCP()
    app = BearerAuth(server.mcp.streamable_http_app(host="127.0.0.1"), token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise SystemExit(
            f"subagents: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"
        ) from None
    actual = sock.getsockname()[1]
    print(
        f"subagents mcp: serving streamable HTTP at http://127.0.0.1:{actual}/mcp",
        file=sys.stderr,
        flush=True,
    )
    if generated:
        print(
            f"subagents mcp: bearer token (set {TOKEN_ENV} to choose one): {token}",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(f"subagents mcp: bearer token from {TOKEN_ENV}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    try:
        anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))
    finally:
        server.close()
        sock.close()


__all__ = ["SubagentsMCP", "answer_text", "build_spec", "serve_http", "serve_stdio"]
