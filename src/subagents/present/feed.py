"""``subagents run --progress jsonl``: progress as JSON records, one a line, for programs.

The same callback as the terminal display (``event(index, event)``), the same per-run state
and the same words (:class:`RunState`, so :class:`ProgressFormatter`, as in ``transcript.md``).
Records (all carry ``jobId``):

- ``{"type": "job", "jobId", "mode", "runs": n}`` once, first;
- ``{"type": "progress", "jobId", "runId", "index", "label", "text", "status", "activity",
  "toolCount", "usage"}`` for each event that makes a progress line (``status`` is
  ``running`` until the run's own status).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import IO, Any

from subagents.present.runstate import RunState


class JsonlFeed:
    def __init__(
        self,
        stream: IO[str],
        job_id: str,
        mode: str,
        labels: list[str],
        run_id: Callable[[int], str | None],
    ) -> None:
        """``run_id(index)``: the run id of the job's ``index``-th run, once it has one."""
        self.stream = stream
        self.job_id = job_id
        self.mode = mode
        self.runs = [RunState(label) for label in labels or ["run"]]
        self._run_id = run_id
        self._ids: dict[int, str] = {}
        self._lock = threading.Lock()
        self._gone = False

    def _emit(self, record: dict[str, Any]) -> None:
        if self._gone:
            return
        # One write per record, flushed: a reader never sees half a line.
        try:
            self.stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            self.stream.flush()
        except OSError:  # the reader died (EPIPE): the job goes on to record its end
            self._gone = True

    def started(self) -> None:
        with self._lock:
            self._emit(
                {"type": "job", "jobId": self.job_id, "mode": self.mode, "runs": len(self.runs)}
            )

    def event(self, index: int, event: dict[str, Any]) -> None:
        with self._lock:
            run = self.runs[min(index, len(self.runs) - 1)]
            line = run.update(event)
            if line is None:
                return
            if index not in self._ids:
                rid = self._run_id(index)
                if rid:
                    self._ids[index] = rid
            self._emit(
                {
                    "type": "progress",
                    "jobId": self.job_id,
                    "runId": self._ids.get(index),
                    "index": index,
                    "label": run.label,
                    "text": line,
                    "status": run.status or "running",
                    "activity": run.fmt.activity(),
                    "toolCount": run.tools,
                    "usage": run.usage,
                }
            )
