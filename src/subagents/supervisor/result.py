"""The shape of ``result.json``, built the same way by the supervisor and by a monitor."""

from __future__ import annotations

import time
from pathlib import Path

from subagents.core import events as ev
from subagents.supervisor.spec import RunSpec

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from subagents.types import (
        Event,
        ExecutorPlace,
        RunPaths,
        RunResult,
        RunStatus,
        Usage,
        WorktreeRecord,
    )

# CLI exit codes for each status (DESIGN: Command line).
EXIT_CODES = {"completed": 0, "failed": 1, "aborted": 130, "timeout": 124}


def artifact_paths(run_dir: Path) -> RunPaths:
    d = run_dir.resolve()
    return {
        "events": str(d / "events.jsonl"),
        "raw": str(d / "raw.jsonl"),
        "transcript": str(d / "transcript.md"),
        "stderr": str(d / "stderr.log"),
    }


def build_result(
    spec: RunSpec,
    run_dir: Path,
    *,
    status: RunStatus,
    started_at: float,
    completed_at: float | None = None,
    stop_reason: str | None = None,
    raw_stop_reason: str | None = None,
    final_text: str = "",
    error_message: str | None = None,
    exit_code: int | None = None,
    signal: str | None = None,
    forced_cleanup: bool = False,
    usage: Usage | None = None,
    tool_calls: int = 0,
    model: str | None = None,
    diagnostics: str | None = None,
    executor: ExecutorPlace | None = None,
    session_id: str | None = None,
) -> RunResult:
    # At the end of a run, not on the supervisor's start path.
    from subagents.core.clock import iso
    from subagents.core.records import RESULT_VERSION, RUN_STATUSES

    assert status in RUN_STATUSES, status
    done = completed_at if completed_at is not None else time.time()
    result: RunResult = {
        "version": RESULT_VERSION,
        "runId": spec.runId,
        "jobId": spec.jobId,
        "agent": spec.agent,
        "agentSource": spec.agentSource,
        "backend": spec.backend,
        "task": spec.task,
        "cwd": spec.cwd,
        "requestedModel": spec.requestedModel,
        "model": model,
        "status": status,
        "stopReason": stop_reason,
        "rawStopReason": raw_stop_reason,
        "finalText": final_text,
        "errorMessage": error_message,
        "exitCode": exit_code,
        "signal": signal,
        "forcedCleanup": forced_cleanup,
        "usage": ev.priced(usage) if usage is not None else ev.empty_usage(),
        "toolCalls": tool_calls,
        "startedAt": iso(started_at),
        "completedAt": iso(done),
        "durationMs": max(0, round((done - started_at) * 1000)),
        "paths": artifact_paths(run_dir),
        "diagnostics": diagnostics if status != "completed" else None,
        "sessionId": session_id,
        "continuedFrom": spec.continuedFrom,
        "worktree": None,
    }
    if executor is not None:  # where it ran, when not here (the local executor)
        result["executor"] = executor
    return result


def finish_worktree(result: RunResult, spec: RunSpec, run_dir: Path) -> None:
    """An isolated run's changes committed on its branch, its patch written, its worktree
    tidied; ``result["worktree"]`` says what happened. Never raises: a git failure is
    recorded, and the run's own outcome stands."""
    record = spec.worktree
    if not record:
        return
    from subagents.worktree import finalize

    first_line = (spec.task.strip().splitlines() or [""])[0][:72]
    try:
        if record.get("shipped") and not Path(record.get("path", "")).is_dir():
            # Sent to a Ray node, whose relay did not bring it back: nothing of it is here.
            raise RuntimeError("the run's worktree was on its Ray node, and nothing came back")
        result["worktree"] = finalize(
            record,
            run_dir,
            message=f"subagents run {spec.runId}: {first_line}",
            keep=spec.keepWorktree,
        )
    except Exception as exc:
        # (.get: the record came from meta.json, and nothing here may raise)
        failed: WorktreeRecord = {
            "repo": record.get("repo", ""),
            "path": record.get("path", ""),
            "branch": record.get("branch", ""),
            "base": record.get("base", ""),
            "subdir": record.get("subdir", "."),
            "error": f"could not record the run's changes: {exc}",
        }
        result["worktree"] = failed


STDERR_TAIL_BYTES = 4000


def spec_of(run_dir: Path) -> RunSpec:
    """The run's spec from ``meta.json``, or a stand-in naming only the run when unreadable."""
    from subagents.core.files import read_json

    try:
        return RunSpec.from_dict(read_json(run_dir / "meta.json"))
    except (OSError, ValueError, TypeError, AttributeError):
        return RunSpec(runId=run_dir.name, backend="unknown", task="", cwd="", argv=[])


