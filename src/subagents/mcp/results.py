"""What the MCP tools answer: a job's result and state turned into text and compact structured content."""

from __future__ import annotations

import re
from typing import Any

from mcp_types import (
    CallToolResult,
    TextContent,
)

from subagents.core import ids

PROGRESS_MAX_LEN = 200  # characters in one progress message


JOB_URI = "subagent://jobs/{id}"


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
    "continuedFrom",
    "worktree",
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
