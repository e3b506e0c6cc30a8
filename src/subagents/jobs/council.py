"""A council (docs/structured.md): one task to several members side by side — each a
backend (``backend[:model]``) or an agent — then, optionally, a judge that reads every
answer, labelled, and returns a verdict under a fixed schema through ``--output-schema``.

The job's ``council`` record holds the answers side by side (each member's status, time,
tokens, cost), how many answered against the quorum, with an output schema where the
structured answers agree and differ field by field (``structured.compare``), and the
judge's verdict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from subagents.errors import FieldProblem

if TYPE_CHECKING:
    from subagents.types import CouncilMember, CouncilRecord, JobRun, JsonObject, RunStatus

# What a judge returns: the best answer's label, how far the members agree, why, and one
# answer merged from the best of them.
VERDICT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "best": {"type": "string", "description": "the label of the best answer (A, B, ...)"},
        "agreement": {"type": "string", "enum": ["full", "partial", "none"]},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "merged": {"type": "string", "description": "one answer, merged from the best of them"},
    },
    "required": ["best", "agreement", "reasons", "merged"],
    "additionalProperties": False,
}
JUDGE_TASK = (
    "Several agents were given the same task. Judge their answers: which is best, how far"
    " they agree, why, and one answer merged from the best of them.\n\n"
    "The task:\n\n{task}\n\nThe answers:\n\n{answers}"
)


def label(i: int) -> str:
    """A member's label: A, B, ... Z, then A2, B2, ..."""
    return chr(ord("A") + i % 26) + (str(i // 26 + 1) if i >= 26 else "")


def member_step(entry: str, backends: Sequence[str]) -> dict[str, str]:
    """A member as a step's fields: ``backend[:model]`` when it names a backend, else an
    agent's name."""
    entry = entry.strip()
    if not entry:
        raise FieldProblem("council", "a member is empty (give backend[:model] or an agent)")
    name, sep, model = entry.partition(":")
    if name in backends:
        return {"backend": name, **({"model": model} if sep and model else {})}
    if sep:
        raise FieldProblem("council", f"{name!r} is not a backend ({', '.join(backends)})")
    return {"agent": entry}


def judge_task(task: str, runs: Sequence[JobRun]) -> str:
    """The judge's task: the members' task and every answer, labelled (a member that did
    not answer says so)."""
    parts = []
    for i, run in enumerate(runs):
        who = run.get("agent") or run.get("backend") or "?"
        if run.get("status") == "completed":
            value = run.get("structured") if "paths" in run else None
            text = (
                json.dumps(value, ensure_ascii=False) if value is not None else run.get("finalText")
            )
        else:
            text = f"(no answer: {run.get('status')}: {run.get('errorMessage') or ''})"
        parts.append(f"## Answer {label(i)} ({who})\n\n{text}")
    return JUDGE_TASK.format(task=task, answers="\n\n".join(parts))


def member(i: int, run: JobRun) -> CouncilMember:
    """A member's row of the record, from its run's result (or the record of a run never
    started)."""
    usage = run.get("usage")
    entry: CouncilMember = {
        "label": label(i),
        "runId": run.get("runId"),
        "agent": run.get("agent"),
        "backend": run.get("backend"),
        "model": None,
        "status": run["status"],
        "durationMs": None,
        "tokens": usage.get("totalTokens") if usage else None,
        "cost": usage.get("cost") if usage else None,
        "answer": run.get("finalText") or "",
    }
    if "paths" in run:  # a result.json
        entry["model"] = run.get("model") or run.get("requestedModel")
        entry["durationMs"] = run.get("durationMs")
        if "structured" in run:
            entry["structured"] = run["structured"]
    if run["status"] != "completed":
        entry["errorMessage"] = run.get("errorMessage")
    return entry


def record(
    runs: Sequence[JobRun], quorum: int, schema: bool, judge: JobRun | None
) -> CouncilRecord:
    """The job's ``council`` record from its members' results (and its judge's)."""
    members = [member(i, run) for i, run in enumerate(runs)]
    answered = [m for m in members if m["status"] == "completed"]
    out: CouncilRecord = {"members": members, "quorum": quorum, "answered": len(answered)}
    if schema and answered:
        from subagents.structured import compare

        out["agreement"] = compare({m["label"]: m.get("structured") for m in answered})
    if judge is not None:
        verdict = judge.get("structured") if "paths" in judge else None
        out["judgeRunId"] = judge.get("runId")
        out["verdict"] = verdict if judge["status"] == "completed" else None
        if out["verdict"] is None:
            out["judgeError"] = judge.get("errorMessage") or judge.get("status")
    return out


def why(record: CouncilRecord, judged: bool, cancelled: bool) -> str | None:
    """What the job's ``errorMessage`` says of a council, or None: too few answered for the
    quorum (so no judge started: the council failed), or the judge gave no verdict (the
    council completed, its members' answers stand, and this note says the verdict is
    missing)."""
    if cancelled:
        return None  # the stop says why
    answered, quorum = record["answered"], record["quorum"]
    if answered < quorum:
        of = len(record["members"])
        short = f"{answered} of {of} members answered, fewer than the quorum of {quorum}"
        return f"{short}: the judge did not start" if judged else short
    if judged and record.get("verdict") is None:
        return f"the judge gave no verdict: {record.get('judgeError') or 'it did not run'}"
    return None


def status(answered: int, quorum: int, cancelled: bool) -> RunStatus:
    """A council completes when at least ``quorum`` members answered: their answers are
    its product, with the judge's verdict or without it (a judge that failed is a missing
    verdict, said by :func:`why`, not a failed council)."""
    if cancelled:
        return "aborted"
    if answered < quorum:
        return "failed"
    return "completed"
