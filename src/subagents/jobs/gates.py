"""Acceptance gates (docs/gates.md): a command that must pass before a run counts.

After a run ends ``completed``, its gate's command runs in the run's working tree (an
isolated run's branch, checked out aside for the check), argv from ``shlex.split`` (never
a shell), with a timeout, the run's environment; exit 0 passes. On a failure the child gets
a repair turn quoting the command and the tail of its output: a *continuation* of its own
session (``continue``), for every backend (live control is not used: the run has ended
when its gate runs). Up to ``attempts`` checks; then the run is ``failed`` with an
``errorMessage`` naming the gate, its exit code and the output's tail. Each check's whole
output is kept in the checked run's directory (``verify-N.log``); the last run's
``result.json`` gains ``verification: {command, attempts: [{exitCode, durationMs,
outputTail}], passed}``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from subagents.core.files import write_json_atomic
from subagents.errors import PlanError
from subagents.runs import RunHandle, RunRequest

if TYPE_CHECKING:
    from subagents.types import JobRun, JsonObject, RunNotStarted, RunResult


class Repairs(Protocol):
    """What a gate needs of the job whose run it checks: its environment, whether it was
    stopped, and starting and following a repair turn as that same run of the job."""

    env: dict[str, str]

    @property
    def cancelled(self) -> bool: ...

    def launch(self, req: RunRequest) -> RunHandle | RunNotStarted: ...

    def follow(self, handle: RunHandle) -> JobRun: ...


DEFAULT_TIMEOUT = 600.0
DEFAULT_ATTEMPTS = 2
TAIL_BYTES = 2000
LOG_MAX = 1 << 20  # what a check's log keeps: its last MiB

REPAIR = (
    "Your work did not pass its acceptance check: `{command}` {how}.\n"
    "The end of its output:\n```\n{tail}\n```\n"
    "Fix what it reports, then give your final answer again."
)


@dataclass(frozen=True)
class Gate:
    """A run's gate: ``verify`` (the command; ``{field}`` is a map row's), its timeout in
    seconds and how many checks it gets."""

    verify: str
    timeout: float = DEFAULT_TIMEOUT
    attempts: int = DEFAULT_ATTEMPTS

    def to_record(self) -> JsonObject:
        return {"verify": self.verify, "timeout": self.timeout, "attempts": self.attempts}

    @classmethod
    def from_record(cls, record: Mapping[str, object] | None) -> Gate | None:
        if not record or not isinstance(record.get("verify"), str):
            return None
        timeout, attempts = record.get("timeout"), record.get("attempts")
        return cls(
            str(record["verify"]),
            float(timeout) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT,
            attempts if isinstance(attempts, int) else DEFAULT_ATTEMPTS,
        )


def gate_of(
    verify: str | None, timeout: float | None, attempts: int | None, where: str = "verify"
) -> Gate | None:
    """A checked gate from a step's fields (None without a command)."""
    if verify is None:
        if timeout is not None or attempts is not None:
            raise PlanError(f"{where}: a gate's timeout and attempts need its command (verify)")
        return None
    argv_of(verify, where)
    if attempts is not None and attempts < 1:
        raise PlanError(f"{where}_attempts: must be 1 or more, not {attempts}")
    return Gate(verify, timeout or DEFAULT_TIMEOUT, attempts or DEFAULT_ATTEMPTS)


def argv_of(command: str, where: str = "verify") -> list[str]:
    """The command's argv (``shlex.split``, no shell); a ``PlanError`` when it is empty or
    unbalanced."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise PlanError(f"{where}: cannot split the command {command!r}: {exc}") from None
    if not argv:
        raise PlanError(f"{where}: the command is empty")
    return argv


@dataclass
class Check:
    exit_code: int
    duration_ms: int
    tail: str
    timed_out: bool = False

    def record(self) -> JsonObject:
        return {"exitCode": self.exit_code, "durationMs": self.duration_ms, "outputTail": self.tail}

    def how(self, timeout: float) -> str:
        if self.timed_out:
            return f"did not finish within {timeout:g} s"
        if self.exit_code == 127:
            return "could not be started"
        return f"exited {self.exit_code}"


def run_check(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float, log: Path
) -> Check:
    """Run the command once (its own process group, stdin closed, stdout and stderr to
    ``log``); killed with its group at the timeout."""
    start = time.monotonic()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            os.write(fd, f"{argv[0]}: {exc.strerror or exc}\n".encode())
            return Check(127, _ms(start), _tail(log))
        timed_out = False
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
    finally:
        os.close(fd)
    _bound(log)
    return Check(code, _ms(start), _tail(log), timed_out)


def _ms(start: float) -> int:
    return round((time.monotonic() - start) * 1000)


def _tail(log: Path) -> str:
    with open(log, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
        return f.read().decode("utf-8", "replace").strip()


def _bound(log: Path) -> None:
    """A check's log keeps its last LOG_MAX bytes (a runaway command fills no disk)."""
    if log.stat().st_size > LOG_MAX:
        with open(log, "rb") as f:
            f.seek(-LOG_MAX, os.SEEK_END)
            kept = f.read()
        log.write_bytes(kept)


