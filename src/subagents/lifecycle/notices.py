"""Notices of job ends, each told once: which end entries of a session's log a reader (a
Claude Code hook, a pi package) has not announced yet.

A small state file per session and reader, ``$SUBAGENTS_HOME/notices/<reader>/<session>.json``
(``{"offset": bytes of the log consumed, "announced": [job ids]}``), read and replaced under
an exclusive ``flock`` on a lock file beside it, so two readers racing (two prompts, two
hooks) never announce the same end twice. Only the log's new bytes are read.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from subagents.core.files import make_private_dir, write_json_atomic
from subagents.core.tail import LineTail
from subagents.lifecycle.sessionlog import END_EVENT_TYPES, parse_line, session_path

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: no lock there
    fcntl = None  # type: ignore[assignment]

KEEP_IDS = 2000  # job ids remembered (only matters if a log is rewritten from scratch)


def _state_file(home: Path, session_id: str, reader: str) -> Path:
    log = session_path(home, session_id)  # checks the session id
    session_path(home, reader)  # the reader name obeys the same rule
    return Path(home) / "notices" / reader / f"{log.stem}.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"offset": 0, "announced": []}
    return data if isinstance(data, dict) else {"offset": 0, "announced": []}


def _new_lines(log: Path, offset: int) -> tuple[list[bytes], int]:
    """Complete lines of *log* after *offset*, and the offset after the last of them. A log
    shorter than *offset* was replaced: read it from its start."""
    tail = LineTail(log, offset)  # a torn (unterminated) last line waits for its newline
    return list(tail.lines()), tail.consumed


def take_new_ends(home: Path, session_id: str, reader: str = "default") -> list[dict[str, Any]]:
    """The end entries (complete, error, aborted) appended to the session's log since this
    *reader* last asked, each returned once, oldest first; they count as announced from now.
    ValueError for a bad session id or reader name."""
    state_path = _state_file(home, session_id, reader)
    make_private_dir(state_path.parent)
    lock_fd = os.open(state_path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        state = _load(state_path)
        offset = state.get("offset")
        announced = [j for j in state.get("announced") or [] if isinstance(j, str)]
        seen = set(announced)
        lines, new_offset = _new_lines(
            session_path(home, session_id), offset if isinstance(offset, int) else 0
        )
        out: list[dict[str, Any]] = []
        for line in lines:
            entry = parse_line(line)
            if entry is None or entry.get("eventType") not in END_EVENT_TYPES:
                continue
            job_id = entry.get("jobId")
            if isinstance(job_id, str):
                if job_id in seen:
                    continue
                seen.add(job_id)
                announced.append(job_id)
            out.append(entry)
        if new_offset != offset:
            write_json_atomic(
                state_path, {"offset": new_offset, "announced": announced[-KEEP_IDS:]}
            )
        return out
    finally:
        if fcntl is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


def _cost(usage: Any) -> str:
    cost = usage.get("cost") if isinstance(usage, dict) else None
    return f"${cost:.4f}" if isinstance(cost, int | float) else "cost unknown"


def describe_end(entry: dict[str, Any]) -> str:
    """One line for a person or a model: ``job <id> <status> (<cost>): <summary>``. The
    summary already leads with the agent and the answer's first line (or the failure)."""
    status = entry.get("status") or str(entry.get("eventType", "")).removeprefix("subagent:")
    summary = str(entry.get("summary") or "").strip()
    return f"job {entry.get('jobId')} {status} ({_cost(entry.get('usage'))}): {summary}"


def notice_text(entries: list[dict[str, Any]]) -> str:
    """The notice for a list of job ends, or "" for none."""
    if not entries:
        return ""
    head = (
        "A background subagents job ended since the last message:"
        if len(entries) == 1
        else f"{len(entries)} background subagents jobs ended since the last message:"
    )
    lines = [head, *(f"- {describe_end(e)}" for e in entries)]
    lines.append("(Full answers: the subagent_result tool with the job id.)")
    return "\n".join(lines)


CLAUDE_PREFIX = "claude-"
CLAUDE_SESSION_ENV = "CLAUDE_CODE_SESSION_ID"  # set by Claude Code for its MCP servers and hooks


def claude_session(claude_session_id: str) -> str:
    """The lifecycle session of the jobs started from one Claude Code session:
    ``claude-<its session id>`` (the plugin's MCP server writes there, its hook reads there).
    ValueError when the id is not path-safe."""
    name = CLAUDE_PREFIX + str(claude_session_id).strip()
    session_path(Path("."), name)  # checks it
    return name
