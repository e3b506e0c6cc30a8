"""MCP tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663) over our jobs.

A client that declares the extension on its ``tools/call`` gets a call that starts a job
(``subagent``, ``continue``, ``subagent_map``) answered at once with a task handle
(``resultType: "task"``) instead of waiting for the job; ``tasks/get`` answers the job's
status and, once it ended, the very result the call would have given; ``tasks/cancel``
stops the job; ``tasks/update`` takes nothing (a job asks the client nothing). A client that
does not declare it keeps the tools' own answers (foreground with progress, or background
and the polling tools).

The task id is the job id and a task's job runs in its own detached driver: a task outlives
the server process that made it, and any server over the same state answers for it.
"""

from __future__ import annotations

import contextvars
import datetime as dt
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import anyio.to_thread
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, Request, RequestParams, Result
from pydantic import Field

from subagents import service
from subagents.errors import JobIdError
from subagents.mcp.results import map_result, result_to_tool_result

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp_types import CallToolResult

    from subagents.service import JobStore
    from subagents.types import JobState

EXTENSION_ID = "io.modelcontextprotocol/tasks"
TASK_TOOLS = frozenset({"subagent", "continue", "subagent_map"})
POLL_INTERVAL_MS = 1000
TaskStatus = Literal["working", "input_required", "completed", "cancelled", "failed"]


# ---- the wire vocabulary (the extension's schema, 2026-07-28) ----------------------------


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``."""

    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses", default_factory=dict)


class CreateTaskResult(Result):
    """What a task-augmented ``tools/call`` answers (also the shape ``tasks/get`` gives,
    with ``resultType`` "complete" and the result or error inlined)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class GetTaskRequest(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param: ClassVar[str | None] = "taskId"  # SEP-2663: routed by the task id


class CancelTaskRequest(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param: ClassVar[str | None] = "taskId"


# ---- the call that becomes a task ------------------------------------------------------


class TaskCall:
    """The current ``tools/call`` is to become a task: the tool starts its job in the
    background and says its id here."""

    job_id: str | None = None


_CALL: contextvars.ContextVar[TaskCall | None] = contextvars.ContextVar(
    "subagents_mcp_task_call", default=None
)


def in_background(asked: bool) -> bool:
    """Whether the tool starts its job in the background: asked, or the call is a task."""
    return asked or _CALL.get() is not None


def started(job_id: str) -> None:
    """The tool started its job in the background (a no-op outside a task call)."""
    call = _CALL.get()
    if call is not None:
        call.job_id = job_id


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The request's client declared the extension (2026-07-28's per-request capabilities)."""
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return extensions is not None and EXTENSION_ID in extensions


# ---- the extension ---------------------------------------------------------------------


class JobTasks(Extension):
    identifier = EXTENSION_ID

    def __init__(self, store: JobStore) -> None:
        self.store = store

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/update", UpdateTaskParams, self._update),
            MethodBinding("tasks/cancel", TaskParams, self._cancel),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in TASK_TOOLS or not declares_tasks(ctx):
            return await call_next(ctx)
        call = TaskCall()
        token = _CALL.set(call)
        try:
            result = await call_next(ctx)
        finally:
            _CALL.reset(token)
        if call.job_id is None:  # refused before a job started: the tool's own answer
            return result
        state = await anyio.to_thread.run_sync(service.job_state, self.store, call.job_id)
        return {"resultType": "task", **task_of(state)}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        state = await anyio.to_thread.run_sync(self._state, params.task_id)
        return {"resultType": "complete", **task_of(state)}

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        # No job asks its client for input: there is never a request outstanding, and
        # responses to keys never issued are ignored (the extension's rule).
        await anyio.to_thread.run_sync(self._state, params.task_id)
        return {}

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        state = await anyio.to_thread.run_sync(self._state, params.task_id)
        if state.get("status") not in service.TERMINAL:
            with anyio.CancelScope(shield=True):  # a stop half done is worse than a slow ack
                await anyio.to_thread.run_sync(service.stop_job, self.store, state["jobId"])
        return {}

    def _state(self, task_id: str) -> JobState:
        try:
            job_id = self.store.resolve(task_id)
        except JobIdError:
            job_id = None
        if job_id != task_id:  # a task id is whole, never a prefix
            raise MCPError(code=INVALID_PARAMS, message=f"no task {task_id!r}")
        return service.job_state(self.store, job_id)


def task_of(state: JobState) -> dict[str, Any]:
    """The job as a task (``DetailedTask``): working until its result is written, then
    completed with the result the call gives (a failed job is a completed task whose
    result is an error, as the extension says), or cancelled when it was stopped."""
    created = _iso_from_epoch(state["createdAt"])
    task: dict[str, Any] = {
        "taskId": state["jobId"],
        "createdAt": created,
        "lastUpdatedAt": state.get("completedAt") or state.get("startedAt") or created,
        "ttlMs": None,  # kept until the user prunes it
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    status = state.get("status")
    if status not in service.TERMINAL or "runs" not in state:
        return {**task, "status": "working", "statusMessage": _working(state)}
    if status == "aborted":
        why = state.get("errorMessage")  # (statusMessage is a string or absent, never null)
        return {**task, "status": "cancelled", **({"statusMessage": why} if why else {})}
    result = _call_result(state)
    return {
        **task,
        "status": "completed",
        "statusMessage": f"job {status}",
        "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
    }


def _call_result(state: JobState) -> CallToolResult:
    if state.get("mode") == "map":
        return map_result(state)
    return result_to_tool_result(state)


def _working(state: JobState) -> str:
    runs = [r for r in state.get("runIds") or [] if r]
    return f"{state.get('status')}: {len(runs)} run{'' if len(runs) == 1 else 's'} started"


def _iso_from_epoch(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat().replace("+00:00", "Z")
