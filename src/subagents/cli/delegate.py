"""``subagents run`` and ``subagents demo``: delegate a task and show its progress and answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from subagents.cli.app import WHEN_TOLD, emit_answer, exit_now, fail, main, print_json
from subagents.cli.background import parent_pid_option, run_in_background
from subagents.cli.options import run_options

if TYPE_CHECKING:
    from collections.abc import Mapping

    from subagents.errors import UsageError
    from subagents.present.feed import JsonlFeed
    from subagents.service import JobStore, PreparedJob
    from subagents.types import JobMode

# ---- run ----------------------------------------------------------------------


# Shared by `run` and `continue` (cli/repos.py): how a foreground job reports and ends.
progress_option = click.option(
    "--progress",
    type=click.Choice(["text", "jsonl"]),
    default="text",
    show_default=True,
    help="Progress on stderr: lines for people, or JSON records one a line for programs "
    "(a 'job' record, then 'progress' records: jobId, runId, text, status, activity, "
    "toolCount, usage; see docs/pi.md).",
)


@main.command()
@click.argument("tasks", nargs=-1)
@click.option(
    "--cwd", type=click.Path(path_type=Path), help="Working directory for the child(ren)."
)
@run_options
@click.option(
    "--council",
    metavar="MEMBERS",
    help="Ask several CLIs the same TASK side by side: comma-separated backend[:model] or"
    " agent names, e.g. pi,claude,codex (docs/structured.md).",
)
@click.option("--parallel", "mode", flag_value="parallel", help="Run every TASK side by side.")
@click.option(
    "--chain",
    "mode",
    flag_value="chain",
    help="Run the TASKs one after another; {previous} is the previous answer.",
)
@click.option(
    "--plan",
    "-f",
    "plan_file",
    type=click.Path(path_type=Path),
    help="A plan file (YAML or JSON): mode and tasks/steps.",
)
@click.option(
    "--session",
    help="Session to record lifecycle entries in (default: $SUBAGENTS_SESSION or 'default').",
)
@click.option(
    "--bg", is_flag=True, help="Run in the background: print the job id and return at once."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print result.json (one task) or the job result on stdout.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@progress_option
@parent_pid_option
def run(
    tasks: tuple[str, ...],
    cwd: Path | None,
    council: str | None,
    mode: JobMode | None,
    plan_file: Path | None,
    session: str | None,
    bg: bool,
    as_json: bool,
    quiet: bool,
    progress: str,
    parent_pid: int | None,
    **options: Any,
) -> None:
    """Run TASK(s) on child agents and print the final answer.

    One TASK runs alone; with --parallel or --chain each TASK is a run of the job;
    with --plan the job comes from a file. TASK '-' reads the task from stdin.
    Progress goes to stderr; stdout carries only the answer, or with --json the
    result. With --bg the job runs on after this command returns (see `ps`, `wait`).
    Put `--` before a TASK that starts with '-'.

    \b
    Examples:
      subagents run "Summarize the architecture of this repo"
      subagents run --agent scout --json "Where is authentication handled?"
      subagents run --parallel -j 2 "check module a" "check module b"
      subagents run --chain "list the TODOs" "pick the most important: {previous}"
      subagents run --isolate worktree --bg "fix the flaky test"   # then: subagents apply
    """
    from subagents.cli.options import chosen, on_the_command_line
    from subagents.errors import PlanError
    from subagents.service import job_of, load_plan, with_options

    given = chosen(options)
    job = dict(given.job)
    concurrency = job.pop("concurrency", None)
    try:
        if plan_file is not None:
            if tasks:
                fail("give either a --plan file or TASKs, not both")
            spec = with_options(load_plan(plan_file), given.step, concurrency, str(plan_file), job)
        else:
            items = list(tasks)
            if not items:
                # Never a wait on stdin unless asked with '-': a parent that spawned us with an
                # open pipe would hang.
                fail(f"missing TASK; usage: {USAGE}")
            if items == ["-"]:
                items = [sys.stdin.read()]
            if len(items) > 1 and mode is None:
                fail(f"{len(items)} TASKs given: add --parallel or --chain (or quote the task)")
            steps: list[dict[str, object]] = [{"task": t, **given.step} for t in items]
            if council is not None:
                mode, steps = "council", _council_steps(council, items, given.step)
            # The checks every job spec gets; click has checked the options' types.
            spec = job_of(mode or "single", steps, concurrency, "arguments", **job)
    except PlanError as exc:
        where = str(exc) if plan_file is not None else on_the_command_line(exc, len(tasks) or 1)
        refuse(exc, where, as_json)
    from subagents import service
    from subagents.errors import BadRequest

    try:
        watch = None if parent_pid is None else service.bound_to(parent_pid, foreground=not bg)
        prepared = service.prepare_job(
            spec, cwd=cwd, session=session, watch=watch, drive_here=not bg, **given.settings
        )
    except BadRequest as exc:
        where = str(exc) if plan_file is not None else on_the_command_line(exc, len(spec.steps))
        refuse(exc, where, as_json)
    if prepared.plan.mode == "map":  # a plan file's map: its rows' progress, not its runs'
        from subagents.cli.mapcmd import run_map

        run_map(prepared, bg=bg, as_json=as_json, quiet=quiet, progress=progress)
    if bg:
        run_in_background(prepared, as_json=as_json, hint=not quiet)
    run_in_foreground(prepared, as_json=as_json, quiet=quiet, progress=progress)


def _council_steps(
    members: str, tasks: list[str], given: Mapping[str, object]
) -> list[dict[str, object]]:
    """A council's steps: its one TASK for each member (``backend[:model]`` or an agent)."""
    from subagents.backends import known_backends
    from subagents.errors import FieldProblem
    from subagents.service import member_step

    if len(tasks) != 1 or not members.strip():
        fail("--council takes one TASK and at least one member (e.g. --council pi,claude)")
    given = {k: v for k, v in given.items() if k not in ("agent", "backend", "model")}
    try:
        return [
            {"task": tasks[0], **given, **member_step(m, known_backends())}
            for m in members.split(",")
        ]
    except FieldProblem as exc:
        fail(f"--council: {exc.problem}")


