"""What one run is asked to do: the task, the agent's choices and the step's options.
Everything else a run needs comes from the settings (``config.Settings``) and where it
starts from its ``Placement`` (launchers), both the job's."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

from subagents.options import RunOptions, field_default

if TYPE_CHECKING:
    from subagents.types import JsonObject, ProcessIdentity, RunRequestRecord


@dataclass
class RunRequest(RunOptions):
    """A run's options (``RunOptions``: its agent, backend, model, limits, budget, …, as
    its step and then its agent chose them), and what only a run has."""

    task: str
    cwd: str | None = None
    tools: list[str] | None = None
    system_prompt: str | None = None
    agent_source: str | None = None
    job_id: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # The id of a finished run whose child's conversation this run resumes.
    continue_from: str | None = None
    # Processes the run is bound to (``--parent-pid``), each ``{pid, createTime}``: when
    # one of them ends, the run is aborted (by its supervisor, whoever else is gone).
    watch: list[ProcessIdentity] = field(default_factory=list)
    # For the budget's kinds bounded by what its job had left, what the job had used
    # before it (set by the job as the run starts).
    job_used: dict[str, float] | None = None
    _: KW_ONLY
    # --output-schema: here the checked schema (structured.load_schema) the answer must satisfy.
    output_schema: JsonObject | None = None  # type: ignore[assignment]
    # The run's acceptance gate (jobs/gates.py, docs/gates.md): {verify, timeout,
    # attempts, review}; the job runs it once the run completed.
    gate: JsonObject | None = None

    def to_record(self) -> RunRequestRecord:
        """The request as a job's record keeps it: every field, by its name (tests/test_types.py
        holds the record's keys to the dataclass's)."""
        return cast(
            "RunRequestRecord", {f.name: _copy(getattr(self, f.name)) for f in fields(self)}
        )

    @classmethod
    def from_record(cls, record: RunRequestRecord) -> RunRequest:
        """A request as a job's record keeps it (written by any version: a field it lacks,
        or holds as null where it has a default, has its default). One written before
        placements were the job's carries its ``runner`` too: the job's reader takes it
        (``JobPlan``)."""
        given: dict[str, Any] = {}
        for f in fields(cls):
            value = record.get(f.name)
            given[f.name] = field_default(f) if value is None else _copy(value)
        return cls(**given)


def _copy(value: Any) -> Any:
    """A record's value, its lists and mappings copied (the record and the request share none)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
