"""A run's answer against its output schema (docs/structured.md), the supervisor's side.

The value is the CLI's own structured answer where it gave one (claude's
``structured_output``), else the JSON in the final text (whole, or its last fenced block:
``structured.answer_value``). ``structured`` (and ``jsonschema`` under it) is imported only
by a run that has a schema: every other run starts as lean as before.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.backends import Normalizer
    from subagents.supervisor.spec import RunSpec
    from subagents.types import JsonValue

FAILED = "the answer does not satisfy the output schema"


def check(spec: RunSpec, norm: Normalizer) -> tuple[JsonValue, str | None]:
    """The answer's value, and the first reason it does not satisfy the run's schema
    (None: it does). Only for a run with ``spec.outputSchema``."""
    from subagents import structured

    schema = spec.outputSchema
    assert schema is not None
    try:
        if norm.has_structured:
            return norm.structured, structured.problem(schema, norm.structured)
        value, problem = structured.check_answer(schema, norm.final_text)
    except RecursionError:
        return None, "the answer is nested too deeply to check"
    except Exception as exc:  # our own check must never cost the child's answer
        return None, f"the check could not complete: {type(exc).__name__}: {exc}"[:500]
    return (value if problem is None else None), problem


def repair_text(problem: str) -> str:
    from subagents.structured import repair

    return repair(problem)