USAGE = "subagents run [OPTIONS] TASK... (TASK '-' reads the task from stdin; or --plan FILE)"


def refuse(exc: UsageError, line: str, as_json: bool) -> NoReturn:
    """Refuse the job in one line (``line``: the place as the command line says it). With
    ``--json``, stdout also gets the refusal as data, ``{"refused": {"loc", "problem",
    "flag"}}`` (``flag``: the option's flag, or null): a program that made the command line
    from its own names (the pi tool: ``maxTurns``, ``tasks.1.maxCost``) names the place its
    own way."""
    from subagents.cli.options import flag_for

    if as_json:
        record = {"loc": list(exc.loc), "problem": exc.problem, "flag": flag_for(exc.loc)}
        print_json({"refused": record})
    fail(line)


def run_in_foreground(
    job: PreparedJob, *, as_json: bool, quiet: bool, progress: str = "text"
) -> NoReturn:
    """Drive a job here, showing progress; print its outcome; exit with its status code.
    A job bound to its parent (``--parent-pid``) is stopped here too when the parent ends
    (SIGTERM to this process: the job ends 'aborted'); its runs watch it as well."""
    import os
    import signal

    from subagents.core import procs

    watched = [w for w in job.plan.requests[0].watch if w["pid"] != procs.command_pid()]
    procs.when_gone(watched, lambda _gone: os.kill(os.getpid(), signal.SIGTERM))
    job.store.hold_rows()
    WHEN_TOLD.append(job.store.put_held_rows)
    exit_now(drive_and_report(job, as_json=as_json, quiet=quiet, progress=progress))


