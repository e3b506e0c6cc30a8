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

    def review(self, req: RunRequest) -> JobRun:
        """Run a reviewer (a run of its own, not one of the job's) to its end."""
        ...


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
    """A run's gate: ``verify`` (the command; ``{field}`` is a map row's) with its timeout
    in seconds, and/or ``review`` (the reviewer's run request, as a record; ``reviewer``
    as it was given); how many checks it gets."""

    verify: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    attempts: int = DEFAULT_ATTEMPTS
    reviewer: str | None = None
    review: JsonObject | None = None

    def to_record(self) -> JsonObject:
        return {
            "verify": self.verify,
            "timeout": self.timeout,
            "attempts": self.attempts,
            "reviewer": self.reviewer,
            "review": self.review,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, object] | None) -> Gate | None:
        if not record:
            return None
        verify, review = record.get("verify"), record.get("review")
        if not isinstance(verify, str) and not isinstance(review, dict):
            return None
        timeout, attempts, reviewer = (record.get(k) for k in ("timeout", "attempts", "reviewer"))
        return cls(
            verify if isinstance(verify, str) else None,
            float(timeout) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT,
            attempts if isinstance(attempts, int) else DEFAULT_ATTEMPTS,
            reviewer if isinstance(reviewer, str) else None,
            review if isinstance(review, dict) else None,
        )


def gate_of(
    verify: str | None,
    timeout: float | None,
    attempts: int | None,
    where: str = "verify",
    reviewer: str | None = None,
    review: RunRequest | None = None,
) -> Gate | None:
    """A checked gate from a step's fields (None without a command or a reviewer)."""
    if verify is None and review is None:
        return None
    if verify is not None:
        argv_of(verify, where)
    return Gate(
        verify,
        timeout or DEFAULT_TIMEOUT,
        attempts or DEFAULT_ATTEMPTS,
        reviewer,
        review.to_record() if review is not None else None,  # type: ignore[arg-type]
    )


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
    result: JobRun, gate: Gate, attempts: list[JsonObject], failure: str | None
) -> JobRun:
    """The run's result with its ``verification`` (and, ``failure``: why the gate did not
    pass, its status ``failed``), rewritten in its ``result.json``."""
    updated: JsonObject = dict(result)  # type: ignore[arg-type]
    verification: JsonObject = {
        "command": gate.verify,
        "attempts": attempts,  # type: ignore[dict-item]
        "passed": failure is None,
    }
    reviews = [a["review"] for a in attempts if isinstance(a.get("review"), dict)]
    if reviews:
        verification["review"] = reviews[-1]
    updated["verification"] = verification
    if failure is not None and updated.get("status") == "completed":
        updated["status"] = "failed"
        updated["errorMessage"] = failure
    paths = updated.get("paths")
    events = paths.get("events") if isinstance(paths, dict) else None
    if isinstance(events, str):
        with contextlib.suppress(OSError):
            write_json_atomic(Path(events).parent / "result.json", updated)
    return updated  # type: ignore[return-value]


def _check_failure(gate: Gate, check: Check, n: int) -> str:
    tail = check.tail.splitlines()[-1] if check.tail else ""
    return (
        f"the acceptance gate `{gate.verify}` failed: it {check.how(gate.timeout)}"
        f" after {n} attempt{'s' if n != 1 else ''}"
        + (f"; its output ends: {tail}" if tail else "")
    )


def verified(job: Repairs, req: RunRequest, gate: Gate, result: RunResult) -> JobRun:
    """A run of ``job`` (``result``: completed) through its gate: its command checked, then
    its reviewer asked; a failure of either is a repair turn (a continuation of its
    session) while its attempts allow; the last run's result, with its ``verification``."""
    from subagents.jobs import review as reviewing

    argv = argv_of(gate.verify) if gate.verify is not None else None
    attempts: list[JsonObject] = []
    while True:
        record: JsonObject = {}
        repair: str | None = None
        failure: str | None = None
        run_dir = Path(result["paths"]["events"]).parent
        if argv is not None:
            with working_tree(result) as tree:
                check = run_check(
                    argv,
                    tree,
                    {**job.env, **req.env},
                    gate.timeout,
                    run_dir / f"verify-{len(attempts) + 1}.log",
                )
            record.update(check.record())
            if check.exit_code != 0 or check.timed_out:
                repair = repair_task(str(gate.verify), check, gate.timeout)
                failure = _check_failure(gate, check, len(attempts) + 1)
        if repair is None and gate.review is not None:
            asked = RunRequest.from_record(gate.review)  # type: ignore[arg-type]
            review = job.review(replace(asked, task=reviewing.review_task(req.task, result)))
            verdict = reviewing.verdict_of(review)
            record["review"] = {
                "reviewer": gate.reviewer,
                "runId": review.get("runId"),
                "approve": verdict[0] if verdict else None,
                "issues": verdict[1] if verdict else [],  # type: ignore[dict-item]
            }
            if verdict is None:
                attempts.append(record)
                why = review.get("errorMessage") or "no verdict in its answer"
                failure = f"the reviewer {gate.reviewer} gave no verdict: {why}"
                return record_verification(result, gate, attempts, failure)
            if not verdict[0]:
                repair = reviewing.repair_task(verdict[1])
                n = len(attempts) + 1
                failure = (
                    f"the reviewer {gate.reviewer} did not approve after {n}"
                    f" attempt{'s' if n != 1 else ''}: "
                    + "; ".join(verdict[1] or ["no issues given"])
                )
        attempts.append(record)
        if repair is None:
            return record_verification(result, gate, attempts, None)
        if len(attempts) >= gate.attempts or job.cancelled:
            return record_verification(result, gate, attempts, failure)
        turn = replace(req, task=repair, continue_from=result["runId"], gate=None)
        handle = job.launch(turn)
        if not isinstance(handle, RunHandle):  # could not continue: the failure stands
            return record_verification(result, gate, attempts, failure)
        current = job.follow(handle)
        if current.get("status") != "completed" or "paths" not in current:
            return record_verification(current, gate, attempts, failure)
        result = current
