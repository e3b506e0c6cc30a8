"""The Python API of maps (docs/map.md): a task template run once per row of a dataset.

    import subagents
    result = subagents.map("issues.csv", "Triage issue {number}: {title}", key="number",
                           output_schema={...}, concurrency=8, out="triage.jsonl")
    result["map"]            # counts, failures grouped by reason
    subagents.map(resume=result["jobId"])   # runs only the rows not completed

Over ``service.prepare_job`` (a map is a job of mode ``map``); the CLI (``subagents map``) and
the MCP tool are thin layers over these functions.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from subagents.api import BadRequest, JobHandle
from subagents.jobs import (
    MAP_FIELDS,
    TERMINAL,
    JobPlan,
    JobStore,
    MapJob,
    job_of,
    lifecycle_for,
)
from subagents.service import PreparedJob, prepare_job, start_background

if TYPE_CHECKING:
    from subagents.jobs import MapProgress, Row, RowSink
    from subagents.runs import RunRequest
    from subagents.types import JobResult, ProcessIdentity


def map_spec(
    input: str,
    task: str,
    *,
    step: Mapping[str, Any] | None = None,
    concurrency: int | None = None,
    budget: Mapping[str, Any] | None = None,
    executor: str | None = None,
    **map_fields: Any,
) -> Any:
    """A map's job spec from keywords (``step``: the template's other fields: agent,
    output_schema, isolate …; ``map_fields``: key, where, limit, retries, out,
    input_format); checked as every job spec is."""
    unknown = sorted(set(map_fields) - set(MAP_FIELDS))
    if unknown:
        raise BadRequest(f"unknown map option {unknown[0]!r}", unknown[0])
    steps = [{"task": task, **{k: v for k, v in (step or {}).items() if v is not None}}]
    given = {k: v for k, v in map_fields.items() if v is not None}
    return job_of(
        "map",
        steps,
        concurrency,
        executor=executor,
        **{k: v for k, v in (budget or {}).items() if v is not None},
        input=input,
        **given,
    )


def resume_map(job_id: str, *, background: bool = False) -> PreparedJob:
    """A map that ended (stopped, failed, its driver killed) made ready to run its rows not
    completed; ``BadRequest`` for a job that is no map or is still running."""
    from subagents.core import paths
    from subagents.jobs import job_state

    store = JobStore(paths.state_home())
    full = store.resolve(job_id)
    state = job_state(store, full)
    if state.get("mode") != "map":
        raise BadRequest(f"job {full} is not a map (it is a {state.get('mode')} job)", "resume")
    # A driver killed outright leaves its runs going: those the resumed map adopts.
    if state.get("status") not in TERMINAL and (store.driver_alive(state) or "driver" not in state):
        raise BadRequest(f"map {full} is still running; stop it first (subagents stop {full})")
    store.reopen(full)
    if background:
        store.update(full, background=True)
    return PreparedJob(store, full, JobPlan.from_record(state["plan"]))


def drive(
    job: PreparedJob,
    on_row: RowSink | None = None,
    on_start: Callable[[MapProgress], None] | None = None,
) -> JobResult:
    """Run a prepared map here to its end: ``on_row`` is told each row's end (the row,
    its record), ``on_start`` is given the map's live progress (``.record()``). In the
    main thread, Ctrl-C and SIGTERM stop it (its rows stay to resume)."""
    import threading

    runner = MapJob(job.store, job.job_id, job.plan)
    runner.on_row = on_row
    if on_start is not None:
        on_start(runner.progress)
    main = threading.current_thread() is threading.main_thread()
    restore = runner.stop_on_signals((signal.SIGINT, signal.SIGTERM)) if main else None
    try:
        lifecycle = lifecycle_for(job.store.home, job.plan, background=False, settings=job.settings)
        return runner.run(lifecycle=lifecycle)
    finally:
        if restore is not None:
            restore()


def prepare_map(
    input: str | None = None,
    task: str | None = None,
    *,
    resume: str | None = None,
    background: bool = False,
    concurrency: int | None = None,
    max_cost: float | None = None,
    max_tokens: int | None = None,
    executor: str | None = None,
    session: str | None = None,
    watch: list[ProcessIdentity] | None = None,
    dry_run: list[tuple[Row, RunRequest]] | None = None,
    placement: Mapping[str, Any] | None = None,
    **options: Any,
) -> PreparedJob:
    """A map checked and recorded, ready to run (or, ``resume``: a map's id, made ready to
    run its rows not completed). ``options``: the template's fields (agent, backend, model,
    cwd, output_schema, isolate, timeout, verify …; ``{field}`` allowed in cwd, agent, model,
    backend, verify) and the map's (key, where, limit, retries, out, input_format);
    ``placement``: ``prepare_job``'s runner, ray_address, ray_shared_cwd, agent_scope."""
    if resume is not None:
        return resume_map(resume, background=background)
    if input is None or task is None:
        raise BadRequest("a map needs an input and a task (or resume=JOB_ID)")
    map_fields = {k: options.pop(k) for k in list(options) if k in MAP_FIELDS}
    spec = map_spec(
        input,
        task,
        step=options,
        concurrency=concurrency,
        budget={"max_cost": max_cost, "max_tokens": max_tokens},
        executor=executor,
        **map_fields,
    )
    return prepare_job(
        spec,
        background=background,
        session=session,
        watch=watch,
        dry_run=dry_run,
        **{k: v for k, v in (placement or {}).items() if v is not None},
    )


def map_rows(
    input: str | None = None,
    task: str | None = None,
    *,
    background: bool = False,
    on_row: RowSink | None = None,
    **options: Any,
) -> JobResult | JobHandle:
    """``subagents.map``: run ``task`` (``{field}`` filled from each row) once per row of
    ``input`` (a CSV, JSON-lines or lines file); the job result, its ``map`` counting the
    rows (``background``: its handle at once). ``options``: as :func:`prepare_map` takes
    them (``resume=JOB_ID`` runs a map's rows not completed)."""
    job = prepare_map(input, task, background=background, **options)
    if background:
        start_background(job)
        return JobHandle(job.store, job.job_id)
    return drive(job, on_row)


def write_rows(store: JobStore, job_id: str, stream: IO[str], fmt: str = "jsonl") -> int:
    """A map's rows as results lines (as ``--out`` writes them: done rows, and the others
    as ``pending``), in input order; how many. ``BadRequest`` for a job that is no map."""
    from subagents.jobs import job_state, read_map_rows, write_results

    state = job_state(store, job_id)
    if state.get("mode") != "map":
        raise BadRequest(f"job {job_id} is not a map: --rows is a map's", "rows")
    rows, entries, answer_fields = read_map_rows(store, state)
    write_results(stream, "csv" if fmt == "csv" else "jsonl", rows, entries, answer_fields)
    return len(rows)
