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
    from subagents.supervisor.spec import RunSpec
    from subagents.types import RunStatus


def decide(
    spec: RunSpec,
    norm: Normalizer,
    *,
    spawn_error: str | None,
    stop_cause: str | None,
    abort_signal: str | None,
    exit_code: int | None,
    sig: str | None,
    stderr_tail: Callable[[], str],
    abort_why: str | None = None,
    limit_error: str | None = None,
) -> tuple[RunStatus, str | None]:
    """``(status, error message)`` for a run whose child is gone. ``limit_error``: a budget
    stopped it (its message); an answer given before the stop still completes the run."""
    error: str | None = spawn_error
    status: RunStatus
    if spawn_error:
        status = "failed"
    elif stop_cause == "timeout":
        status, error = "timeout", f"timed out after {spec.timeout:g}s"
    elif stop_cause == "aborted":
        why = abort_why or f"the supervisor received {abort_signal}"
        status, error = "aborted", f"aborted: {why}"
    elif stop_cause == "stalled":
        status = "failed"
        error = (
            f"stalled: no event for {spec.stallTimeout:g} s with no tool call in flight;"
            " stopped by the stall watchdog (on_stall = abort)"
        )
    elif stop_cause == "tool_timeout":
        status = "failed"
        error = f"a tool call ran longer than the tool timeout of {spec.toolTimeout:g} s"
    elif limit_error and not (norm.terminal and not norm.failed):
        # Stopped by its budget (here, or by the CLI's own bound behind it): its partial
        # output and usage are kept; an answer that came first would have completed it.
        status, error = "failed", limit_error
    elif norm.terminal:
        # The outcome comes from the captured terminal event, not from how the child ended.
        if norm.failed or norm.stop_reason in ev.TERMINAL_FAILURE:
            status = "failed"
            error = norm.error_message or f"the model stopped with {norm.stop_reason}"
        else:
            status = "completed"
    else:
        status = "failed"
        name = spec.backend
        if sig is not None:
            error = f"{name} was killed by {sig} before a final answer"
        elif exit_code:
            last = _last_line(stderr_tail())
            error = f"{name} exited with code {exit_code}" + (f": {last}" if last else "")
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
