"""The MCP tool ``subagent_map``: a task template over every row of a dataset
(docs/map.md), in the background (the default: a map may be long) or to its end; a thin
layer over ``subagents.maps``, answered with the map's counts, its failures grouped by
reason and where its rows' results are."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from subagents import maps, service
from subagents.errors import UsageError
from subagents.mcp.args import SCHEMA
from subagents.mcp.results import map_result
from subagents.mcp.tasks import in_background, started
from subagents.options import map_help

if TYPE_CHECKING:
    pass

MAP_TITLE = "Map a task over a dataset"
MAP_DESCRIPTION = (
    "Run one task template once per row of a dataset: a CSV (its header names the fields),"
    " a JSON-lines file or a file of lines (field 'line'). '{field}' in `task` (and in `cwd`,"
    " `agent`, `model`, `backend`, `verify`) is the row's value. Every row is a run of its own;"
    " `out` keeps each row's result (status, answer or the `output_schema`'s fields, error,"
    " cost, runId, branch) as it finishes. In the background by default: follow it with"
    " subagent_status; `resume` (a map's jobId) runs its rows that did not complete."
)


async def subagent_map(
    input: Annotated[
        str | None, Field(description="The dataset: a .csv, .jsonl or lines file (a path).")
    ] = None,
    task: Annotated[
        str | None, Field(description="The task template: {field} is the row's.")
    ] = None,
    key: Annotated[str | None, Field(description=map_help("key"))] = None,
    where: Annotated[dict[str, str] | None, Field(description=map_help("where"))] = None,
    limit: Annotated[int | None, Field(ge=1, description=map_help("limit"))] = None,
    retries: Annotated[int | None, Field(ge=0, description=map_help("retries"))] = None,
    out: Annotated[str | None, Field(description=map_help("out"))] = None,
    agent: Annotated[str | None, Field(description="Agent for every row.")] = None,
    backend: Annotated[str | None, Field(description="Agent CLI for every row.")] = None,
    model: Annotated[str | None, Field(description="Model for every row.")] = None,
    cwd: Annotated[str | None, Field(description="Working directory of every row.")] = None,
    concurrency: Annotated[int | None, Field(ge=1, description="Rows at once (default 4).")] = None,
    isolate: Annotated[
        Literal["worktree"] | None, Field(description="'worktree': a git worktree per row.")
    ] = None,
    output_schema: Annotated[str | dict[str, object] | None, Field(description=SCHEMA)] = None,
    verify: Annotated[
        str | None,
        Field(
            description="An acceptance gate: a command that must exit 0 after each row (docs/gates.md)."
        ),
    ] = None,
    max_cost: Annotated[
        float | None, Field(gt=0, description="The whole map's budget in USD.")
    ] = None,
    max_tokens: Annotated[
        int | None, Field(ge=1, description="The whole map's budget in tokens.")
    ] = None,
    resume: Annotated[
        str | None, Field(description="A map's jobId: run its rows not completed.")
    ] = None,
    background: Annotated[
        bool, Field(description="Return {jobId} at once (default); false waits for the end.")
    ] = True,
) -> CallToolResult:
    background = in_background(background)
    options: dict[str, Any] = {
        "key": key,
        "where": where,
        "limit": limit,
        "retries": retries,
        "out": out,
        "agent": agent,
        "backend": backend,
        "model": model,
        "cwd": cwd,
        "isolate": isolate,
        "output_schema": output_schema,
        "verify": verify,
    }
    try:
        job = await anyio.to_thread.run_sync(
            lambda: maps.prepare_map(
                input,
                task,
                resume=resume,
                background=background,
                concurrency=concurrency,
                max_cost=max_cost,
                max_tokens=max_tokens,
                **{k: v for k, v in options.items() if v is not None},
            )
        )
    except UsageError as exc:
        raise ToolError(str(exc).removeprefix("arguments: ")) from None
    if background:
        job_id = await anyio.to_thread.run_sync(service.start_background, job)
        started(job_id)
        text = f"Started map {job_id} in the background. Follow it with subagent_status."
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content={"jobId": job_id, "status": "running in the background"},
        )
    result = await anyio.to_thread.run_sync(maps.drive, job)
    return map_result(result)