def publish_ended(
    run_dir: Path,
    *,
    status: RunStatus,
    error_message: str,
    spec: RunSpec | None = None,
    started_at: float | None = None,
    tool_calls: int = 0,
    executor: ExecutorPlace | None = None,
    events: list[Event] | None = None,
) -> RunResult:
    """Write the result of a run that ended without its supervisor saying how (it could not
    start, or died): built, diagnosed and published once like any result. Returns the result
    that is on disk, whoever won the race to publish it: one finisher at a time holds the
    run (:func:`finishing`), so two readers that found the supervisor dead never both
    commit an isolated run's changes, nor publish a result the other's commit contradicts.
    ``events``: what the run recorded before its supervisor died, which the result is
    rebuilt from as far as it goes (usage, model, last answer, messages, limit, end time)."""
    from subagents.core.files import read_json
    from subagents.core.records import is_run_result

    spec = spec or spec_of(run_dir)
    begun = started_at or spec.createdAt or time.time()
    result = build_result(
        spec,
        run_dir,
        status=status,
        started_at=begun,
        error_message=error_message,
        tool_calls=tool_calls,
        executor=executor,
    )
    if events:
        _rebuild(result, events, begun)
    with finishing(run_dir):
        if not (run_dir / "result.json").exists():
            finish_worktree(result, spec, run_dir)
            try:
                publish_result(run_dir, attach_diagnostics(result, run_dir))
            except OSError as exc:
                # Nowhere to write it (a full disk): the caller still gets the true record.
                result["errorMessage"] = f"{error_message}; {cannot_write(exc)}"
                return result
    try:
        on_disk = read_json(run_dir / "result.json")
    except (OSError, ValueError):
        return result
    return on_disk if is_run_result(on_disk) else result


def _rebuild(result: RunResult, events: list[Event], started_at: float) -> None:
    """Fill ``result`` from a dead supervisor's events: its last running totals, the model
    and answer it last reported, the messages sent and taken, the limit reached, and the
    end as the time it was last heard of (never the time someone looked)."""
    from subagents.core.clock import iso

    sent: set[str] = set()
    delivered: set[str] = set()
    last_ts = started_at
    for event in events:
        last_ts = max(last_ts, float(event.get("ts") or 0.0))
        if event["type"] == "usage":
            result["usage"] = ev.priced(ev.usage_of(event))
        elif event["type"] == "run_started" and result["model"] is None:
            result["model"] = event.get("model")
        elif event["type"] == "assistant_text":
            result["model"] = event.get("model") or result["model"]
            result["finalText"] = event["text"] or result["finalText"]  # (a tool call's is "")
            result["stopReason"] = event["stopReason"]
            result["rawStopReason"] = event["rawStopReason"]
        elif event["type"] == "user_message":
            # a message refused when it was sent was never the run's
            if event["id"] not in sent and event["receipt"] != "refused":
                sent.add(event["id"])
            if event["receipt"] == "delivered":
                delivered.add(event["id"])
        elif event["type"] == "limit":
            result["limit"] = {
                "kind": event["kind"],
                "limit": event["limit"],
                "used": event["used"],
                "action": event["action"],
                "scope": event["scope"],
            }
    result["messages"] = {"sent": len(sent), "delivered": len(delivered & sent)}
    result["completedAt"] = iso(last_ts)
    result["durationMs"] = max(0, round((last_ts - started_at) * 1000))


def finishing(run_dir: Path) -> AbstractContextManager[None]:
    """The run held by its one finisher (a lock on its directory) while its changes are
    committed and its result published: the supervisor, or a reader that found it dead."""
    import contextlib

    from subagents.core.files import locked

    # (no directory: nothing of the run to finish, and nothing to make by locking it)
    return locked(run_dir) if run_dir.is_dir() else contextlib.nullcontext()


KEEP_WHEN_FULL = 32 * 1024


def cannot_write(exc: OSError) -> str:
    from subagents.core.files import describe_os_error

    return f"could not write result.json: {describe_os_error(exc)}"


def publish_result(run_dir: Path, result: RunResult) -> bool:
    """Publish ``result`` once (see publish_once). On a full disk, even after the run's
    reserved space is given back, a smaller record is tried (the answer cut to its first
    32 KiB, no diagnostics) so that the run still ends on disk with the true cause."""
    from subagents.core.files import disk_full, publish_once

    try:
        return publish_once(run_dir / "result.json", result)
    except OSError as exc:
        if not disk_full(exc):
            raise
        smaller = result.copy()
        text = smaller["finalText"]
        if len(text) > KEEP_WHEN_FULL:
            smaller["finalText"] = text[:KEEP_WHEN_FULL]
        smaller["diagnostics"] = None
        smaller["errorMessage"] = "; ".join(
            x for x in (result.get("errorMessage"), cannot_write(exc) + " in full") if x
        )
        if smaller["status"] == "completed":
            smaller["status"] = "failed"
        return publish_once(run_dir / "result.json", smaller)


def attach_diagnostics(result: RunResult, run_dir: Path) -> RunResult:
    """Render the failure body from what the run left on disk; never raises."""
    from subagents.core.files import read_events, read_tail

    try:
        from subagents.present.diagnostics import render as render_diagnostics

        result["diagnostics"] = render_diagnostics(
            result,
            read_events(run_dir / "events.jsonl"),
            stderr_tail=read_tail(run_dir / "stderr.log", STDERR_TAIL_BYTES),
            raw_path=result["paths"]["raw"],
            events_path=result["paths"]["events"],
        )
    except Exception as exc:  # diagnostics must never block result.json
        result["diagnostics"] = (
            f"## Error\n{result.get('errorMessage')}\n\n(diagnostics failed: {exc!r})\n"
        )
    return result
