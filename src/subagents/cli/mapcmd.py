"""``subagents map``: a task template run once per row of a dataset (docs/map.md)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from subagents.cli.app import emit_answer, exit_now, fail, main, print_json
from subagents.cli.background import parent_pid_option, run_in_background
from subagents.cli.options import options_named
from subagents.options import map_help

if TYPE_CHECKING:
    from subagents.api import PreparedJob
    from subagents.runs import RunRequest
    from subagents.service import MapProgress, Row
    from subagents.types import Executor, JobResult, JsonObject

DRY_RUN_SHOWN = 3


@main.command(name="map")
@click.argument("input_name", metavar="INPUT", required=False)
@click.option("--task", "-t", metavar="TEMPLATE", help="The task; {field} is the row's field.")
@click.option("--key", metavar="FIELD", help=map_help("key"))
@click.option(
    "--where", metavar="FIELD=VALUE", multiple=True, help="Run only rows with this value."
)
@click.option("--limit", type=int, help=map_help("limit"))
@click.option("--retries", type=int, help=map_help("retries"))
@click.option(
    "--input-format",
    type=click.Choice(["csv", "jsonl", "lines"]),
    help="The input's format (default: by its extension; stdin: JSON lines if it starts"
    " with '{', else lines).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help=map_help("out"),
)
@click.option(
    "--dry-run", is_flag=True, help="Print the first rows' tasks and the count; run nothing."
)
@click.option("--resume", "resume_id", metavar="JOB", help="Run a map's rows not completed yet.")
@click.option("--agent", "-a", help="Agent for every row ({field} allowed).")
@click.option("--backend", "-b", help="Agent CLI for every row ({field} allowed).")
@click.option("--model", "-m", help="Model for every row ({field} allowed).")
@click.option("--cwd", help="Working directory of every row ({field} allowed).")
@click.option("--timeout", type=float, help="Wall-clock limit per row's run, in seconds.")
@click.option("--isolate", type=click.Choice(["worktree"]), help="Each row in its own worktree.")
@click.option("--output-schema", metavar="FILE|JSON", help="JSON Schema of each row's answer.")
@click.option("--concurrency", "-j", type=int, help="Rows at once (default 4, from config).")
@click.option(
    "--max-cost", type=float, help="The whole map's budget in USD: no row starts past it."
)
@click.option("--max-tokens", type=int, help="The whole map's budget in tokens.")
@click.option("--executor", type=click.Choice(["local", "ray"]), help="Where rows run.")
@click.option("--ray-address", help="The Ray cluster (default: config, else $RAY_ADDRESS).")
@click.option(
    "--ray-shared-cwd",
    is_flag=True,
    default=None,
    help="On Ray: working directories exist on every node (docs/cluster.md).",
)
@click.option("--runner", type=click.Choice(["process", "tmux"]), help="How supervisors start.")
@click.option(
    "--agent-scope", type=click.Choice(["user", "both"]), help="'both': project agents too."
)
@click.option("--session", help="Session to record lifecycle entries in.")
@click.option("--bg", is_flag=True, help="Run in the background: print the job id and return.")
@click.option("--json", "as_json", is_flag=True, help="Print the job result on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option(
    "--progress",
    type=click.Choice(["text", "jsonl"]),
    default="text",
    show_default=True,
    help="Progress on stderr: a line for people (live on a terminal), or JSON records"
    " ({type: row, …} per row, {type: map, done, total, …} after each).",
)
@options_named("verify", "verify_timeout", "verify_attempts", "review")
@parent_pid_option
def map_command(
    input_name: str | None,
    task: str | None,
    key: str | None,
    where: tuple[str, ...],
    limit: int | None,
    retries: int | None,
    input_format: str | None,
    out: Path | None,
    dry_run: bool,
    resume_id: str | None,
    agent: str | None,
    backend: str | None,
    model: str | None,
    cwd: str | None,
    timeout: float | None,
    isolate: str | None,
    output_schema: str | None,
    concurrency: int | None,
    max_cost: float | None,
    max_tokens: int | None,
    executor: Executor | None,
    ray_address: str | None,
    ray_shared_cwd: bool | None,
    runner: str | None,
    agent_scope: str | None,
    session: str | None,
    bg: bool,
    as_json: bool,
    quiet: bool,
    progress: str,
    verify: str | None,
    verify_timeout: float | None,
    verify_attempts: int | None,
    review: str | None,
    parent_pid: int | None,
) -> None:
    """Run TEMPLATE once per row of INPUT (a CSV, a JSON-lines file, a file of lines, or
    '-' for stdin), CONCURRENCY rows at once; {field} in the task (and in --cwd, --agent,
    --model, --backend) is the row's field. Progress goes to stderr, a summary (or with
    --json the job result) to stdout; --out keeps each row's result as it finishes.
    A map is a job: `ps`, `wait`, `stop`, `show --rows`; `--resume JOB` runs the rows not
    completed (after a stop, a crash, a budget).

    \b
    Examples:
      subagents map issues.csv --task "Triage issue {number}: {title}" --key number \\
          --output-schema triage.json -j 8 --out triage.csv
      git ls-files '*.py' | subagents map - --task "Fix lint rule E501 in {line}" --isolate worktree
      subagents map --resume 01JD…
    """
    from subagents import maps
    from subagents.errors import UsageError

    if resume_id is not None:
        if input_name is not None or task is not None:
            fail("--resume JOB takes no INPUT or --task: the map has its own")
        try:
            job = maps.resume_map(resume_id, background=bg)
        except UsageError as exc:
            fail(str(exc))
        run_map(job, bg=bg, as_json=as_json, quiet=quiet, progress=progress)
    if input_name is None or task is None:
        fail("missing INPUT or --task; usage: subagents map INPUT --task TEMPLATE [OPTIONS]")
    from subagents import service
    from subagents.service import parse_where

    options: dict[str, Any] = {
        "agent": agent,
        "backend": backend,
        "model": model,
        "cwd": cwd,
        "timeout": timeout,
        "isolate": isolate,
        "output_schema": output_schema,
        "verify": verify,
        "verify_timeout": verify_timeout,
        "verify_attempts": verify_attempts,
        "review": review,
        "key": key,
        "limit": limit,
        "retries": retries,
        "out": str(out) if out is not None else None,
        "input_format": input_format,
    }
    planned: list[tuple[Row, RunRequest]] | None = [] if dry_run else None
    try:
        watch = None if parent_pid is None else service.bound_to(parent_pid, foreground=not bg)
        job = maps.prepare_map(
            input_name,
            task,
            background=bg,
            concurrency=concurrency,
            max_cost=max_cost,
            max_tokens=max_tokens,
            executor=executor,
            session=session,
            watch=watch,
            dry_run=planned,
            placement={
                "ray_address": ray_address,
                "ray_shared_cwd": ray_shared_cwd,
                "runner": runner,
                "agent_scope": agent_scope,
            },
            where=parse_where(where) or None,
            **{k: v for k, v in options.items() if v is not None},
        )
    except UsageError as exc:
        fail(str(exc).removeprefix("arguments: "))
    if planned is not None:
        _dry_run(planned)
    run_map(job, bg=bg, as_json=as_json, quiet=quiet, progress=progress)


def _dry_run(planned: list[tuple[Row, RunRequest]]) -> NoReturn:
    from subagents.cli.app import answer
    from subagents.service import render

    for row, req in planned[:DRY_RUN_SHOWN]:
        answer(f"row {row.index + 1} (key {row.key}): {render(req.task, row.fields)}")
    more = len(planned) - DRY_RUN_SHOWN
    if more > 0:
        answer(f"… and {more} more")
    answer(f"{len(planned)} row{'s' if len(planned) != 1 else ''}; nothing run (--dry-run)")
    sys.exit(0)


def run_map(job: PreparedJob, *, bg: bool, as_json: bool, quiet: bool, progress: str) -> NoReturn:
    """Run a prepared map here (progress on stderr, its summary or result on stdout), or in
    the background; exit with its status's code."""
    from subagents import maps, service
    from subagents.service import exit_code

    if bg:
        run_in_background(job, as_json=as_json, hint=not quiet, follow="show --rows")
    reporter = None if quiet else Reporter(progress == "jsonl")
    service.mark_started(job)
    if reporter is None:
        result = maps.drive(job)
    else:
        result = maps.drive(job, on_row=reporter.row, on_start=reporter.start)
        reporter.finish(result)
    if as_json:
        print_json(result)
    else:
        emit_answer(result)
    exit_now(exit_code(result))


