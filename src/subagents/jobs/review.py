"""The reviewer gate (``--review AGENT|BACKEND[:model]``, docs/gates.md): a separate run reads
the task, the child's answer and its diff (an isolated run's ``changes.patch``) and answers
``{approve, issues}`` under a fixed schema, through the same structured-output machinery
as a council's judge (jobs/council.py); a rejection is a repair turn quoting the issues.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from subagents.errors import FieldProblem, PlanError

if TYPE_CHECKING:
    from subagents.jobs.spec import Step
    from subagents.types import JobRun, JsonObject, RunResult

REVIEW_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean"},
        "issues": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["approve", "issues"],
    "additionalProperties": False,
}
DIFF_MAX = 20_000  # characters of the diff a reviewer is shown

REVIEW_TASK = """You review another agent's work. Approve it only if it does the task fully \
and correctly; otherwise list each problem, concretely, as an issue.

## The task
{task}

## The agent's final answer
{answer}
{diff}
Answer with JSON only: {{"approve": true or false, "issues": ["…"]}}."""

REPAIR = (
    "A reviewer did not approve your work. Its issues:\n{issues}\n"
    "Fix them, then give your final answer again."
)


def review_step(reviewer: str, template: Step) -> Step:
    """The reviewer as a step: ``backend[:model]`` or an agent, in the reviewed run's cwd,
    its answer bound by the review schema."""
    from subagents.backends import known_backends
    from subagents.jobs.council import member_step
    from subagents.jobs.spec import Step

    try:
        who = member_step(reviewer, known_backends())
    except FieldProblem as exc:
        raise PlanError(f"review: {exc.problem.replace('member', 'reviewer')}") from None
    return Step(
        task="review",
        agent=who.get("agent"),
        backend=who.get("backend"),
        model=who.get("model"),
        # A map's cwd template is a row's: the reviewer works in the job's directory then.
        cwd=template.cwd if template.cwd and "{" not in template.cwd else None,
        output_schema=dict(REVIEW_SCHEMA),
    )


def review_task(task: str, result: RunResult) -> str:
    diff = ""
    patch = Path(result["paths"]["events"]).parent / "changes.patch"
    if patch.is_file():
        text = patch.read_text(encoding="utf-8", errors="replace")
        if len(text) > DIFF_MAX:
            text = text[:DIFF_MAX] + "\n… (the diff goes on)"
        diff = f"\n## Its changes (a diff)\n```diff\n{text}\n```\n"
    answer = (result.get("finalText") or "").strip() or "(no answer)"
    return REVIEW_TASK.format(task=task, answer=answer, diff=diff)


def verdict_of(review: JobRun) -> tuple[bool, list[str]] | None:
    """The reviewer's ``(approve, issues)``, or None when it gave none (it failed)."""
    value = review.get("structured") if "paths" in review else None
    if review.get("status") != "completed" or not isinstance(value, dict):
        return None
    approve, issues = value.get("approve"), value.get("issues")
    if not isinstance(approve, bool) or not isinstance(issues, list):
        return None
    return approve, [str(i) for i in issues]


def repair_task(issues: list[str]) -> str:
    listed = "\n".join(f"- {issue}" for issue in issues) or "- (none given)"
    return REPAIR.format(issues=listed)