@contextlib.contextmanager
def working_tree(result: RunResult) -> Iterator[Path]:
    """Where the run's work is: its cwd, or an isolated run's commit checked out aside
    (its worktree is gone once it ended) and removed after the check."""
    worktree = result.get("worktree")
    if not isinstance(worktree, dict) or not worktree.get("commit"):
        yield Path(result["cwd"])
        return
    from subagents.worktree import git

    repo = Path(str(worktree["repo"]))
    with tempfile.TemporaryDirectory(prefix="subagents-verify-") as tmp:
        tree = Path(tmp) / "tree"
        git(["worktree", "add", "--detach", str(tree), str(worktree["commit"])], repo)
        try:
            subdir = worktree.get("subdir")
            yield tree / str(subdir) if subdir else tree
        finally:
            git(["worktree", "remove", "--force", str(tree)], repo, check=False)


def repair_task(command: str, check: Check, timeout: float) -> str:
    return REPAIR.format(command=command, how=check.how(timeout), tail=check.tail or "(none)")


def record_verification(
    result: JobRun, command: str, checks: list[Check], passed: bool, timeout: float
) -> JobRun:
    """The run's result with its ``verification`` (and, failed, its status and why),
    rewritten in its ``result.json``."""
    updated: JsonObject = dict(result)  # type: ignore[arg-type]
    updated["verification"] = {
        "command": command,
        "attempts": [c.record() for c in checks],
        "passed": passed,
    }
    if not passed and checks and updated.get("status") == "completed":
        last = checks[-1]
        tail = last.tail.splitlines()[-1] if last.tail else ""
        updated["status"] = "failed"
        updated["errorMessage"] = (
            f"the acceptance gate `{command}` failed: it {last.how(timeout)}"
            f" after {len(checks)} attempt{'s' if len(checks) != 1 else ''}"
            + (f"; its output ends: {tail}" if tail else "")
        )
    paths = updated.get("paths")
    events = paths.get("events") if isinstance(paths, dict) else None
    if isinstance(events, str):
        with contextlib.suppress(OSError):
            write_json_atomic(Path(events).parent / "result.json", updated)
    return updated  # type: ignore[return-value]


def verified(job: Repairs, req: RunRequest, gate: Gate, result: RunResult) -> JobRun:
    """A run of ``job`` (``result``: completed) through its gate: checked, repaired by
    continuations of its session as its attempts allow; the last run's result, with its
    ``verification``."""
    argv = argv_of(gate.verify)
    checks: list[Check] = []
    current: JobRun = result
    while True:
        run_dir = Path(result["paths"]["events"]).parent
        with working_tree(result) as tree:
            check = run_check(
                argv,
                tree,
                {**job.env, **req.env},
                gate.timeout,
                run_dir / f"verify-{len(checks) + 1}.log",
            )
        checks.append(check)
        if check.exit_code == 0 and not check.timed_out:
            return record_verification(result, gate.verify, checks, True, gate.timeout)
        if len(checks) >= gate.attempts or job.cancelled:
            return record_verification(result, gate.verify, checks, False, gate.timeout)
        repair = replace(
            req,
            task=repair_task(gate.verify, check, gate.timeout),
            continue_from=result["runId"],
            gate=None,
        )
        handle = job.launch(repair)
        if not isinstance(handle, RunHandle):  # could not continue: the gate's failure stands
            return record_verification(result, gate.verify, checks, False, gate.timeout)
        current = job.follow(handle)
        if current.get("status") != "completed" or "paths" not in current:
            return record_verification(current, gate.verify, checks, False, gate.timeout)
        result = current
