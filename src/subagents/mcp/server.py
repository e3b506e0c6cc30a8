"""The MCP server: any MCP client can delegate tasks to child coding agents.

``subagents mcp`` serves over stdio; ``subagents mcp --http [--port N]`` serves streamable
HTTP on 127.0.0.1 only, behind a bearer token (``$SUBAGENTS_MCP_TOKEN``, else one generated
and printed on stderr). A thin layer over ``subagents.api``: the same job shape, the same
checks, the same progress lines as the command line.

Tools: ``subagent`` (one task, several in parallel, or a chain; foreground with progress, or
background), ``subagent_map`` (a task template over a dataset: maptool.py), ``subagent_status``, ``subagent_result``, ``subagent_send`` (a message to a
running child), ``subagent_inbox`` and ``subagent_decide`` (approvals: inboxtool.py),
``subagent_cancel``, ``list_agents``.
Resource template: ``subagent://jobs/{id}`` (the job's state as JSON); when a job started
through this server ends, subscribers get a resource-updated notification.

One class: its tools and resources share the server's state (the store, the lifecycle
session). Beside it: the foreground jobs it drives (``foreground``), the job-ended
notifications (``notify``), the tools' arguments (``args``), the text they answer
(``results``), progress (``progress``) and serving (``transport``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from subagents import api, service
from subagents.core import ids, paths
from subagents.errors import JobIdError, UsageError
from subagents.lifecycle import notices
from subagents.mcp.args import (
    INSTRUCTIONS,
    SUBAGENT_DESCRIPTION,
    build_spec,
    in_the_tool,
    tool_signature,
)
from subagents.mcp.foreground import CANCEL_WAIT_SECONDS, ForegroundJobs
from subagents.mcp.inboxtool import (
    DECIDE_DESCRIPTION,
    DECIDE_TITLE,
    INBOX_DESCRIPTION,
    INBOX_TITLE,
    subagent_decide,
    subagent_inbox,
)
from subagents.mcp.maptool import MAP_DESCRIPTION, MAP_TITLE, subagent_map
from subagents.mcp.notify import JobNotifier
from subagents.mcp.progress import HEARTBEAT_SECONDS
from subagents.mcp.results import (
    JOB_URI,
    background_started,
    cap,
    elapsed,
    result_to_tool_result,
    session_part,
    status_summary,
)
from subagents.mcp.tasks import JobTasks, in_background, started
from subagents.present import outcome
from subagents.present.figures import rounded_usage
from subagents.service import TERMINAL, JobStore

if TYPE_CHECKING:
    from subagents.types import JobState

SERVER_NAME = "subagents"
SUBAGENT_TITLE = "Run a subagent"  # Claude Code cuts a dialog's "server — title" at 48 characters
MAX_WAIT_SECONDS = 600.0  # cap on subagent_result's wait_seconds


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("subagents")
    except PackageNotFoundError:
        return "0"


# ---- the server --------------------------------------------------------------------------


class SubagentsMCP:
    """One MCP server (one process): its tools, its job resource and its running jobs."""

    def __init__(self, session: str | None = None) -> None:
        # The environment's state home: what the jobs it prepares and describes read too.
        self.home = paths.state_home()
        self.store = JobStore(self.home)
        # One lifecycle session per server process / connection, unless the caller names it
        # (the Claude Code plugin: the Claude session's, so its hook finds the jobs' ends).
        self.session_id = session or f"mcp-{ids.new_id()}"
        # The Claude Code plugin's session: its monitor and hook tell the model of job ends.
        self.announced = session is not None and session.startswith(notices.CLAUDE_PREFIX)
        self.notifier = JobNotifier(self.store)
        self.foreground = ForegroundJobs()
        self.mcp: MCPServer[Any] = MCPServer(
            SERVER_NAME,
            instructions=INSTRUCTIONS,
            version=version(),
            subscriptions=self.notifier.bus,
            log_level="WARNING",
            # Not for the Claude Code plugin: Claude Code 2.1.330 declares tasks and would make
            # every call its own background task, told again by its notification (the plugin
            # tells ends itself) and without a foreground call's progress or outcome line.
            extensions=[] if self.announced else [JobTasks(self.store)],
        )
        self._register()

    def close(self) -> None:
        self.notifier.close()

    # ---- sessions ----------------------------------------------------------------------

    def session_for(self, ctx: Context | None) -> str:
        """``mcp-<id>``: per HTTP session (its Mcp-Session-Id), else per server process."""
        headers = None
        with contextlib.suppress(Exception):
            headers = ctx.headers if ctx is not None else None
        sid = headers.get("mcp-session-id") if headers else None
        return f"mcp-{session_part(sid)}" if sid else self.session_id

    # ---- tools -------------------------------------------------------------------------

    def _register(self) -> None:
        mcp = self.mcp

        def hints(
            title: str, *, reads: bool, idempotent: bool, open_world: bool
        ) -> ToolAnnotations:
            return ToolAnnotations(
                title=title,
                read_only_hint=reads,
                destructive_hint=not reads,
                idempotent_hint=idempotent,
                open_world_hint=open_world,
            )

        def read_only(title: str) -> ToolAnnotations:
            return hints(title, reads=True, idempotent=True, open_world=False)

        # subagent and continue start child agents: they act on the world, each call anew.
        def starts_agents(title: str) -> ToolAnnotations:
            return hints(title, reads=False, idempotent=False, open_world=True)

        # A title is given twice: Claude Code names a tool (its permission dialog, the
        # transcript) by the annotations' title, other clients by the tool's own.
        async def subagent(ctx: Context, **args: Any) -> CallToolResult:
            return await self.subagent(ctx, **args)

        # Its arguments as the server shows and checks them: made from the options' definition.
        subagent.__dict__["__signature__"] = tool_signature(Context)
        subagent.__annotations__ = {"ctx": Context, "return": CallToolResult}
        mcp.add_tool(
            subagent,
            name="subagent",
            title=SUBAGENT_TITLE,
            description=SUBAGENT_DESCRIPTION,
            annotations=starts_agents(SUBAGENT_TITLE),
        )
        mcp.add_tool(
            subagent_map,
            name="subagent_map",
            title=MAP_TITLE,
            description=MAP_DESCRIPTION,
            annotations=starts_agents(MAP_TITLE),
        )
        mcp.add_tool(
            self.continue_,
            name="continue",
            title="Continue a run",
            description=(
                "Continue a finished run (its runId from a result): the child resumes its own "
                "conversation with `task` and sees everything it said and did before. A new run "
                "and job, answered like `subagent`; an isolated run goes on in its own branch. "
                "pi, claude, codex, gemini and opencode runs can be continued."
            ),
            annotations=starts_agents("Continue a run"),
        )
        mcp.add_tool(
            self.subagent_status,
            name="subagent_status",
            title="Job status",
            annotations=read_only("Job status"),
            description=(
                "The state of a job: status, current activity, runs. `job_id` is any unique prefix of the id. "
                "Without `job_id`: this session's totals over its finished jobs (jobs, runs, tokens, cost)."
            ),
        )
        mcp.add_tool(
            self.subagent_result,
            name="subagent_result",
            title="Job result",
            annotations=read_only("Job result"),
            description=(
                "The answer of a job (as `subagent` returns it), waiting up to `wait_seconds` (max 600) for it to end. "
                "If the job is still running when the wait ends, says so: call again to keep waiting."
            ),
        )
        mcp.add_tool(
            self.subagent_send,
            name="subagent_send",
            title="Message a running subagent",
            annotations=hints(
                "Message a running subagent", reads=False, idempotent=False, open_world=False
            ),
            description=(
                "Send a message to a running child: `id` is its run id, or its job id while one run "
                "of the job is going. mode 'steer' (default) puts it into the running conversation as "
                "soon as the child's CLI allows (after its current tool calls): correct a child that "
                "went off track. mode 'follow-up' is delivered when the child would otherwise end, "
                "and the run goes on with it. Answers the receipt: queued or delivered; a message "
                "the run cannot take (it ended; gemini and opencode take no steer) is an error, and "
                "nothing is sent."
            ),
        )
        mcp.add_tool(
            subagent_inbox,
            name="subagent_inbox",
            title=INBOX_TITLE,
            description=INBOX_DESCRIPTION,
            annotations=read_only(INBOX_TITLE),
        )
        mcp.add_tool(
            subagent_decide,
            name="subagent_decide",
            title=DECIDE_TITLE,
            description=DECIDE_DESCRIPTION,
            annotations=hints(DECIDE_TITLE, reads=False, idempotent=False, open_world=False),
        )
        mcp.add_tool(
            self.subagent_cancel,
            name="subagent_cancel",
            title="Cancel a job",
            annotations=hints("Cancel a job", reads=False, idempotent=True, open_world=False),
            description="Stop a job: every run's process group is killed and the job ends 'aborted'.",
        )
        mcp.add_tool(
            self.list_agents,
            name="list_agents",
            title="List agents",
            annotations=read_only("List agents"),
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
        self.notifier.install(self.mcp._lowlevel_server)

    def _resolve(self, job_id: str) -> str:
        try:
            return self.store.resolve(job_id)
        except JobIdError as exc:
            raise ToolError(str(exc)) from None

    async def subagent(self, ctx: Context, **args: Any) -> CallToolResult:
        """The ``subagent`` tool: its arguments are ``args.SubagentArgs``' (its options
        those of subagents/options.py), checked by the server before this is called."""
        mode, spec = build_spec(**args)
        session = self.session_for(ctx)
        cwd, background = args.get("cwd"), in_background(bool(args.get("background")))
        try:
            prepared = await anyio.to_thread.run_sync(
                lambda: service.prepare_job(spec, cwd=cwd, session=session, background=background)
            )
        except api.BadRequest as exc:
            raise ToolError(in_the_tool(exc, mode)) from None
        return await self._start(ctx, prepared, background)

    async def continue_(
        self,
        ctx: Context,
        run_id: Annotated[
            str, Field(description="The run to continue (any unique prefix of its id).")
        ],
        task: Annotated[str, Field(description="The follow-up for the child.")],
        background: Annotated[
            bool, Field(description="Return {jobId} at once; the job runs on in a detached driver.")
        ] = False,
    ) -> CallToolResult:
        session = self.session_for(ctx)
        background = in_background(background)
        try:
            prepared = await anyio.to_thread.run_sync(
                lambda: service.prepare_continuation(
                    run_id, task, background=background, session=session
                )
            )
        except api.BadRequest as exc:
            raise ToolError(str(exc)) from None
        return await self._start(ctx, prepared, background)

    async def _start(
        self, ctx: Context, prepared: service.PreparedJob, background: bool
    ) -> CallToolResult:
        """Run a prepared job: in the foreground with progress, or detached."""
        token = anyio.lowlevel.current_token()
        if background:
            job_id = await anyio.to_thread.run_sync(service.start_background, prepared)
            started(job_id)  # the call is a task: its handle names this job
            self.notifier.watch_in_background(job_id, token)
            return background_started(job_id, prepared.plan.labels(), self.announced)
        result = await self.foreground.run(ctx, prepared, self.notifier.job_updated)
        return result_to_tool_result(result)

    async def subagent_status(
        self,
        ctx: Context,
        job_id: Annotated[
            str | None,
            Field(
                description="The job id (or any unique prefix); omit it for the session's totals."
            ),
        ] = None,
    ) -> CallToolResult:
        if job_id is None:
            return await anyio.to_thread.run_sync(self._session_totals, self.session_for(ctx))
        jid = self._resolve(job_id)
        state, activity = await anyio.to_thread.run_sync(self._state_and_activity, jid)
        summary = status_summary(state, activity)
        text = service.describe_job(state)
        if activity and state.get("status") not in TERMINAL:
            text += f"\nnow: {activity}"
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=summary
        )

    def _session_totals(self, session: str) -> CallToolResult:
        """The session's finished jobs totalled, as ``subagents cost --session`` counts them."""
        from subagents.lifecycle import cost

        total = cost.totals(cost.end_entries(self.home, session))["total"]
        return CallToolResult(
            content=[TextContent(type="text", text=f"session {session}: {cost.describe(total)}")],
            structured_content={"session": session, "total": rounded_usage(total)},
        )

    def _state_and_activity(self, job_id: str) -> tuple[JobState, str | None]:
        state = service.job_state(self.store, job_id)
        activity = None
        if state.get("status") not in TERMINAL:
            activity = service.current_activity(self.store.home, state.get("runIds") or [])
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
                    service.wait_job,
                    self.store,
                    jid,
                    timeout=max(0.0, min(left, HEARTBEAT_SECONDS)),
                ),
                abandon_on_cancel=True,
            )
            if result is not None:
                return await self._fetched(jid, result_to_tool_result(result))
            if time.monotonic() >= deadline:
                break
            state, activity = await anyio.to_thread.run_sync(self._state_and_activity, jid)
            progress += 1
            with contextlib.suppress(Exception):
                await ctx.report_progress(
                    progress,
                    None,
                    cap(
                        f"still running: {activity or state.get('status')} "
                        f"({elapsed(time.monotonic() - started)})"
                    ),
                )
        state, activity = await anyio.to_thread.run_sync(self._state_and_activity, jid)
        if state.get("status") in TERMINAL and "runs" in state:
            return await self._fetched(jid, result_to_tool_result(state))
        text = (
            f"job {jid} is still running ({state.get('status')}"
            + (f": {activity}" if activity else "")
            + "). Call subagent_result again with wait_seconds to keep waiting, or subagent_cancel to stop it."
        )
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=status_summary(state, activity),
        )

    async def subagent_send(
        self,
        id: Annotated[
            str, Field(description="The run id (or its job's id while one run is going).")
        ],
        text: Annotated[str, Field(description="The message for the child.")],
        mode: Annotated[
            Literal["steer", "follow-up"],
            Field(description="steer: into the running turn; follow-up: when it would end."),
        ] = "steer",
    ) -> CallToolResult:
        try:
            receipt = await anyio.to_thread.run_sync(api.send, id, text, mode)
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        reason = receipt.get("reason")
        line = f"{receipt['receipt']}: {receipt['mode']} {receipt['id']} to run {receipt['runId']}"
        return CallToolResult(
            content=[TextContent(type="text", text=line + (f" ({reason})" if reason else ""))],
            structured_content=dict(receipt),
        )

    async def subagent_cancel(
        self,
        job_id: Annotated[str, Field(description="The job id (or any unique prefix).")],
    ) -> CallToolResult:
        jid = self._resolve(job_id)
        local = self.foreground.get(jid)
        with anyio.CancelScope(shield=True):  # a stop half done is worse than a slow answer
            if local is not None:
                # Driven by this server: stop it here (signalling its driver would stop the server).
                await anyio.to_thread.run_sync(local.cancel)
                ended = await anyio.to_thread.run_sync(
                    functools.partial(service.wait_job, self.store, jid, CANCEL_WAIT_SECONDS)
                )
                state = ended or service.job_state(self.store, jid)
            else:
                before = await anyio.to_thread.run_sync(service.job_state, self.store, jid)
                if before.get("status") in TERMINAL:
                    text = f"job {jid} had already ended: {_ended(before)}"
                    return CallToolResult(
                        content=[TextContent(type="text", text=text)],
                        structured_content=status_summary(before, None),
                    )
                if self.announced and before.get("session") == self.session_id:
                    # Stopped from this session: its end is no news to it.
                    await anyio.to_thread.run_sync(self._told, jid)
                state = await anyio.to_thread.run_sync(service.stop_job, self.store, jid)
        text = f"job {jid}: {_ended(state)}"
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=status_summary(state, None),
        )

    async def _fetched(self, job_id: str, answer: CallToolResult) -> CallToolResult:
        """``answer``, the end of ``job_id`` the model fetched: a notice of it would be no
        news to this session (nor wake it)."""
        if self.announced:
            await anyio.to_thread.run_sync(self._told, job_id)
        return answer

    def _told(self, job_id: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            notices.mark_told(self.home, self.session_id, job_id, notices.CLAUDE_READER)

    async def list_agents(self) -> CallToolResult:
        found = await anyio.to_thread.run_sync(service.discover_agents)
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
        state = await anyio.to_thread.run_sync(service.job_state, self.store, jid)
        return json.dumps(state, ensure_ascii=False, indent=1, allow_nan=False)


def _ended(state: JobState) -> str:
    """How a job ended, in its status line's words (its status while it has no result)."""
    return outcome.status_line(state) if state.get("runs") is not None else str(state.get("status"))
