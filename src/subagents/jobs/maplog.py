"""A map's durable row state, beside its ``job.json``:

- ``input.jsonl``: the rows to run, written once when the map is made (index, key, fields,
  and which of the map's resolved requests the row uses);
- ``rowlog.jsonl``: an append-only log, one line per row event: ``started`` (its run id,
  recorded before the run's supervisor starts), ``done`` (how the run ended: status,
  answer, cost, …) or ``skipped`` (not started: the map's budget was spent, or it was
  stopped). A row's state is its last line. Each line is one ``write`` of a whole line on
  an ``O_APPEND`` descriptor, so a driver killed at any point leaves at most a torn last
  line, which readers skip; the page cache keeps what was written when the driver dies
  (only a power cut could lose the newest lines, and a resume then reruns those rows).

So ending a row costs one small append, never a rewrite of ``job.json``; at the map's end
the log is compacted to one line per row.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core.files import dumps_fast, loads
from subagents.core.tail import LineTail
from subagents.jobs.mapinput import Row

if TYPE_CHECKING:
    from subagents.types import JobRun, JsonObject

INPUT_FILE = "input.jsonl"
LOG_FILE = "rowlog.jsonl"
DONE_STATUSES = ("completed", "failed", "aborted", "timeout", "skipped")


def write_input(job_dir: Path, rows: list[Row], variants: list[int]) -> None:
    """The map's rows, once, when it is made (``variants``: each row's request)."""
    lines = [
        json.dumps({**row.to_record(), "v": v}, ensure_ascii=False, allow_nan=False) + "\n"
        for row, v in zip(rows, variants, strict=True)
    ]
    path = job_dir / INPUT_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())


def read_input(job_dir: Path) -> tuple[list[Row], list[int]]:
    rows: list[Row] = []
    variants: list[int] = []
    with open(job_dir / INPUT_FILE, "rb") as f:
        for line in f:
            record = loads(line)
            assert isinstance(record, dict)
            rows.append(Row.from_record(record))
            v = record.get("v")
            variants.append(v if isinstance(v, int) else 0)
    return rows, variants


def map_input_rows(job_dir: Path) -> list[Row]:
    """A map's input rows, as recorded (OSError, ValueError: unreadable)."""
    return read_input(job_dir)[0]


def count_input(job_dir: Path) -> int:
    with contextlib.suppress(OSError), open(job_dir / INPUT_FILE, "rb") as f:
        return sum(1 for _ in f)
    return 0


def _lines(path: Path) -> Iterator[JsonObject]:
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError:
        return
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                return  # a torn last line: its writer died mid-write
            with contextlib.suppress(ValueError):
                value = loads(line)
                if isinstance(value, dict) and isinstance(value.get("i"), int):
                    yield value


def replay(job_dir: Path) -> dict[int, JsonObject]:
    """Each row's last entry in the log (rows never started are absent)."""
    state: dict[int, JsonObject] = {}
    for entry in _lines(job_dir / LOG_FILE):
        state[as_int(entry["i"])] = entry
    return state


def as_int(value: object, default: int = 0) -> int:
    """A count from a record (a JSON number), else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def in_flight(job_dir: Path) -> list[str]:
    """The run ids of rows started and not yet done: what a stop or a recovery follows."""
    return started(replay(job_dir))


def started(state: Mapping[int, JsonObject]) -> list[str]:
    """The run ids of the rows whose last entry is their start."""
    out: list[str] = []
    for entry in state.values():
        run_id = entry.get("runId")
        if entry.get("s") == "started" and isinstance(run_id, str):
            out.append(run_id)
    return out


class LogFollower:
    """A map's row log read as it grows: each row's last entry, from look to look (what
    was appended since the last, not the whole log). A log replaced by its compaction is
    read again from its start: its lines are each row's last entry, so the state holds."""

    def __init__(self, job_dir: Path) -> None:
        self.tail = LineTail(job_dir / LOG_FILE)
        self.state: dict[int, JsonObject] = {}

    def poll(self) -> dict[int, JsonObject]:
        for line in self.tail.lines():
            with contextlib.suppress(ValueError):
                entry = loads(line)
                if isinstance(entry, dict) and isinstance(entry.get("i"), int):
                    self.state[as_int(entry["i"])] = entry
        return self.state


def logged_runs(job_dir: Path) -> list[str]:
    """Every run id the log names (each attempt's), in the order they started: the map's
    own runs, as a caller naming one of them is checked against."""
    seen: dict[str, None] = {}
    for entry in _lines(job_dir / LOG_FILE):
        run_id = entry.get("runId")
        if isinstance(run_id, str) and run_id:
            seen[run_id] = None
    return list(seen)


class RowLog:
    """The map's log, appended to from many threads (one write per line)."""

    def __init__(self, job_dir: Path) -> None:
        self.path = job_dir / LOG_FILE
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._lock = threading.Lock()

    def append(self, entry: JsonObject) -> None:
        line = dumps_fast(entry) + b"\n"
        with self._lock:
            os.write(self._fd, line)

    def started(self, index: int, run_id: str, attempt: int) -> None:
        self.append({"i": index, "s": "started", "runId": run_id, "attempt": attempt})

    def done(self, index: int, entry: JsonObject) -> None:
        self.append({"i": index, "s": "done", **entry})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def compact(self, state: dict[int, JsonObject]) -> None:
        """Rewrite the log as one line per row (its last), atomically: the map's end."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for i in sorted(state):
                f.write(json.dumps(state[i], ensure_ascii=False, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        with self._lock:
            os.replace(tmp, self.path)
            os.close(self._fd)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)


def done_entry(result: JobRun, attempt: int) -> JsonObject:
    """What the log keeps of a row's run: enough for its results line and the map's sums."""
    usage = result.get("usage") or {}
    worktree = result.get("worktree") if "worktree" in result else None
    entry: JsonObject = {
        "status": result.get("status"),
        "runId": result.get("runId"),
        "attempt": attempt,
        "answer": result.get("finalText") or "",
        "error": result.get("errorMessage") or None,
        "cost": usage.get("cost"),
        "usage": {k: v for k, v in usage.items() if isinstance(v, int | float | None)},
        "durationMs": as_int(result.get("durationMs")),
        "branch": str(worktree.get("branch")) if isinstance(worktree, dict) else None,
    }
    structured = result.get("structured") if "structured" in result else None
    if structured is not None:
        entry["structured"] = structured
    verification = result.get("verification") if "verification" in result else None
    if verification is not None:
        entry["verification"] = verification
    return entry
