"""The approvals inbox as tests fill and drive it without a child: an item written as a
run's supervisor writes it, and a stand-in for the supervisor that ``Approvals`` serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents.core import inbox
from subagents.supervisor.phase import StallWatch
from subagents.supervisor.spec import RunSpec


def write_item(run_dir: Path, item_id: str, **extra: Any) -> None:
    """An item waiting in ``run_dir``'s inbox: ``Bash: ls`` under ``ask`` unless ``extra``
    says otherwise."""
    inbox.write_item(
        run_dir,
        {
            "id": item_id,
            "runId": run_dir.name,
            "jobId": None,
            "backend": "claude",
            "task": "t",
            "tool": "Bash",
            "summary": "Bash: ls",
            "input": {"command": "ls"},
            "policy": "ask",
            "choices": ["allow", "always", "deny"],
            "requestedAt": 1.0,
            "expiresAt": 2.0,
            **extra,
        },
    )


class FakeSupervisor:
    """What ``supervisor.approvals.Approvals`` needs of a supervisor: its spec, run dir and
    watchdog; the events it emits are kept."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.spec = RunSpec(
            runId=run_dir.name, backend="claude", task="t", cwd=str(run_dir), argv=[]
        )
        self.watch = StallWatch(5.0, 5.0, 0.0)
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)

    def flush(self) -> None:
        pass
