"""A map followed from outside its driver (``wait --progress jsonl``, ``show``): its row log
read as it grows, its progress counted from it (the pace from rows seen ending here)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core.files import loads
from subagents.core.tail import LineTail
from subagents.jobs.maplog import LOG_FILE, as_int, read_input, replay
from subagents.jobs.mapprogress import MapProgress

if TYPE_CHECKING:
    from subagents.jobs.mapinput import Row
    from subagents.types import JsonObject

ENDED = ("done", "skipped")


class MapWatch:
    def __init__(self, job_dir: Path, job_id: str, max_cost: float | None = None) -> None:
        self.rows: list[Row] = []
        with contextlib.suppress(OSError, ValueError):
            self.rows = read_input(job_dir)[0]
        # The tail takes its place (the log's file and size) before the log is read whole: an
        # entry appended between the two is read again (and passed over as seen), never
        # missed; and a log replaced since (compacted at the map's end) is another file,
        # which the tail reads from its start, not from this file's size.
        self.tail = LineTail(job_dir / LOG_FILE)
        self.tail.skip_to_end()
        self.state = replay(job_dir)
        ended = [e for e in self.state.values() if e.get("s") in ENDED]
        completed = sum(e.get("status") == "completed" for e in ended)
        self.progress = MapProgress(
            job_id,
            len(self.rows),
            completed=completed,
            failed=len(ended) - completed,
            max_cost=max_cost,
        )
        self.progress.failed_before(ended)
        self.progress.running = sum(e.get("s") == "started" for e in self.state.values())
        for entry in ended:
            self.progress.add_cost(entry.get("cost"))

    def poll(self) -> list[tuple[Row, JsonObject]]:
        """The rows that ended since the last look, each with its last entry."""
        out: list[tuple[Row, JsonObject]] = []
        for line in self.tail.lines():
            with contextlib.suppress(ValueError):
                entry = loads(line)
                if not isinstance(entry, dict) or not isinstance(entry.get("i"), int):
                    continue
                index = as_int(entry["i"])
                before = self.state.get(index)
                if before == entry:  # the log compacted at the map's end: seen already
                    continue
                self.state[index] = entry
                if entry.get("s") == "started":
                    if before is None or before.get("s") != "started":
                        self.progress.row_started()
                elif entry.get("s") in ENDED and 0 <= index < len(self.rows):
                    # A start not seen (written to the log's old file after the last look,
                    # before it was replaced) was never counted as running.
                    was_running = before is not None and before.get("s") == "started"
                    self.progress.row_ended(entry, running=was_running)
                    self.progress.add_cost(entry.get("cost"))
                    out.append((self.rows[index], entry))
        return out
