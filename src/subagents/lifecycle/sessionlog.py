"""The session log: one small lifecycle entry per job event, appended to
``$SUBAGENTS_HOME/sessions/<session-id>.jsonl``.

Entries are lifecycle records only (start / complete / error / aborted), never progress
ticks; detail lives in the run directories. Every append is one ``write`` of one whole line
to a file opened with ``O_APPEND``, under an exclusive ``flock`` held just for that write, so
any number of writers in any number of processes never interleave. Readers skip a torn
(unterminated or unparseable) line.

Standard library only, and cheap to import.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from subagents.core.clock import epoch, iso
from subagents.core.files import DIR_MODE, FILE_MODE
from subagents.core.records import LIFECYCLE_EVENT_TYPES
from subagents.errors import UsageError
from subagents.present import outcome

try:  # not on Windows; there appends stay single writes, without the lock
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

# typing itself is not imported at run time (import cost).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeGuard

    from subagents.types import (
        AgentEvent,
        HookRecord,
        JobMode,
        JobResult,
        JobState,
        JsonObject,
        JsonValue,
        LifecycleEventType,
        LifecycleStatus,
        Usage,
    )

ENV_SESSION = "SUBAGENTS_SESSION"
DEFAULT_SESSION = "default"

EVENT_TYPES = LIFECYCLE_EVENT_TYPES
END_EVENT_TYPES = EVENT_TYPES[1:]  # a job's end, however it ended
# Short spellings accepted wherever a user names an event (hooks' ``on``, history filters).
SHORT_EVENT_TYPES: dict[str, LifecycleEventType] = {
    "start": "subagent:start",
    "complete": "subagent:complete",
    "error": "subagent:error",
    "aborted": "subagent:aborted",
}
MODES = ("single", "parallel", "chain", "council", "map")
ENTRY_STATUSES = ("completed", "failed", "aborted")
SUMMARY_MAX = 200

ENTRY_KEYS = (
    "type",
    "timestamp",
    "eventType",
    "jobId",
    "requestedBy",
    "startedAt",
    "completedAt",
    "durationMs",
    "model",
    "usage",
    "agentName",
    "pid",
    "mode",
    "status",
    "summary",
)

_SESSION_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")


# ---- where --------------------------------------------------------------------------


def _check_session_id(session_id: str, what: str = "session id") -> str:
    if not isinstance(session_id, str) or not _SESSION_ID_RE.fullmatch(session_id):
        raise UsageError(
            f"invalid {what} {session_id!r}: use 1-128 characters from A-Z a-z 0-9 . _ -",
            "session",
        )
    if session_id.startswith("."):
        raise UsageError(f"invalid {what} {session_id!r}: must not start with '.'", "session")
    return session_id


def session_path(home: Path, session_id: str) -> Path:
    """``home/sessions/<session_id>.jsonl``; UsageError for an id that is not path-safe
    (1-128 characters from ``A-Za-z0-9._-``, not starting with ``.``)."""
    return Path(home) / "sessions" / f"{_check_session_id(session_id)}.jsonl"


def default_session_id(env: Mapping[str, str] | None = None) -> str:
    """The session new entries go to: ``$SUBAGENTS_SESSION`` when set (and not empty),
    else ``"default"`` — one log for everything a user runs unless a parent names its own
    session. UsageError when ``$SUBAGENTS_SESSION`` is not a valid session id."""
    environ = os.environ if env is None else env
    value = environ.get(ENV_SESSION, "").strip()
    if not value:
        return DEFAULT_SESSION
    return _check_session_id(value, f"${ENV_SESSION}")


# ---- entries ------------------------------------------------------------------------


def _when(value: float | str | None) -> str | None:
    """An epoch time becomes ISO-8601 UTC; an ISO string (result.json's) is kept."""
    if value is None or isinstance(value, str):
        return value
    return iso(float(value))


def _is_event_type(name: object) -> TypeGuard[LifecycleEventType]:
    return name in EVENT_TYPES


def _is_mode(mode: object) -> TypeGuard[JobMode]:
    return mode in MODES


def _is_status(status: object) -> TypeGuard[LifecycleStatus]:
    return status in ENTRY_STATUSES


def normalize_event_type(name: str) -> LifecycleEventType | None:
    """``subagent:complete`` or its short form ``complete`` -> ``subagent:complete``;
    None for anything else."""
    if _is_event_type(name):
        return name
    return SHORT_EVENT_TYPES.get(name.strip().lower()) if isinstance(name, str) else None


def event_type_for(status: str) -> LifecycleEventType:
    """The eventType that ends a job with *status*: completed -> ``subagent:complete``,
    aborted -> ``subagent:aborted``, failed or timeout -> ``subagent:error``."""
    if status == "completed":
        return "subagent:complete"
    if status == "aborted":
        return "subagent:aborted"
    if status in ("failed", "timeout"):
        return "subagent:error"
    raise ValueError(f"unknown status {status!r}: expected completed, failed, aborted or timeout")


def _login() -> str | None:
    """The user's login as ``getpass.getuser`` finds it: the environment's, else the
    password database's for this uid (looked up once per process: ~0.6 ms each time)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if user := os.environ.get(name):
            return user
    return passwd_name(os.getuid())


@functools.cache
def passwd_name(uid: int) -> str | None:
    """``uid``'s name in the password database (None: no entry, or none to read)."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name or None
    except (ImportError, KeyError):
        return None


def _clip(text: str, limit: int = SUMMARY_MAX) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _usage(usage: Usage | None) -> Usage | None:
    if usage is None:
        return None
    return {
        "input": usage.get("input") or 0,
        "output": usage.get("output") or 0,
        "cacheRead": usage.get("cacheRead") or 0,
        "cacheWrite": usage.get("cacheWrite") or 0,
        "totalTokens": usage.get("totalTokens") or 0,
        "cost": usage.get("cost"),
    }


def entry(
    event_type: str,
    *,
    job_id: str | None,
    mode: str,
    agent_name: str | None,
    model: str | None,
    pid: int | None,
    status: str | None = None,
    started_at: float | str | None = None,
    completed_at: float | str | None = None,
    duration_ms: int | None = None,
    usage: Usage | None = None,
    summary: str = "",
    requested_by: str | None = None,
) -> AgentEvent:
    """One session-log entry, exactly DESIGN's shape (see ``ENTRY_KEYS``).

    - ``event_type``: one of ``EVENT_TYPES`` (ValueError otherwise).
    - ``status``: completed | failed | aborted, or None (a start); ``timeout`` is recorded as
      ``failed`` (the summary says it timed out). ValueError for anything else.
    - ``mode``: single | parallel | chain (ValueError otherwise).
    - ``agent_name``: for parallel and chain jobs, the agents joined with ``", "``.
    - times: epoch seconds (written as ISO-8601 UTC) or ISO strings as in result.json;
      ``durationMs`` is derived from them when not given and both are known.
    - ``usage``: result.json's usage shape (``input, output, cacheRead, cacheWrite,
      totalTokens, cost``); missing counts become 0, a missing cost null.
    - ``requestedBy``: *requested_by*, else the user's login when known, else ``"assistant"``.
    - ``summary``: whitespace collapsed, at most 200 characters (cut with ``…``).
    """
    if not _is_event_type(event_type):
        raise ValueError(
            f"invalid eventType {event_type!r}: expected one of {', '.join(EVENT_TYPES)}"
        )
    if not _is_mode(mode):
        raise ValueError(f"invalid mode {mode!r}: expected single, parallel or chain")
    if status == "timeout":
        status = "failed"
    if status is not None and not _is_status(status):
        raise ValueError(f"invalid status {status!r}: expected completed, failed or aborted")
    if duration_ms is None:
        start, end = epoch(started_at), epoch(completed_at)
        if start is not None and end is not None:
            duration_ms = max(0, round((end - start) * 1000))
    return {
        "type": "agent_event",
        "timestamp": iso(),
        "eventType": event_type,
        "jobId": job_id,
        "requestedBy": requested_by or _login() or "assistant",
        "startedAt": _when(started_at),
        "completedAt": _when(completed_at),
        "durationMs": duration_ms,
        "model": model,
        "usage": _usage(usage),
        "agentName": agent_name,
        "pid": pid,
        "mode": mode,
        "status": status,
        "summary": _clip(summary),
    }


def summarize(job_result: JobResult | JobState) -> str:
    """At most 200 characters saying what happened, from a job result
    (``{jobId, mode, status, runs: [result.json…], finalText, usage, durationMs}``), e.g.
    ``completed: scout — "first line of the answer"``, ``failed: worker — pi exited with
    code 3``, ``parallel 3/4 completed; failed: reviewer — timed out after 60s``."""
    mode = str(job_result.get("mode") or "single")
    status = str(job_result.get("status") or "unknown")
    runs = outcome.runs_of(job_result)
    if not runs:
        why = outcome.first_line(job_result.get("errorMessage"))
        return _clip(f"{status}: {mode} job" + (f" — {why}" if why else ""))
    # A budget's stop, a council's missing verdict: said before what came of it.
    what = " · ".join([*outcome.notes(job_result), outcome.detail(job_result)])
    if mode == "single" or (len(runs) == 1 and mode != "parallel"):
        run = runs[0]
        run_status = str(run.get("status") or status)
        word = "failed" if run_status == "timeout" else run_status
        return _clip(f"{word}: {outcome.agent_of(run)} — {what}")
    if mode == "parallel" and all(r.get("status") == "completed" for r in runs):
        return _clip(f"parallel {what}: {outcome.agent_names(job_result)}")
    return _clip(f"{mode} {what}")


def start_entry_for_job(state: JobState) -> AgentEvent:
    """The start entry of a job whose driver died before writing it (no driver's pid)."""
    requests = state["plan"].get("requests") or []
    models = [str(r["model"]) for r in requests if isinstance(r, dict) and r.get("model")]
    return entry(
        "subagent:start",
        job_id=state["jobId"],
        mode=state["mode"],
        agent_name=", ".join(dict.fromkeys(state.get("agents") or [])),
        model=", ".join(dict.fromkeys(models)) or None,
        pid=None,
        started_at=state.get("startedAt") or state.get("createdAt"),
        summary=f"{state['mode']} job started: {len(requests)} run(s)",
    )


def entry_for_job(
    job_result: JobResult | JobState,
    *,
    pid: int | None = None,
    requested_by: str | None = None,
) -> AgentEvent:
    """The closing entry for a finished job result (eventType from its status): a
    JobResult, or a finished job's JobState, read key by key."""
    status = str(job_result.get("status") or "failed")
    runs = outcome.runs_of(job_result)
    models = list(
        dict.fromkeys(
            str(r.get("model") or r.get("requestedModel"))
            for r in runs
            if r.get("model") or r.get("requestedModel")
        )
    )
    usage = job_result.get("usage")
    return entry(
        event_type_for(status),
        job_id=job_result.get("jobId"),
        mode=str(job_result.get("mode") or "single"),
        agent_name=outcome.agent_names(job_result),
        model=", ".join(models) if models else None,
        pid=pid,
        status=status,
        started_at=job_result.get("startedAt"),
        completed_at=job_result.get("completedAt"),
        duration_ms=job_result.get("durationMs"),
        usage=usage if isinstance(usage, dict) else None,
        summary=summarize(job_result),
        requested_by=requested_by,
    )


# ---- writing ------------------------------------------------------------------------


def _make_dirs(directory: Path) -> None:
    if directory.is_dir():
        return
    missing = []
    d = directory
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(d, DIR_MODE)  # mkdir's mode is filtered by the umask


def append(path: Path, obj: AgentEvent | HookRecord) -> None:
    """Append *obj* as one compact JSON line: ONE ``os.write`` of the whole line, to a file
    opened ``O_APPEND|O_CREAT`` (mode 0600; missing parent dirs are made 0700), under an
    exclusive ``flock`` held just for the write, then ``fsync``.

    Should an earlier writer have died mid-line (a torn tail), the line starts with a newline
    so that the new entry stays whole and readable. Raises OSError / TypeError / ValueError.
    """
    data = (
        json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    )
    path = Path(path)
    _make_dirs(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            written = os.write(fd, data)
            while written < len(data):  # only on a short write (e.g. disk nearly full)
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# ---- reading ------------------------------------------------------------------------


class ReadResult:
    """What :func:`read_with_problems` found (a plain class: dataclasses import slowly)."""

    __slots__ = ("bad_lines", "entries", "torn_tail")

    def __init__(self) -> None:
        self.entries: list[JsonObject] = []
        self.bad_lines = 0  # complete lines that are not a JSON object (skipped)
        self.torn_tail = False  # the last line was unterminated or unparseable (skipped)

    def __repr__(self) -> str:
        return (
            f"ReadResult(entries=<{len(self.entries)}>, bad_lines={self.bad_lines}, "
            f"torn_tail={self.torn_tail})"
        )


def _no_number(_constant: str) -> None:
    return None


# NaN and Infinity (a log another program damaged) read as null: no entry read here may make
# what is written from it invalid JSON. (One decoder: json.loads makes one per call.)
_DECODER = json.JSONDecoder(parse_constant=_no_number)


def parse_line(line: bytes) -> JsonObject | None:
    """A line of a session log as a JSON object (an entry is told apart from another line
    by its reader: ``records.is_agent_event``), or None."""
    try:
        obj: JsonValue = _DECODER.decode(line.decode("utf-8", "surrogatepass"))
    except ValueError:  # includes UnicodeDecodeError
        return None
    return obj if isinstance(obj, dict) else None


def read_with_problems(path: Path) -> ReadResult:
    """All complete entries of *path* and a count of what was skipped. A missing file
    reads as empty."""
    out = ReadResult()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return out
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: empty, or an unterminated line
    if tail.strip():
        out.torn_tail = True
    complete = [line for line in lines if line.strip()]
    for i, line in enumerate(complete):
        obj = parse_line(line)
        if obj is not None:
            out.entries.append(obj)
        elif i == len(complete) - 1 and not tail.strip():
            out.torn_tail = True
        else:
            out.bad_lines += 1
    return out


def read(path: Path) -> list[JsonObject]:
    """All complete entries of *path*; torn or bad lines are skipped silently."""
    return read_with_problems(path).entries


def entries(path: Path) -> Iterator[JsonObject]:
    """The complete entries of *path* one at a time, as :func:`read` finds them, holding one
    line at a time (a long log is never all in memory); a missing file has none."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below, also when the caller stops early)
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                return  # a torn last line: not an entry (yet)
            if line.strip():
                obj = parse_line(line)
                if obj is not None:
                    yield obj