def follow_map(job_dir: Path, job_id: str, stop: threading.Event) -> None:
    """``wait --progress jsonl`` of a map: its progress as it is, then a row record and the
    map's progress as each row ends, from its row log, until ``stop`` (then once more: the
    last rows)."""
    from subagents.service import MapWatch, row_record

    watch = MapWatch(job_dir, job_id)
    sys.stderr.write(json.dumps(watch.progress.record()) + "\n")
    sys.stderr.flush()
    while True:
        stopping = stop.wait(0.5)
        for row, entry in watch.poll():
            sys.stderr.write(json.dumps(row_record(row.index, row.key, entry)) + "\n")
            sys.stderr.write(json.dumps(watch.progress.record()) + "\n")
        sys.stderr.flush()
        if stopping:
            return


class Reporter:
    """Progress on stderr: a live line on a terminal (redrawn each second and at each
    row's end), else a line every 5 s; or JSON records, one per row and one of the map's
    progress after it."""

    def __init__(self, jsonl: bool) -> None:
        self.jsonl = jsonl
        self.live = not jsonl and sys.stderr.isatty()
        self.progress: MapProgress | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last = 0.0
        self._running = 0  # rows running as the last JSON record said

    def start(self, progress: MapProgress) -> None:
        self.progress = progress
        if self.jsonl:  # the rows counted before any ends (a face shows 0/N at once)
            self._write(progress.record())
        threading.Thread(target=self._tick, daemon=True, name="subagents-map-progress").start()

    def _tick(self) -> None:
        import time

        while not self._stop.wait(1.0 if self.live or self.jsonl else 5.0):
            if self.jsonl:
                self._changed()
            elif self.live or time.monotonic() - self._last >= 5.0:
                self._show()

    def _changed(self) -> None:
        """JSON records: the map's progress again when rows started or stopped since the last
        record (a row's end writes its own)."""
        assert self.progress is not None
        record = self.progress.record()
        if record["running"] != self._running:
            self._write(record)

    def _show(self, final: bool = False) -> None:
        import time

        from subagents.service import progress_line

        if self.progress is None:
            return
        line = progress_line(self.progress.record())
        with self._lock:
            self._last = time.monotonic()
            if self.live:
                sys.stderr.write("\r\x1b[2K" + line + ("\n" if final else ""))
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def row(self, row: Row, entry: JsonObject) -> None:
        if not self.jsonl:
            if self.live:
                self._show()
            return
        from subagents.service import row_record

        assert self.progress is not None
        self._write(row_record(row.index, row.key, entry), self.progress.record())

    def _write(self, *records: Mapping[str, object]) -> None:
        with self._lock:
            for record in records:
                if record.get("type") == "map":
                    self._running = int(record["running"])  # type: ignore[call-overload]
                sys.stderr.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
            sys.stderr.flush()

    def finish(self, result: JobResult) -> None:
        self._stop.set()
        if not self.jsonl:
            self._show(final=True)
        else:
            from subagents.present.answer import map_answer

            self._write(map_answer(result))
