"""``subagents run --progress jsonl`` (and ``wait --progress jsonl``): progress as JSON
records, one a line, for programs.

The same callback as the terminal display (``event(index, event)``), the same per-run state
and the same words (:class:`RunState`, so :class:`ProgressFormatter`, as in ``transcript.md``).
Records (all carry ``jobId``):

- ``{"type": "job", "jobId", "mode", "runs": n, "startedAt", "steps"}`` once, first;
  ``startedAt`` is the job's (ISO, the engine's clock; null when not yet known), ``steps``
  one ``{task, agent, backend, model, role}`` per run as asked (``task``: its first line;
  ``role``: its place in the job, ``A``/``B``/``judge`` in a council, ``step 2/3`` in a
  chain, else null: present/roles.py; a chain step's ``{previous}`` said as
  ``⟨step 1's answer⟩``);
- ``{"type": "progress", "jobId", "runId", "index", "label", "text", "status", "activity",
  "toolCount", "usage"}`` for each event that makes a progress line (``status`` is
  ``running`` until the run's own status), with, in the run's first record that knows them
  and again when they change: ``backend``, ``model``, ``startedAt`` (the run's start, epoch
  seconds), ``transcript`` (its path), ``task`` (a chain step's, its ``{previous}`` filled:
  its first line), ``warning`` (the child's latest warning, from its
  events or a ``Warning:`` line on its stderr), ``durationMs`` (once it has finished); and
  ``stalled: true`` while the stall watchdog's notice is the last word; for a child's request
  to act, ``approval: {item, state, summary, waitsFor}`` (``state`` requested or decided;
  ``waitsFor`` person or parent when it waits: docs/approvals.md);
- ``{"type": "council", "jobId", "table"}`` once, at a council's end: its answers side by side
  and the verdict as ``show`` prints them (``present/council.py``);
- ``{"type": "answer", "jobId", "status", "text", "isError", "durationMs", "runs"}`` last, at
  every job's end: the parent's answer as a parent model reads it (``present/answer.py``'s
  ``parent_text``: the pi package's tool result), whether the call failed, the job's
  duration (the one every face shows), and per run how a face words its end
  (``{mark, used, why}``: a budget's mark, what it used, why it did not complete in plain
  words; null where there is nothing to say); a council's adds ``verdict``, the judge's
  verdict as lines of words.

Every text in a record that came from a child is neutralized (no control characters).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypedDict

from subagents.core.childtext import neutralize
from subagents.present.humanize import head
from subagents.present.roles import JUDGE, JUDGE_TASK_LABEL, roles, template_words
from subagents.present.runstate import RunState

if TYPE_CHECKING:
    from subagents.types import Event, JobPlanRecord, JobResult, JobState


class FeedStep(TypedDict):
    """A run of the job as asked (the ``job`` record's ``steps``)."""

    task: str  # its first line
    agent: str | None
    backend: str | None
    model: str | None
    role: str | None


TASK_LABEL = 200  # characters of a task's first line in a step
STDERR_LOOK = 64 * 1024  # bytes of new stderr read per look
STDERR_EVERY = 1.0  # seconds between looks
# pi (and many CLIs) say "Warning: ..." on stderr for what does not stop them: an unknown
# model, a missing tool. Such a child "works", so its row should say it.
_WARNING = re.compile(r"^\s*warn(?:ing)?\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def first_line(text: str, limit: int = TASK_LABEL) -> str:
    for line in text.splitlines():
        if line.strip():
            return head(neutralize(line.strip()), limit)
    return ""


def steps_of(plan: JobPlanRecord) -> list[FeedStep]:
    """One step per run of a stored plan (``JobPlan.to_record``); a judge's task is what it
    does, not the prompt it is given."""
    limits = plan.get("limits")
    default = limits.get("default_backend") if isinstance(limits, dict) else None
    chain = plan.get("mode") == "chain"

    def task(req: Mapping[str, object], role: str | None, i: int) -> str:
        text = str(req.get("task") or "")
        if role == JUDGE:
            return JUDGE_TASK_LABEL
        return first_line(template_words(text, i) if chain else text)

    return [
        {
            "task": task(req, role, i),
            "agent": req.get("agent"),
            "backend": req.get("backend") or (default if isinstance(default, str) else None),
            "model": req.get("model"),
            "role": role,
        }
        for i, (req, role) in enumerate(zip(plan.get("requests") or [], roles(plan), strict=True))
    ]


_SAID_ONCE = ("backend", "model", "startedAt", "transcript", "warning", "durationMs")
_NOTHING_SAID: tuple[object, ...] = (None,) * len(_SAID_ONCE)


class StderrWarnings:
    """A run's ``stderr.log`` looked at for warning lines, reading only what is new, at most
    once a second (and at the run's end): a chatty run's records cost no file reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.looked = -STDERR_EVERY

    def latest(self, last: bool = False) -> str | None:
        now = time.monotonic()
        if not last and now - self.looked < STDERR_EVERY:
            return None
        self.looked = now
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(STDERR_LOOK)
        except OSError:
            return None
        cut = data.rfind(b"\n") + 1  # whole lines only; the rest is read next time
        self.offset += cut
        found = _WARNING.findall(neutralize(data[:cut].decode("utf-8", "replace")))
        return found[-1] if found else None


def run_words(result: JobResult | JobState) -> dict[str, object]:
    """What the ``answer`` record adds for a face to draw the end with: the job's duration,
    each run's budget mark and plain reason, a council's verdict as words."""
    from subagents.present import outcome
    from subagents.present.roles import limit_mark, limit_used, plain_why, verdict_lines

    runs = [
        {
            "mark": limit_mark(r),
            "used": limit_used(r),
            "why": None
            if r.get("status") == "completed"
            else neutralize(plain_why(r.get("status"), r.get("errorMessage"))),
        }
        for r in outcome.runs_of(result)
    ]
    out: dict[str, object] = {"durationMs": result.get("durationMs"), "runs": runs}
    council = result.get("council")
    if council is not None:
        out["verdict"] = [neutralize(line) for line in verdict_lines(council)]
    return out


class JsonlFeed:
    def __init__(
        self,
        stream: IO[str],
        job_id: str,
        mode: str,
        labels: list[str],
        run_id: Callable[[int], str | None],
        *,
        steps: list[FeedStep] | None = None,
        started_at: str | None = None,
        runs_dir: Path | None = None,
    ) -> None:
        """``run_id(index)``: the run id of the job's ``index``-th run, once it has one;
        ``runs_dir``: where run directories are (for transcripts and stderr warnings)."""
        self.stream = stream
        self.job_id = job_id
        self.mode = mode
        self.runs = [RunState(label) for label in labels or ["run"]]
        self.steps = steps
        self.started_at = started_at
        self.runs_dir = runs_dir
        self._run_id = run_id
        self._ids: dict[int, str] = {}
        self._stderr: dict[int, StderrWarnings] = {}
        self._said: dict[int, tuple[object, ...]] = {}
        self._transcripts: dict[int, str] = {}
        self._lock = threading.Lock()
        self._gone = False

    def _emit(self, record: dict[str, object]) -> None:
        """Write one record (a JSON object of this module's making)."""
        if self._gone:
            return
        # One write per record, flushed: a reader never sees half a line.
        try:
            self.stream.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
            self.stream.flush()
        except OSError:  # the reader died (EPIPE): the job goes on to record its end
            self._gone = True

    def started(self) -> None:
        with self._lock:
            record: dict[str, object] = {
                "type": "job",
                "jobId": self.job_id,
                "mode": self.mode,
                "runs": len(self.runs),
                "startedAt": self.started_at,
            }
            if self.steps is not None:
                record["steps"] = self.steps
            self._emit(record)

    def ended(self, result: JobResult | JobState) -> None:
        """The job's end: a council's table, then the parent's answer."""
        from subagents.present.answer import parent_text

        council = result.get("council")
        tasks = [step["task"] for step in self.steps or []]
        said = parent_text(result, tasks)
        with self._lock:
            if council is not None:
                from subagents.present.council import council_table

                table = neutralize(council_table(council))
                self._emit({"type": "council", "jobId": self.job_id, "table": table})
            self._emit(
                {
                    "type": "answer",
                    "jobId": self.job_id,
                    "status": result.get("status"),
                    # As the child said it: the parent model reads it (JSON escapes its
                    # controls here; whoever shows it neutralizes it, as for any child text).
                    "text": said.text,
                    "isError": said.is_error,
                    **run_words(result),
                }
            )

    def event(self, index: int, event: Event) -> None:
        with self._lock:
            index = min(index, len(self.runs) - 1)
            run = self.runs[index]
            line = run.update(event)
            if line is None:
                return
            filled = None
            if index not in self._ids:
                rid = self._run_id(index)
                if rid:
                    self._ids[index] = rid
                    if self.runs_dir is not None:
                        self._stderr[index] = StderrWarnings(self.runs_dir / rid / "stderr.log")
                        self._transcripts[index] = str(self.runs_dir / rid / "transcript.md")
                        if self.mode == "chain" and index:  # its {previous} is filled now
                            filled = _task_of(self.runs_dir / rid)
            warnings = self._stderr.get(index)
            if warnings is not None:
                said = warnings.latest(last=event.get("type") == "run_finished")
                if said:
                    run.warn(said)
            rid = self._ids.get(index)
            record: dict[str, object] = {
                "type": "progress",
                "jobId": self.job_id,
                "runId": rid,
                "index": index,
                "label": run.label,
                "text": line,
                "status": run.status or "running",
                "activity": run.fmt.activity(),
                "toolCount": run.tools,
                "usage": run.usage,
            }
            # What seldom changes is said when it is new: records stay small for a chatty run.
            now = (
                run.backend,
                run.model,
                run.started_at,
                self._transcripts.get(index),
                run.warning,
                run.duration_ms,
            )
            told = self._said.get(index, _NOTHING_SAID)
            if now != told:
                for key, value, before in zip(_SAID_ONCE, now, told, strict=True):
                    if value is not None and value != before:
                        record[key] = value
                self._said[index] = now
            if filled:
                record["task"] = filled
            if event.get("type") == "approval":  # a request that waits on someone, or decided
                record["approval"] = {
                    "item": event.get("item"),
                    "state": event.get("state"),
                    "summary": neutralize(str(event.get("summary") or "")),
                    "waitsFor": event.get("waitsFor"),
                }
            if run.stalled:
                record["stalled"] = True
            self._emit(record)


def _task_of(run_dir: Path) -> str | None:
    """A run's task as it was given (its first line, neutralized: it holds a child's answer)."""
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    task = meta.get("task") if isinstance(meta, dict) else None
    return first_line(task) if isinstance(task, str) else None