def drive_and_report(
    job: PreparedJob, *, as_json: bool, quiet: bool, progress: str = "text"
) -> int:
    """Drive a job here, showing progress; print its outcome; return its exit code."""
    from subagents import service
    from subagents.service import exit_code

    if quiet:
        # Nothing shown: the run's events are not read here at all (nor rich imported).
        result = service.drive(job)
    elif progress == "jsonl":
        service.mark_started(job)  # so the first record can say when the job started
        feed = progress_feed(job.store, job.job_id)
        feed.started()
        result = service.drive(job, on_event=feed.event)
        feed.ended(result)
    else:
        from subagents.cli.display import Display

        display = Display(labels=service.run_labels(job))
        display.started(job)
        with display:
            result = service.drive(job, on_event=display.event)
        display.finished(result)
    single = job.plan.mode == "single" and len(result["runs"]) == 1
    if as_json:
        print_json(result["runs"][0] if single else result)
    else:
        emit_answer(result)
    return exit_code(result)


def progress_feed(store: JobStore, job_id: str) -> JsonlFeed:
    """The JSON-lines progress feed (on stderr) of a stored job: ``run --progress jsonl``
    and ``wait --progress jsonl`` say the same."""
    from subagents.core import paths
    from subagents.present.feed import JsonlFeed, steps_of

    state = store.load(job_id)
    steps = steps_of(state["plan"])

    def run_id(index: int) -> str | None:
        ids = store.load(job_id).get("runIds") or []
        return ids[index] if index < len(ids) and ids[index] else None

    return JsonlFeed(
        sys.stderr,
        job_id,
        state["mode"],
        [s["agent"] or s["backend"] or "run" for s in steps],
        run_id,
        steps=steps,
        started_at=state.get("startedAt"),
        runs_dir=paths.runs_dir(store.home),
    )


# ---- demo ----------------------------------------------------------------------

DEMO_FILES = {
    "README.md": "# todo-api\n\nA tiny service that keeps a to-do list.\n",
    "app.py": "def add(todos, item):\n    return [*todos, item]\n",
    "test_app.py": "from app import add\n\n\ndef test_add():\n    assert add([], 'x') == ['x']\n",
}


@main.command()
@click.option(
    "--json", "as_json", is_flag=True, help="Print result.json on stdout instead of the answer."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option(
    "--task", default="Look around this project and tell me what it is.", show_default=True
)
def demo(as_json: bool, quiet: bool, task: str) -> None:
    """Run a real pi subagent offline, against a local mock model.

    Starts the project's mock model server on 127.0.0.1, points pi at it with a
    throw-away config, and runs one task in a small sample project through the
    normal run path: live progress, run directory, result. Needs pi on PATH (or
    SUBAGENTS_PI_BIN); no network, no API key.
    """
    import tempfile

    from subagents import api, service
    from subagents.demo.mockmodel import MockModelServer, Script, write_pi_config
    from subagents.service import parse_job

    script = Script(
        final_text="This is a small Python project. I listed it and found: {tool_output}."
    )
    with (
        tempfile.TemporaryDirectory(prefix="subagents-demo-") as tmp,
        MockModelServer(script) as server,
    ):
        project = Path(tmp) / "todo-api"
        project.mkdir()
        for name, text in DEMO_FILES.items():
            (project / name).write_text(text)
        pi_env = write_pi_config(Path(tmp) / "pi-agent", server.url)
        spec = parse_job(
            {
                "mode": "single",
                "steps": [{"task": task, "backend": "pi", "model": "mock/mock-model"}],
            }
        )
        try:
            job = service.prepare_job(
                spec, cwd=project, tools=["bash", "read", "ls"], extra_env=pi_env
            )
        except api.BadRequest as exc:
            fail(str(exc))
        code = drive_and_report(job, as_json=as_json, quiet=quiet)
    # Only now: the temp dir (sample project, pi config) is gone and the server stopped.
    exit_now(code)
