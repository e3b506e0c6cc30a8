"""A map's results, one line per row: the row's input fields, then ``key``, ``status``,
the answer (``answer``, or a structured answer's fields as columns), ``error``, ``cost``,
``durationMs``, ``runId``, ``branch``. As JSON lines or CSV, appended and flushed as rows
finish (``--out``), or all at once from the row log (``show JOB --rows``).

Child text goes into these files as data (CSV-quoted, JSON-escaped), never interpreted.
"""

from __future__ import annotations

import csv
import io
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from subagents.core.files import dumps_fast
from subagents.jobs.mapinput import Row, text_of

if TYPE_CHECKING:
    from subagents.types import JsonObject, MapRecord

OutFormat = Literal["csv", "jsonl"]
TAIL = ("error", "cost", "durationMs", "runId", "branch")


def out_format(path: str, given: str | None = None) -> OutFormat:
    """``csv`` for a ``.csv`` file, else JSON lines (or as ``given``)."""
    if given in ("csv", "jsonl"):
        return given  # type: ignore[return-value]
    return "csv" if path.lower().endswith(".csv") else "jsonl"


def schema_fields(schema: object) -> list[str] | None:
    """The top-level properties of an object schema: a structured answer's columns."""
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        return [str(k) for k in schema["properties"]]
    return None


def result_line(row: Row, entry: Mapping[str, object]) -> JsonObject:
    """One row's results line (``entry``: its last log entry, or none yet)."""
    line: JsonObject = dict(row.fields)  # type: ignore[arg-type]
    line["key"] = row.key
    status = entry.get("status") if entry.get("s") in ("done", "skipped") else "pending"
    if entry.get("s") == "started":
        status = "running"
    line["status"] = status if isinstance(status, str) else "pending"
    structured = entry.get("structured")
    if isinstance(structured, dict):
        for name, value in structured.items():
            line[name if name not in line and name not in TAIL else f"answer.{name}"] = value
    elif structured is not None:
        line["answer"] = structured  # type: ignore[assignment]
    else:
        line["answer"] = entry.get("answer") or ""  # type: ignore[assignment]
    for name in TAIL:
        line[name] = entry.get(name)  # type: ignore[assignment]
    return line


class ResultsWriter:
    """Results lines written to a stream (a file, stdout) as rows finish, each flushed."""

    def __init__(
        self, stream: IO[str], fmt: OutFormat, first: Row, answer_fields: list[str] | None
    ) -> None:
        self.stream = stream
        self.fmt = fmt
        self._lock = threading.Lock()
        self._csv: csv.DictWriter[str] | None = None
        if fmt == "csv":
            answer = answer_fields if answer_fields is not None else ["answer"]
            given = list(first.fields)
            columns = [*given, "key", "status"]
            columns += [a if a not in columns and a not in TAIL else f"answer.{a}" for a in answer]
            self._csv = csv.DictWriter(
                stream, [*columns, *TAIL], extrasaction="ignore", lineterminator="\n"
            )

    def header(self) -> None:
        if self._csv is not None:
            self._csv.writeheader()

    def write(self, row: Row, entry: Mapping[str, object], *, flush: bool = True) -> None:
        line = result_line(row, entry)
        with self._lock:
            if self._csv is not None:
                self._csv.writerow({k: _cell(v) for k, v in line.items()})
            else:
                self.stream.write(dumps_fast(line).decode() + "\n")
            if flush:  # a row that finished is on disk at once; a whole listing at its end
                self.stream.flush()


def _cell(value: object) -> object:
    # csv writes text and numbers itself; anything else goes in as JSON.
    if value is None:
        return ""
    return value if isinstance(value, str | int | float) else text_of(value)


def write_all(
    stream: IO[str],
    fmt: OutFormat,
    rows: list[Row],
    state: Mapping[int, Mapping[str, object]],
    answer_fields: list[str] | None,
    *,
    header: bool = True,
) -> None:
    """Every row's line (a finished map's results, or its state so far), in input order."""
    writer = ResultsWriter(stream, fmt, rows[0], answer_fields)
    if header:
        writer.header()
    for row in rows:
        writer.write(row, state.get(row.index, {}), flush=False)
    stream.flush()


class ResultsFile:
    """``--out``: rebuilt from the row log when the map (re)starts, so it holds every row
    already completed exactly once (the others run again), then appended to as rows
    finish."""

    def __init__(
        self,
        path: Path,
        fmt: OutFormat,
        rows: list[Row],
        state: Mapping[int, Mapping[str, object]],
        answer_fields: list[str] | None,
    ) -> None:
        self.path = path
        done = [r for r in rows if state.get(r.index, {}).get("status") == "completed"]
        buf = io.StringIO()
        writer = ResultsWriter(buf, fmt, rows[0], answer_fields)
        writer.header()
        for row in done:
            writer.write(row, state[row.index], flush=False)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(buf.getvalue(), encoding="utf-8")
        os.replace(tmp, path)
        self._stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.writer = ResultsWriter(self._stream, fmt, rows[0], answer_fields)

    def write(self, row: Row, entry: Mapping[str, object]) -> None:
        self.writer.write(row, entry)

    def close(self) -> None:
        self._stream.close()


def failure_groups(entries: Iterable[Mapping[str, object]]) -> list[tuple[str, int]]:
    """Rows that did not complete, grouped by why (most first): ``[("timeout", 37), …]``."""
    counts = group_failures(entries, {})
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def group_failures(
    entries: Iterable[Mapping[str, object]], counts: dict[str, int]
) -> dict[str, int]:
    """``counts`` (rows by reason) with the ended rows of ``entries`` that did not complete."""
    for entry in entries:
        if entry.get("s") not in ("done", "skipped") or entry.get("status") == "completed":
            continue
        counts[reason_of(entry)] = counts.get(reason_of(entry), 0) + 1
    return counts


def reason_of(entry: Mapping[str, object]) -> str:
    """A failure's reason in a few words: its status, and its error's first line, cut."""
    status = str(entry.get("status") or "failed")
    error = entry.get("error")
    if not isinstance(error, str) or not error.strip():
        return status
    first = error.strip().splitlines()[0]
    first = first if len(first) <= 80 else first[:79] + "…"
    return first if status in ("failed", "skipped") else f"{status}: {first}"


def summarize(total: int, state: Mapping[int, Mapping[str, object]]) -> MapRecord:
    """A map's counts, its failures grouped by reason, and that in one line
    ("37 rows: timeout; 5 rows: schema")."""
    entries = [e for e in state.values() if e.get("s") in ("done", "skipped")]
    completed = sum(e.get("status") == "completed" for e in entries)
    skipped = sum(e.get("s") == "skipped" for e in entries)
    groups = failure_groups(entries)
    pending = total - len(entries)
    words = [f"{n} row{'s' if n != 1 else ''}: {why}" for why, n in groups]
    if pending:
        words.append(f"{pending} row{'s' if pending != 1 else ''}: not run")
    return {
        "total": total,
        "completed": completed,
        "failed": len(entries) - completed - skipped,
        "skipped": skipped,
        "pending": pending,
        "failures": [{"reason": why, "rows": n} for why, n in groups],
        "summary": "; ".join(words) if words else f"all {total} rows completed",
    }
