"""RunSpec: everything a supervisor needs to own one run (stored as ``meta.json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunSpec:
    runId: str
    backend: str
    task: str
    cwd: str
    argv: list[str]
    jobId: str | None = None
    agent: str | None = None
    agentSource: str | None = None
    requestedModel: str | None = None
    # Environment added to the supervisor's own for the child (never a whole environment).
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    grace: float = 0.25
    killGrace: float = 2.0
    depth: int = 1
    createdAt: float = 0.0
    # Print progress lines on the supervisor's stdout (the tmux runner's window).
    echo: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
