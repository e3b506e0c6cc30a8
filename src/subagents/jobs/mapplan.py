"""A map planned: its input read and sliced, its template checked against the first row,
and one checked run request per distinct ``{agent, cwd, model, backend}`` its rows ask
for (most maps: one), so a map of 10,000 rows resolves its agent once and its
``job.json`` stays small; the rows themselves go to ``input.jsonl`` (maplog.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.errors import FieldProblem, Loc, PlanError
from subagents.jobs.mapinput import (
    Row,
    check_template,
    format_of,
    parse_rows,
    read_text,
    render,
    select,
)
from subagents.jobs.mapresults import out_format, schema_fields
from subagents.jobs.planning import JobPlan, check_job_cost, resolve_step
from subagents.launchers import Placement

if TYPE_CHECKING:
    from subagents.config import Settings
    from subagents.jobs.spec import JobSpec
    from subagents.jobs.store import JobStore
    from subagents.runs import RunRequest
    from subagents.types import JobState, JsonObject

# The step's fields a row may fill besides its task (and the gate's command).
ROW_FIELDS = ("cwd", "agent", "model", "backend")


def read_rows(spec: JobSpec, base: Path, stdin_text: str | None = None) -> list[Row]:
    """The rows ``spec`` runs: its input read (``stdin_text``: what ``-`` means, if read
    already), parsed, filtered by ``where`` and cut at ``limit``."""
    assert spec.input is not None
    name = spec.input
    if name == "-":
        text = stdin_text if stdin_text is not None else read_text("-")
    else:
        path = Path(name).expanduser()
        text = read_text(str(path if path.is_absolute() else base / path))
    fmt = format_of(name, text, spec.input_format)
    rows = parse_rows(name, text, fmt)
    return select(name, rows, key=spec.key, where=spec.where or {}, limit=spec.limit)


def plan_map(
    spec: JobSpec,
    rows: list[Row],
    settings: Settings,
    *,
    session: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> tuple[JobPlan, list[int]]:
    """The map's plan and, for each row, which of its requests the row runs with."""
    if spec.executor is not None:
        settings = replace(settings, executor=spec.executor)
    placement = Placement.of(settings)
    env = os.environ if env is None else env
    base = (cwd or Path.cwd()).resolve()
    template = spec.steps[0]
    first = rows[0].fields
    check_template("task", template.task, first)
    for name in (*ROW_FIELDS, "verify"):
        value = getattr(template, name)
        if value is not None:
            check_template(name, value, first)
    requests: list[RunRequest] = []
    seen: dict[tuple[str | None, ...], int] = {}
    variants: list[int] = []
    for row in rows:
        given = {
            name: render(value, row.fields)
            for name in ROW_FIELDS
            if (value := getattr(template, name)) is not None
        }
        which = tuple(given.get(name) for name in ROW_FIELDS)
        if which not in seen:
            where: Loc = (f"row {row.index + 1}",)  # said as it is: "row 3: …"
            try:
                step = replace(template, **given)  # type: ignore[arg-type]
            except FieldProblem as exc:
                raise PlanError(str(exc), where) from None
            seen[which] = len(requests)
            req = resolve_step(step, where, settings, base, env, placement, extra_env)
            verify = (req.gate or {}).get("verify")
            if isinstance(verify, str):  # its agent's or the config's: a row's template too
                check_template("verify", verify, first)
            requests.append(req)
        variants.append(seen[which])
    out = str((base / Path(spec.out).expanduser()).resolve()) if spec.out else None
    extra: JsonObject = {
        "map": {
            "input": spec.input,
            "key": spec.key,
            "where": dict(spec.where or {}),
            "limit": spec.limit,
            "retries": spec.retries or 0,
            "total": len(rows),
            "out": out,
            "outFormat": out_format(out) if out else None,
            "answerFields": list(schema_fields(requests[0].output_schema) or []) or None,
        }
    }
    concurrency = max(1, min(spec.concurrency or settings.concurrency, len(rows)))
    budget = spec.budget()
    if budget.get("max_cost") is not None:
        check_job_cost(requests, settings)
    job_plan = JobPlan(
        "map", requests, settings, placement, concurrency, session, extra, budget=budget
    )
    return job_plan, variants


def map_options(extra: Mapping[str, object]) -> JsonObject:
    """A map plan's options (``extra["map"]``)."""
    value = extra.get("map")
    return dict(value) if isinstance(value, dict) else {}


def read_map_rows(
    store: JobStore, state: JobState
) -> tuple[list[Row], dict[int, JsonObject], list[str] | None]:
    """A map's rows, each row's last log entry, and its structured answer's fields."""
    from subagents.jobs.maplog import read_input, replay

    job_dir = store.dir / state["jobId"]
    rows, _variants = read_input(job_dir)
    fields = map_options(state["plan"].get("extra") or {}).get("answerFields")
    names = [str(f) for f in fields] if isinstance(fields, list) else None
    return rows, replay(job_dir), names
