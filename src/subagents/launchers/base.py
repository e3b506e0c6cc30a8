"""The launch seam: where and how a run starts (``Placement``), what starts it (a
``Launcher``: process, tmux or ray), and what a start hands back (``Launched``: the run's
supervisor as its launcher knows it, recorded in the run's ``supervisor.json`` so that other
processes find it again: a restarted job driver, ``subagents stop``, a monitor).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from subagents.core.files import read_json, write_json_atomic
from subagents.errors import UsageError
from subagents.supervisor import handover

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.config import Settings
    from subagents.supervisor.spec import RunSpec
    from subagents.types import (
        ExecutorPlace,
        JsonObject,
        LauncherName,
        PlacementRecord,
        RunStarted,
        SupervisorRecord,
    )

# The run's supervisor as its launcher knows it (types.SupervisorRecord): its key
# ``runner`` names the launcher (as it did when process and tmux were the only ways).
SUPERVISOR_FILE = "supervisor.json"
LAUNCHERS = ("process", "tmux", "ray")
RAY_MISSING = "the ray executor needs Ray: pip install 'subagents[ray]'"


@dataclass(frozen=True)
class Placement:
    """Where and how a run's supervisor starts: a detached process here (``process``), a
    window of the ``subagents`` tmux session here (``tmux``), or a Ray actor on a cluster
    node (``ray``, at ``ray_address``; None: ``$RAY_ADDRESS``, else a ``ray start``
    cluster on this machine). On Ray, ``ray_shared_cwd`` says the runs' working
    directories exist at the same paths on every node (a shared filesystem); without it
    only a git repository reaches a node, sent there (``ships_cwd``). Built once from the
    settings and passed whole."""

    launcher: LauncherName = "process"
    ray_address: str | None = None
    ray_shared_cwd: bool = False

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise UsageError(
                f"unknown launcher {self.launcher!r} (known: {', '.join(LAUNCHERS)})", "runner"
            )

    @classmethod
    def of(cls, settings: Settings) -> Placement:
        """From the settings ``runner``, ``executor``, ``ray_address`` and ``ray_shared_cwd``
        (with the caller's overrides applied to them): on Ray the runner does not matter."""
        if settings.executor == "ray":
            return cls("ray", settings.ray_address, settings.ray_shared_cwd)
        return cls(settings.runner)

    @property
    def ships_cwd(self) -> bool:
        """Whether a run's repository is sent to where it runs (Ray, no shared filesystem)."""
        return self.launcher == "ray" and not self.ray_shared_cwd

    def to_record(self) -> PlacementRecord:
        record: PlacementRecord = {"launcher": self.launcher, "ray_address": self.ray_address}
        if self.launcher == "ray":
            record["ray_shared_cwd"] = self.ray_shared_cwd
        return record

    @classmethod
    def from_record(cls, record: PlacementRecord) -> Placement:
        # (core.upgrade gives a Ray job recorded before repositories travelled its shared cwd)
        shared = record.get("ray_shared_cwd", False)
        return cls(record["launcher"], record.get("ray_address"), shared)


class Launched(Protocol):
    """A started run's supervisor, as its launcher knows it: a local process
    (``LocalSupervisor``) or a run on a Ray node (``RayRun``). Every reader asks it."""

    @property
    def launcher(self) -> str:
        """The launcher's name: ``process``, ``tmux`` or ``ray``."""
        ...

    def alive(self) -> bool:
        """Whether the run may still write its result: its supervisor runs (for a remote
        run: the process relaying it here does)."""
        ...

    def terminate(self, sig: int) -> None:
        """Signal the supervisor, wherever it runs: SIGTERM aborts the run, SIGKILL ends it."""
        ...

    def lost(self) -> str | None:
        """Why the supervisor is gone without a result, when the launcher knows."""
        ...

    def where(self) -> ExecutorPlace | None:
        """Where the run executes, for ``result.json`` (None: on this machine)."""
        ...

    def orphaned(self, child: RunStarted | None, run_id: str) -> str | None:
        """The supervisor is gone without a result: end what is left of the run where it
        ran (its child's process group, its actor); returns what was done, for the run's
        error message. ``child``: the run's ``run_started`` event (pid and start time: see
        core.procs.end_recorded_group, the one rule for signalling a recorded pid)."""
        ...

    def reap(self, timeout: float) -> None:
        """Collect the supervisor's exit status once its result is out, without waiting."""
        ...

    def record(self) -> SupervisorRecord:
        """What ``supervisor.json`` says of it."""
        ...


class Launcher(Protocol):
    """One way to start a run's supervisor."""

    # Its name in a Placement and in supervisor.json.
    name: str
    # Whether warm spare supervisors (launchers/spares.py) serve its launches.
    keeps_spares: bool
    # Whether its supervisor prints progress lines on its stdout (a tmux window shows them).
    echo: bool

    def check(self) -> None:
        """Raise ``UsageError`` (one line) when this launcher cannot be used here."""
        ...

    def launch(
        self, run_dir: Path, spec: RunSpec, *, stopped: Callable[[], bool] | None = None
    ) -> Launched:
        """Start the supervisor of the run prepared in ``run_dir`` (``LaunchError``).
        ``stopped``: whether the job starting it was stopped meanwhile, for a launch that
        may wait (connecting to a Ray cluster), which then gives up."""
        ...

    def reattach(self, run_dir: Path, record: JsonObject, *, follow: bool = True) -> Launched:
        """The run as ``record`` (its supervisor.json, as read: checked here) describes it,
        started by another process; ``ValueError`` for a record it cannot read. ``follow``:
        this process takes over following it (a restarted job driver); else it only looks
        at it, and may stop it (``LaunchError``)."""
        ...


def supervisor_argv(run_dir: Path) -> list[str]:
    return handover.command(run_dir)


def write_record(run_dir: Path, launched: Launched) -> None:
    # Not kept through a power loss: the processes it names are gone with it, and a run
    # whose supervisor.json is missing or torn is one whose supervisor died starting.
    write_json_atomic(run_dir / SUPERVISOR_FILE, launched.record(), durable="none")


def read_record(run_dir: Path) -> JsonObject | None:
    """The run's ``supervisor.json`` as a JSON object (its launcher reads the rest); None
    while there is none (or it is unreadable)."""
    try:
        record = read_json(run_dir / SUPERVISOR_FILE)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
