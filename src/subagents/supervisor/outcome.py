"""How a run ended: the completion rules (DESIGN "Completion semantics"), as one decision.

The outcome comes from the captured terminal event, never from how the child ended or the
cleanup signal; a stop the supervisor caused (timeout, abort, stall, tool timeout) names
itself; without a terminal event, a signal, an exit code or a missing answer is the cause.
Standard library only (the supervisor imports it).
"""

from __future__ import annotations

from subagents.core import events as ev

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.backends import Normalizer
    from subagents.supervisor.phase import StopCause
    from subagents.supervisor.spec import RunSpec
    from subagents.types import RunStatus


class Ended:
    """A run whose child is gone, as the supervisor saw it end: what ``decide`` reads.

    ``terminal``: the child's last event ended its turn (its answer, or its failure);
    ``cause``: a stop of the supervisor's (timeout, abort, stall, tool timeout, budget);
    ``abort_signal`` / ``abort_why``: the signal that asked for the stop and, when it was
    not a person's, why; ``exit_code`` / ``sig``: how the child exited; ``stderr_tail``: the
    end of its stderr, read only when needed; ``limit_error``: the budget's message when one
    stopped the run.
    """

    __slots__ = (
        "abort_signal",
        "abort_why",
        "cause",
        "exit_code",
        "limit_error",
        "norm",
        "sig",
        "spawn_error",
        "spec",
        "stderr_tail",
        "terminal",
    )

    def __init__(
        self,
        spec: RunSpec,
        norm: Normalizer,
        stderr_tail: Callable[[], str],
        *,
        terminal: bool,
        spawn_error: str | None = None,
        cause: StopCause | None = None,
        abort_signal: str | None = None,
        abort_why: str | None = None,
        exit_code: int | None = None,
        sig: str | None = None,
        limit_error: str | None = None,
    ) -> None:
        self.spec = spec
        self.norm = norm
        self.stderr_tail = stderr_tail
        self.terminal = terminal
        self.spawn_error = spawn_error
        self.cause = cause
        self.abort_signal = abort_signal
        self.abort_why = abort_why
        self.exit_code = exit_code
        self.sig = sig
        self.limit_error = limit_error


def decide(run: Ended) -> tuple[RunStatus, str | None]:
    """``(status, error message)`` for a run whose child is gone. A budget that stopped it
    (``limit_error``) fails it, unless an answer given before the stop completes it."""
    spec, norm = run.spec, run.norm
    error: str | None = run.spawn_error
    status: RunStatus
    if run.spawn_error:
        status = "failed"
    elif run.cause == "timeout":
        status, error = "timeout", f"timed out after {spec.timeout:g}s"
    elif run.cause == "aborted":
        why = run.abort_why or f"the supervisor received {run.abort_signal}"
        status, error = "aborted", f"aborted: {why}"
    elif run.cause == "stalled":
        status = "failed"
        error = (
            f"stalled: no event for {spec.stallTimeout:g} s with no tool call in flight;"
            " stopped by the stall watchdog (on_stall = abort)"
        )
    elif run.cause == "tool_timeout":
        status = "failed"
        error = f"a tool call ran longer than the tool timeout of {spec.toolTimeout:g} s"
    elif run.limit_error and not (run.terminal and not norm.failed):
        # Stopped by its budget (here, or by the CLI's own bound behind it): its partial
        # output and usage are kept; an answer that came first would have completed it.
        status, error = "failed", run.limit_error
    elif run.terminal:
        # The outcome comes from the captured terminal event, not from how the child ended.
        if norm.failed or norm.stop_reason in ev.TERMINAL_FAILURE:
            status = "failed"
            error = norm.error_message or f"the model stopped with {norm.stop_reason}"
        else:
            status = "completed"
    else:
        status = "failed"
        name = spec.backend
        if run.sig is not None:
            error = f"{name} was killed by {run.sig} before a final answer"
        elif run.exit_code:
            last = _last_line(run.stderr_tail())
            error = f"{name} exited with code {run.exit_code}" + (f": {last}" if last else "")
        else:
            error = f"{name} exited without a final answer"
        if norm.error_message:
            error = f"{error} (last error: {norm.error_message})"
    return status, error


def with_write_error(
    status: RunStatus, error: str | None, write_error: str | None
) -> tuple[RunStatus, str | None]:
    """A record that could not be written whole (a full disk) is not a completed run."""
    if write_error is not None and status == "completed":
        # The answer is kept (finalText), but the run's record is not whole: say why.
        status = "failed"
        error = f"{write_error} (the answer is kept in finalText)"
    elif write_error is not None:
        error = f"{error or status}; {write_error}"
    return status, error


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""
