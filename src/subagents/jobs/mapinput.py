"""A map's input: the rows of a CSV, a JSON-lines file, a file of lines or stdin, the slice
of them to run (``--where``, ``--limit``), each row's key, and ``{field}`` templates filled
from a row.

Every problem is found here, before anything starts, as one line (a ``PlanError``):
an empty or unreadable input, a CSV row of the wrong width (its line named), a JSON line
that is not an object, duplicate keys, a template naming a field the input lacks.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from subagents.errors import PlanError

InputFormat = Literal["csv", "jsonl", "lines"]
FORMATS: tuple[InputFormat, ...] = ("csv", "jsonl", "lines")
# `{{` and `}}` are a brace; `{name}` is a field (JSON in a task, `{"a": 1}`, is left alone).
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
# The one field of a file of lines.
LINE_FIELD = "line"


@dataclass(frozen=True)
class Row:
    """One input row: its position in the map (0-based), its key, its fields."""

    index: int
    key: str
    fields: dict[str, object]

    def to_record(self) -> dict[str, object]:
        return {"i": self.index, "key": self.key, "fields": self.fields}

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> Row:
        fields = record.get("fields")
        index = record.get("i")
        return cls(
            index if isinstance(index, int) else 0,
            str(record.get("key")),
            dict(fields) if isinstance(fields, dict) else {},
        )


def format_of(name: str, text: str, given: str | None) -> InputFormat:
    """The input's format: as given, else by its name's extension, else (stdin) by its
    first character: ``{`` is JSON lines, anything else a file of lines."""
    if given is not None:
        if given not in FORMATS:
            raise PlanError(f"--input-format: unknown format {given!r} (use csv, jsonl or lines)")
        return given
    suffix = Path(name).suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if name == "-" and text.lstrip().startswith("{"):
        return "jsonl"
    return "lines"


def read_text(name: str, stdin: io.TextIOBase | None = None) -> str:
    """The input's text: a file's, or stdin's for ``-``."""
    if name == "-":
        import sys

        return (stdin or sys.stdin).read()
    try:
        return Path(name).expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise PlanError(f"{name}: cannot read the input: {exc.strerror or exc}") from None


def parse_rows(name: str, text: str, fmt: InputFormat) -> list[dict[str, object]]:
    """The rows' fields, in input order; a ``PlanError`` naming the line at fault."""
    if fmt == "csv":
        rows = _csv_rows(name, text)
    elif fmt == "jsonl":
        rows = _jsonl_rows(name, text)
    else:
        rows = [{LINE_FIELD: line} for line in text.splitlines() if line.strip()]
    if not rows:
        raise PlanError(f"{name}: the input has no rows")
    return rows


def _csv_rows(name: str, text: str) -> list[dict[str, object]]:
    dialect: type[csv.Dialect] = csv.excel_tab if name.lower().endswith(".tsv") else csv.excel
    reader = csv.reader(io.StringIO(text, newline=""), dialect)
    try:
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            raise PlanError(f"{name}: the CSV has no header line")
        header = [h.strip() for h in header]
        dup = next((h for h in header if header.count(h) > 1), None)
        if dup is not None:
            raise PlanError(f"{name}: line 1: the column {dup!r} is named twice")
        rows: list[dict[str, object]] = []
        for values in reader:
            if not values or values == [""]:
                continue  # a blank line
            if len(values) != len(header):
                raise PlanError(
                    f"{name}: line {reader.line_num}: {len(values)} fields, the header has"
                    f" {len(header)}"
                )
            rows.append(dict(zip(header, values, strict=True)))
    except csv.Error as exc:
        raise PlanError(f"{name}: line {reader.line_num}: {exc}") from None
    return rows


def _jsonl_rows(name: str, text: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise PlanError(f"{name}: line {n}: not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise PlanError(f"{name}: line {n}: a row is a JSON object, not {type(value).__name__}")
        rows.append(value)
    return rows


def parse_where(terms: Iterable[str]) -> dict[str, str]:
    """``--where FIELD=VALUE`` terms, all of which a row must match."""
    where: dict[str, str] = {}
    for term in terms:
        field, sep, value = term.partition("=")
        if not sep or not field.strip():
            raise PlanError(f"--where: {term!r} is not FIELD=VALUE")
        where[field.strip()] = value
    return where


def select(
    name: str,
    rows: list[dict[str, object]],
    *,
    key: str | None,
    where: Mapping[str, str],
    limit: int | None,
) -> list[Row]:
    """The rows to run: those matching every ``where`` term, the first ``limit`` of them,
    each with its key (``key``'s field, else its row number: 1, 2, …); keys are unique."""
    for field in [*where, *([key] if key else [])]:
        if field not in rows[0]:
            raise PlanError(f"{name}: row 1 has no field {field!r} (it has: {_names(rows[0])})")
    if limit is not None and limit < 1:
        raise PlanError(f"--limit: must be at least 1, not {limit}")
    chosen: list[Row] = []
    seen: dict[str, int] = {}
    for n, fields in enumerate(rows, 1):
        if any(text_of(fields.get(f)) != v for f, v in where.items()):
            continue
        if key is not None:
            if key not in fields:
                raise PlanError(f"{name}: row {n} has no field {key!r} (the --key)")
            row_key = text_of(fields[key])
        else:
            row_key = str(n)
        if row_key in seen:
            raise PlanError(
                f"{name}: rows {seen[row_key]} and {n} have the same key {row_key!r}"
                " (keys must be unique: choose another --key)"
            )
        seen[row_key] = n
        chosen.append(Row(len(chosen), row_key, fields))
        if limit is not None and len(chosen) >= limit:
            break
    if not chosen:
        raise PlanError(f"{name}: no row matches --where {_terms(where)}")
    return chosen


def text_of(value: object) -> str:
    """A field's value as it goes into a template: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def fields_in(template: str) -> list[str]:
    """The fields a template names, in order."""
    return [m.group(1) for m in PLACEHOLDER.finditer(template) if m.group(1)]


def check_template(what: str, template: str, first: Mapping[str, object]) -> None:
    """A template naming a field the input lacks: one line naming it and the first row."""
    for field in fields_in(template):
        if field not in first:
            raise PlanError(
                f"{what}: {{{field}}}: the input has no field {field!r}"
                f" (row 1 has: {_names(first)})"
            )


def render(template: str, fields: Mapping[str, object]) -> str:
    """``template`` with each ``{field}`` replaced by the row's value (``{{``/``}}``: a brace)."""

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return m.group()[0]
        return text_of(fields.get(name))

    return PLACEHOLDER.sub(fill, template)


def _names(fields: Mapping[str, object]) -> str:
    names = list(fields)
    return ", ".join(names[:12]) + (", …" if len(names) > 12 else "") if names else "no fields"


def _terms(where: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in where.items()) or "(none)"
