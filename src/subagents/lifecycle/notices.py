"""Notices of job ends, each told once: which end entries of a session's log a reader (a
Claude Code hook, a pi package) has not announced yet.

A small state file per session and reader, ``$SUBAGENTS_HOME/notices/<reader>/<session>.json``
(``{"offset": bytes of the log consumed, "announced": [job ids]}``), read and replaced under
an exclusive ``flock`` on a lock file beside it, so two readers racing (two prompts, two
hooks) never announce the same end twice. Only the log's new bytes are read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from subagents.core.childtext import neutralize
from subagents.core.files import make_private_dir, read_json, write_json_atomic
from subagents.core.records import is_agent_event
from subagents.core.tail import LineTail
from subagents.lifecycle.sessionlog import END_EVENT_TYPES, parse_line, session_path
from subagents.present import outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import AgentEvent, JobState, JsonObject

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: no lock there
    fcntl = None  # type: ignore[assignment]

KEEP_IDS = 2000  # job ids remembered (only matters if a log is rewritten from scratch)


def _state_file(home: Path, session_id: str, reader: str) -> Path:
    log = session_path(home, session_id)  # checks the session id
    session_path(home, reader)  # the reader name obeys the same rule
    return Path(home) / "notices" / reader / f"{log.stem}.json"


def _load(path: Path, log: Path) -> JsonObject:
    """The reader's state: a new reader's starts at the log's start (every end is news to
    it); a damaged one (truncated, an offset that is no byte count) at the log's end as it
    is now, so what was announced before is not announced again, all at once."""
    try:
        data = read_json(path)
    except FileNotFoundError:
        return {"offset": 0, "announced": []}
    except (OSError, ValueError):
        data = None
    offset = data.get("offset") if isinstance(data, dict) else None
    announced = data.get("announced") if isinstance(data, dict) else None
    whole = isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0
    if whole and isinstance(announced, list):
        return {"offset": offset, "announced": announced}
    try:
        end = log.stat().st_size
    except OSError:
        end = 0
    return {"offset": end, "announced": [], "damaged": True}


def _new_lines(log: Path, offset: int) -> tuple[list[bytes], int]:
    """Complete lines of *log* after *offset*, and the offset after the last of them. A log
    shorter than *offset* was replaced: read it from its start."""
    tail = LineTail(log, offset)  # a torn (unterminated) last line waits for its newline
    return list(tail.lines()), tail.consumed


@contextlib.contextmanager
def _locked_state(home: Path, session_id: str, reader: str) -> Iterator[tuple[Path, JsonObject]]:
    """The reader's state file and its contents, under its exclusive lock."""
    state_path = _state_file(home, session_id, reader)
    make_private_dir(state_path.parent)
    lock_fd = os.open(state_path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        yield state_path, _load(state_path, session_path(home, session_id))
    finally:
        if fcntl is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


def take_new_ends(home: Path, session_id: str, reader: str = "default") -> list[AgentEvent]:
    """The end entries (complete, error, aborted) appended to the session's log since this
    *reader* last asked, each returned once, oldest first; they count as announced from now.
    ValueError for a bad session id or reader name."""
    with _locked_state(home, session_id, reader) as (state_path, state):
        offset = state.get("offset")
        announced = _announced(state)
        seen = set(announced)
        lines, new_offset = _new_lines(
            session_path(home, session_id), offset if isinstance(offset, int) else 0
        )
        out: list[AgentEvent] = []
        for line in lines:
            entry = parse_line(line)
            if not is_agent_event(entry) or entry["eventType"] not in END_EVENT_TYPES:
                continue
            job_id = entry.get("jobId")
            if isinstance(job_id, str):
                if job_id in seen:
                    continue
                seen.add(job_id)
                announced.append(job_id)
            out.append(entry)
        if new_offset != offset or state.get("damaged"):
            write_json_atomic(
                state_path, {"offset": new_offset, "announced": announced[-KEEP_IDS:]}
            )
        return out


def mark_told(home: Path, session_id: str, job_id: str, reader: str = "default") -> None:
    """Count *job_id*'s end as announced to *reader* before it is logged: a job the user
    stopped in this session is not news to that session."""
    with _locked_state(home, session_id, reader) as (state_path, state):
        announced = _announced(state)
        if job_id not in announced:
            announced.append(job_id)
            offset = state.get("offset")
            write_json_atomic(
                state_path,
                {
                    "offset": offset if isinstance(offset, int) else 0,
                    "announced": announced[-KEEP_IDS:],
                },
            )


def _announced(state: JsonObject) -> list[str]:
    said = state.get("announced")
    return [j for j in said if isinstance(j, str)] if isinstance(said, list) else []


def describe_end(entry: AgentEvent, job: JobState | None = None, *, answer: bool = False) -> str:
    """One line for a person or a model, as the command line ends a job, naming its task:
    ``✓ job <id> (list the files) · pi · 3.4s · 60 tokens · $0.00004 · "DONE"``. From the
    job's result when it is at hand, else from the end entry (its summary says what came of
    it). ``answer``: followed by the job's whole answer (:func:`answer_part`)."""
    if job is not None and job.get("runs") is not None:
        line = outcome.job_line(job, named=True)
        return f"{line} · {answer_part(job)}" if answer else line
    status = entry.get("status") or str(entry.get("eventType", "")).removeprefix("subagent:")
    summary = str(entry.get("summary") or "").strip()
    # A single job's summary leads with "<status>: <agent> — ", which the line says already.
    summary = summary.removeprefix(f"{status}: {entry.get('agentName')} — ")
    return outcome.end_line(
        entry.get("jobId"),
        status,
        entry.get("agentName"),
        entry.get("durationMs"),
        entry.get("usage"),
        summary,
        entry.get("mode"),
    )


NOTICE_ANSWER_LIMIT = 6000  # characters of an answer a notice carries whole (else: where it is)


def answer_part(job: JobState) -> str:
    """``answer: "…"``: the job's answer as its parent reads it (``present/answer.py``), in
    one line (a JSON string: its line ends kept as ``\\n``), so that a model told of the
    end needs no call to read it; a longer one is named by where it is."""
    import json

    from subagents.present.answer import parent_text

    text = parent_text(job).text
    if len(text) <= NOTICE_ANSWER_LIMIT:
        return "answer: " + json.dumps(neutralize(text), ensure_ascii=False)
    return (
        f"answer: {len(text)} characters, too long for a notice:"
        f' subagent_result(job_id="{job.get("jobId")}") returns it'
    )


def notice_text(ends: list[tuple[AgentEvent, JobState | None]]) -> str:
    """The notice for a list of job ends (each an end entry and, when at hand, the job's
    result, with its answer), or "" for none."""
    if not ends:
        return ""
    head = (
        "A background subagents job ended since the last message:"
        if len(ends) == 1
        else f"{len(ends)} background subagents jobs ended since the last message:"
    )
    # The newest few: a notice goes into a model's context, which a flood would fill.
    shown = ends[-MAX_LISTED:]
    lines = [head, *(f"- {describe_end(entry, job, answer=True)}" for entry, job in shown)]
    if len(ends) > len(shown):
        lines.append(f"- and {len(ends) - len(shown)} earlier (subagents history)")
    return "\n".join(lines)


MAX_LISTED = 10  # job ends a notice lists (the newest), the rest counted


CLAUDE_READER = "claude-code"  # the Claude Code plugin's hook and monitor share what they told
CLAUDE_PREFIX = "claude-"
CLAUDE_SESSION_ENV = "CLAUDE_CODE_SESSION_ID"  # set by Claude Code for its MCP servers and hooks


def claude_session(claude_session_id: str) -> str:
    """The lifecycle session of the jobs started from one Claude Code session:
    ``claude-<its session id>`` (the plugin's MCP server writes there, its hook reads there).
    ValueError when the id is not path-safe."""
    name = CLAUDE_PREFIX + str(claude_session_id).strip()
    session_path(Path("."), name)  # checks it
    return name
