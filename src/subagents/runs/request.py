"""What one run is asked to do: the task, the agent's choices and the step's overrides.
Everything else a run needs comes from the settings (``config.Settings``) and where it
starts from its ``Placement`` (launchers), both the job's."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from subagents.types import JsonObject


@dataclass
class RunRequest:
    task: str
    backend: str | None = None
    model: str | None = None
    cwd: str | None = None
    timeout: float | None = None
    tools: list[str] | None = None
    system_prompt: str | None = None
    thinking: str | None = None
    agent: str | None = None
    agent_source: str | None = None
    job_id: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # "worktree": the run works in its own git worktree (subagents/worktree.py).
    isolate: str | None = None
    stall_timeout: float | None = None
    on_stall: str | None = None
    tool_timeout: float | None = None
    # The id of a finished run whose child's conversation this run resumes.
    continue_from: str | None = None
    # The run's budget (docs/live-control.md); and, for the kinds bounded by what its job
    # had left, what the job had used before it (set by the job as the run starts).
    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    job_used: dict[str, float] | None = None
    # --output-schema: the checked schema (structured.load_schema) the answer must satisfy.
    output_schema: JsonObject | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRequest:
        """A request as a job's record keeps it. One written before placements were the
        job's carries its ``runner`` too: the job's reader takes it (``JobPlan``)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
