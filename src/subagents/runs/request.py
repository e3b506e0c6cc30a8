"""What one run is asked to do: the task, the agent's choices and the step's overrides.
Everything else a run needs comes from the settings (``config.Settings``) and where it
starts from its ``Placement`` (launchers), both the job's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import RunRequestRecord

from subagents.types import JsonObject, ProcessIdentity


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
    # Processes the run is bound to (``--parent-pid``), each ``{pid, createTime}``: when
    # one of them ends, the run is aborted (by its supervisor, whoever else is gone).
    watch: list[ProcessIdentity] = field(default_factory=list)
    # The run's budget (docs/live-control.md); and, for the kinds bounded by what its job
    # had left, what the job had used before it (set by the job as the run starts).
    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    job_used: dict[str, float] | None = None
    # --output-schema: the checked schema (structured.load_schema) the answer must satisfy.
    output_schema: JsonObject | None = None
    # The run's acceptance gate (jobs/gates.py, docs/gates.md): {verify, timeout,
    # attempts}; the job runs it once the run completed.
    gate: JsonObject | None = None

    def to_record(self) -> RunRequestRecord:
        """The request as a job's record keeps it (every field: tests/test_types.py holds
        the record's keys to the dataclass's)."""
        return {
            "task": self.task,
            "backend": self.backend,
            "model": self.model,
            "cwd": self.cwd,
            "timeout": self.timeout,
            "tools": self.tools,
            "system_prompt": self.system_prompt,
            "thinking": self.thinking,
            "agent": self.agent,
            "agent_source": self.agent_source,
            "job_id": self.job_id,
            "env": dict(self.env),
            "isolate": self.isolate,
            "stall_timeout": self.stall_timeout,
            "on_stall": self.on_stall,
            "tool_timeout": self.tool_timeout,
            "continue_from": self.continue_from,
            "watch": [w.copy() for w in self.watch],
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "job_used": None if self.job_used is None else dict(self.job_used),
            "output_schema": self.output_schema,
            "gate": self.gate,
        }

    @classmethod
    def from_record(cls, record: RunRequestRecord) -> RunRequest:
        """A request as a job's record keeps it (written by any version: a field it lacks
        has its default). One written before placements were the job's carries its
        ``runner`` too: the job's reader takes it (``JobPlan``)."""
        return cls(
            task=record["task"],
            backend=record.get("backend"),
            model=record.get("model"),
            cwd=record.get("cwd"),
            timeout=record.get("timeout"),
            tools=record.get("tools"),
            system_prompt=record.get("system_prompt"),
            thinking=record.get("thinking"),
            agent=record.get("agent"),
            agent_source=record.get("agent_source"),
            job_id=record.get("job_id"),
            env=dict(record.get("env") or {}),
            isolate=record.get("isolate"),
            stall_timeout=record.get("stall_timeout"),
            on_stall=record.get("on_stall"),
            tool_timeout=record.get("tool_timeout"),
            continue_from=record.get("continue_from"),
            watch=[w.copy() for w in record.get("watch") or []],
            max_turns=record.get("max_turns"),
            max_tokens=record.get("max_tokens"),
            max_cost=record.get("max_cost"),
            job_used=record.get("job_used"),
            output_schema=record.get("output_schema"),
            gate=record.get("gate"),
        )
