"""The MCP tools of the approvals inbox (docs/approvals.md): ``subagent_inbox`` lists what
children ask to do and waits for a decision; ``subagent_decide`` decides one, as the parent
(a run started with ``approvals: parent`` waits for it; ``ask`` ones wait for a person, and
the parent may decide them too when the person said so). A thin layer over the service."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from subagents import service
from subagents.core.approve import decided_words
from subagents.core.childtext import one_line
from subagents.errors import UsageError
from subagents.runs import PARENT_DECIDER  # (bounded by the user's rules)

INBOX_TITLE = "Approvals waiting"
INBOX_DESCRIPTION = (
    "What running children ask to do and wait for a decision on (runs started with"
    " approvals 'ask' or 'parent'): each item's id, run, backend, the request (a command, a"
    " file) and since when; or a question a child asks the user, with its options. Decide"
    " one with subagent_decide. `run`: only that run's."
)
DECIDE_TITLE = "Decide an approval"
DECIDE_DESCRIPTION = (
    "Decide an item of the approvals inbox (its id from subagent_inbox, or a progress line"
    " 'waiting for your decision' or 'your answer'): 'allow' lets the child's request go"
    " ahead once, 'always' lets the same tool pass for the rest of that run, 'deny' refuses"
    " it (`reason` is what the child is told). A question (kind 'question'): 'answer' with"
    " `answers`, one per question in order (an option's label or words of your own), or"
    " 'deny' to leave it unanswered. An unknown or already decided item, a choice that does"
    " not fit it, or a run that ended, is an error and nothing changes."
)


async def subagent_inbox(
    run: Annotated[
        str | None, Field(description="Only this run's items (its id or a unique prefix).")
    ] = None,
) -> CallToolResult:
    try:
        items = await anyio.to_thread.run_sync(service.inbox, run)
    except UsageError as exc:
        raise ToolError(str(exc)) from None
    lines: list[str] = []
    for i in items:
        who = "you" if i["policy"] == "parent" else "a person or you"
        if "parentMay" in i and i["policy"] != "parent":
            who = "a person (outside what you may allow)"
        asked = i.get("questions") if i.get("kind") == "question" else None
        what = "asks the user" if asked else one_line(i["summary"])
        lines.append(f"- {i['id']} (run {i['runId']}, {i['backend']}, decided by {who}): {what}")
        for q in asked or []:
            labels = " | ".join(one_line(o["label"]) for o in q["options"])
            lines.append(
                f"  - {one_line(q['question'])}" + (f" options: {labels}" if labels else "")
            )
    lines = lines or ["nothing waits for a decision"]
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content={"items": [dict(i) for i in items]},
    )


async def subagent_decide(
    item: Annotated[str, Field(description="The item's id (or a unique prefix).")],
    choice: Annotated[
        Literal["allow", "always", "deny", "answer"],
        Field(
            description="allow (once), always (this tool, rest of the run) or deny; a"
            " question's answer or deny."
        ),
    ],
    reason: Annotated[
        str | None, Field(description="Why (for a denial: what the child is told).")
    ] = None,
    answers: Annotated[
        list[str] | None,
        Field(description="A question's answers (choice 'answer'): one per question, in order."),
    ] = None,
) -> CallToolResult:
    try:
        decision = await anyio.to_thread.run_sync(
            lambda: service.decide(item, choice, by=PARENT_DECIDER, reason=reason, answers=answers)
        )
    except UsageError as exc:
        raise ToolError(str(exc)) from None
    text = decided_words(decision["choice"], decision["item"])
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=dict(decision)
    )
