"""The client side of the MCP tasks extension, on the SDK's client-extension API: a claim on
``resultType: "task"`` whose resolver polls ``tasks/get`` until the task ends and answers
the task's result, as a tasks-aware client (VS Code's, say) does."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import CallToolResult
from pydantic import TypeAdapter

from subagents.mcp.tasks import (
    EXTENSION_ID,
    CancelTaskRequest,
    CreateTaskResult,
    GetTaskRequest,
    TaskParams,
)

TERMINAL = {"completed", "failed", "cancelled"}
_ANY: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    request = GetTaskRequest(params=TaskParams.model_validate({"taskId": task_id}))
    return await session.send_request(request, _ANY)


async def cancel_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    request = CancelTaskRequest(params=TaskParams.model_validate({"taskId": task_id}))
    return await session.send_request(request, _ANY)


async def until_ended(session: ClientSession, task_id: str, seen: list[str]) -> dict[str, Any]:
    """Polls ``tasks/get`` (at a tenth of the server's interval: tests wait for nothing
    else) until the task ends; ``seen`` collects every status it reported."""
    while True:
        task = await get_task(session, task_id)
        seen.append(task["status"])
        if task["status"] in TERMINAL:
            return task
        await anyio.sleep(task.get("pollIntervalMs", 1000) / 10_000)


class TasksClient(ClientExtension):
    identifier = EXTENSION_ID

    def __init__(self) -> None:
        self.created: list[CreateTaskResult] = []
        self.statuses: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        task = await until_ended(ctx.session, created.task_id, self.statuses)
        if task["status"] != "completed":
            raise RuntimeError(f"task {created.task_id} {task['status']}: {task}")
        return CallToolResult.model_validate(task["result"])
