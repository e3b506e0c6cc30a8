"""What the MCP tools answer: a job's result and state as Markdown text and compact structured
content, each leading with what a parent model needs first.

Clients differ in what they hand the model: Claude Code gives it a successful call's
structured content (as JSON) and shows the person the text. So both say the same: the answer
(or, for a failure, what went wrong), one status line (``✓ completed · pi · 3.4s · 60 tokens ·
$0.00004``), the job and run ids, and for a background job how to follow it. Costs are rounded
as people read them; paths are written from the home directory or the working directory.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mcp_types import CallToolResult, TextContent

from subagents.core import ids
from subagents.present import outcome
from subagents.present.answer import cwd_of, markdown, readable_diagnostics
from subagents.present.figures import rounded_usage

if TYPE_CHECKING:
    from subagents.types import JobResult, JobRun, JobState

    # A job's outcome: its result, or the state of the finished job (which holds it).
    Outcome = JobResult | JobState

PROGRESS_MAX_LEN = 200  # characters in one progress message

JOB_URI = "subagent://jobs/{id}"
# How a model follows a job started in the background: each tool, as it is called for the
# job ``{id}``, and what it does.
FOLLOW = {
    "subagent_status": ('subagent_status(job_id="{id}")', "says where it is"),
    "subagent_result": ('subagent_result(job_id="{id}", wait_seconds=60)', "waits for its answer"),
    "subagent_send": ('subagent_send(id="{id}", text=...)', "corrects it while it runs"),
    "subagent_cancel": ('subagent_cancel(job_id="{id}")', "stops it"),
}


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def cap(text: str, limit: int = PROGRESS_MAX_LEN) -> str:
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def session_part(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "", text)[:32]
    return cleaned or ids.new_id()


def elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m{seconds % 60:02d}s"


def job_uri(job_id: str) -> str:
    return JOB_URI.replace("{id}", job_id)


def answer_text(result: Outcome) -> str:
    """The text a tool result holds (Markdown): the parent's answer as every face composes
    it (``present/answer.py``)."""
    return markdown(result)


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
    "continuedFrom",
    "worktree",
    "limit",
)


def _compact_run(run: JobRun, answered: bool) -> dict[str, object]:
    """A run without its paths and bulky fields; without its answer when ``answer`` holds it."""
    out = {
        k: run.get(k)
        for k in RUN_KEYS
        if run.get(k) is not None and not (answered and k == "finalText")
    }
    if run.get("usage") is not None:
        out["usage"] = rounded_usage(run.get("usage"))
    messages = run.get("messages")
    if isinstance(messages, dict) and messages.get("sent"):  # what became of the parent's
        out["messages"] = messages
    return out


def compact_result(result: Outcome) -> dict[str, object]:
    """The structured result a parent model reads (Claude Code hands the model this, not the
    text): the answer first (a list for a parallel job), or what went wrong, then the status
    line, the ids, and each run without its paths and bulky fields. The whole job result
    stays available as the resource ``subagent://jobs/{id}``."""
    runs = outcome.runs_of(result)
    cwd = cwd_of(result)
    out: dict[str, object] = {}
    if result.get("status") != "completed":
        out["error"] = outcome.detail(result)
    if result.get("mode") == "parallel":
        out["answer"] = [r.get("finalText") for r in runs]
    else:
        out["answer"] = result.get("finalText")
    out.update(
        {
            "summary": outcome.status_line(result),
            "status": result.get("status"),
            "jobId": result.get("jobId"),
            "runIds": [r.get("runId") for r in runs],
            "mode": result.get("mode"),
            "usage": rounded_usage(result.get("usage")),
            "durationMs": result.get("durationMs"),
            # A chain's steps keep their answers: only the last one is the job's.
            "runs": [_compact_run(r, result.get("mode") != "chain") for r in runs],
        }
    )
    failures = [
        readable_diagnostics(str(r.get("diagnostics")), cwd)
        for r in runs
        if r.get("status") != "completed" and r.get("diagnostics")
    ]
    if failures:
        out["diagnostics"] = failures
    council = result.get("council")
    if council is not None:  # the answers side by side, agreement and verdict
        out["council"] = council
    return out


def result_to_tool_result(result: Outcome) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=answer_text(result))],
        structured_content=compact_result(result),
        is_error=result.get("status") != "completed",
    )


# ---- a job started in the background --------------------------------------------------


def follow_hint(job_id: str) -> str:
    """How a model follows a background job: the tools to call, with the id."""
    calls = [f"{call.replace('{id}', job_id)} {does}" for call, does in FOLLOW.values()]
    return ", ".join(calls) + "."


def background_started(job_id: str, runs: list[str], announced: bool) -> CallToolResult:
    """The answer to a background call: the job id and how to follow the job (and, where the
    client is told of job ends, that it will be)."""
    who = ", ".join(dict.fromkeys(runs))
    started = f"{len(runs)} run{'' if len(runs) == 1 else 's'} ({who})"
    told = (
        "Its end is announced in this conversation when it comes: no need to poll."
        if announced
        else f"Subscribers to {job_uri(job_id)} are notified when it ends."
    )
    structured = {
        "jobId": job_id,
        "status": "running in the background",
        "started": started,
        "follow": follow_hint(job_id),
        "told": told,
    }
    text = (
        f"Started job {job_id} in the background: {started}.\n\n"
        f"Follow it: {follow_hint(job_id)} {told}"
    )
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


# ---- a job's state --------------------------------------------------------------------


def status_summary(state: JobState, activity: str | None) -> dict[str, object]:
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
    summary = {k: state.get(k) for k in keys if state.get(k) is not None}
    if "usage" in summary:
        summary["usage"] = rounded_usage(summary["usage"])
    if state.get("runs") is not None:
        summary = {"summary": outcome.status_line(state), **summary}
    if activity:
        summary["activity"] = activity
    runs = state.get("runs")
    if runs is not None:
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
            for r in runs
        ]
        summary["finalText"] = state.get("finalText")
    return summary


def map_result(result: Outcome) -> CallToolResult:
    """A finished map: its counts, failures by reason, where its results are."""
    record = result.get("map")
    text = f"Map {result['jobId']} {result['status']}"
    if record is not None:
        text += f": {record['completed']}/{record['total']} rows completed; {record['summary']}."
        if record.get("out"):
            text += f" Results: {record.get('out')}."
    structured = {"jobId": result["jobId"], "status": result["status"], "map": record}
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=result["status"] != "completed",
    )
