"""The command line: a thin layer over the Python API (``subagents.api``)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"subagents: {message}", err=True)
    sys.exit(code)


def exit_now(code: int) -> NoReturn:
    """Exit once everything is written, without the interpreter's teardown of every loaded
    module (60-100 ms with pydantic and rich loaded): a caller waiting on us sees the end sooner.
    Every file of the job was closed before; only our own output needs flushing."""
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="subagents")
def main() -> None:
    """Delegate tasks to child coding agents and get back a result you can trust.

    Exit codes: 0 completed, 1 failed, 2 bad input, 124 timeout, 130 aborted.
    """


# ---- run ----------------------------------------------------------------------


@main.command()
@click.argument("tasks", nargs=-1)
@click.option("--agent", "-a", help="Agent to run the task(s) (see `subagents agents`).")
@click.option(
    "--backend",
    "-b",
    help="Agent CLI: pi, claude, codex, gemini, opencode. Default: from config, else pi.",
)
@click.option("--model", "-m", help="Model (for pi: provider/id).")
@click.option(
    "--cwd", type=click.Path(path_type=Path), help="Working directory for the child(ren)."
)
@click.option(
    "--timeout",
    type=float,
    help="Wall-clock limit per run in seconds (status 'timeout', exit 124).",
)
@click.option("--tools", help="Comma-separated tool allow-list, where the backend supports one.")
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
    "--concurrency", "-j", type=int, help="Parallel runs at once (default 4, from config)."
)
@click.option(
    "--runner",
    type=click.Choice(["process", "tmux"]),
    help="How each run's supervisor is launched.",
)
@click.option(
    "--agent-scope",
    type=click.Choice(["user", "both"]),
    help="'both' also uses project-local agents.",
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
def run(
    tasks: tuple[str, ...],
    agent: str | None,
    backend: str | None,
    model: str | None,
    cwd: Path | None,
    timeout: float | None,
    tools: str | None,
    mode: str | None,
    plan_file: Path | None,
    concurrency: int | None,
    runner: str | None,
    agent_scope: str | None,
    session: str | None,
    bg: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Run TASK(s) on child agents and print the final answer.

    One TASK runs alone; with --parallel or --chain each TASK is a run of the job;
    with --plan the job comes from a file. TASK '-' reads the task from stdin.
    Progress goes to stderr; stdout carries only the answer, or with --json the
    result. With --bg the job runs on after this command returns (see `ps`, `wait`).
    """
    from subagents.jobspec import JobSpec, PlanError, load_plan, parse_job

    if plan_file is not None:
        if tasks:
            fail("give either a --plan file or TASKs, not both")
        try:
            spec = load_plan(plan_file)
        except PlanError as exc:
            fail(str(exc))
        overrides = {"agent": agent, "backend": backend, "model": model, "timeout": timeout}
        for step in spec.steps:
            for key, value in overrides.items():
                if value is not None and getattr(step, key) is None:
                    setattr(step, key, value)
    else:
        items = list(tasks)
        if items == ["-"] or (not items and not sys.stdin.isatty()):
            items = [sys.stdin.read()]
        if not items:
            fail("missing TASK (give it as an argument, '-' to read it from stdin, or --plan FILE)")
        if len(items) > 1 and mode is None:
            fail(f"{len(items)} TASKs given: add --parallel or --chain (or quote the task)")
        steps = [
            {
                "task": t,
                "agent": agent,
                "backend": backend,
                "model": model,
                "timeout": timeout,
                "cwd": None,
            }
            for t in items
        ]
        try:
            spec = parse_job({"mode": mode or "single", "steps": steps}, "arguments")
        except PlanError as exc:
            fail(str(exc))
    if concurrency is not None:
        spec = JobSpec.model_validate({**spec.model_dump(), "concurrency": concurrency})
    tool_list = [t.strip() for t in tools.split(",") if t.strip()] if tools is not None else None
    from subagents import api

    try:
        job = api.prepare_job(
            spec,
            cwd=cwd,
            tools=tool_list,
            runner=runner,
            agent_scope=agent_scope,
            session=session,
        )
    except api.BadRequest as exc:
        message = str(exc)
        if plan_file is None and len(spec.steps) == 1:
            # One task from the command line: "steps.0.backend: …" names no field the user typed.
            message = (
                message.removeprefix("steps.0.").split(": ", 1)[-1]
                if message.startswith("steps.0.")
                else message
            )
        fail(message)
    if bg:
        job_id = api.start_background(job)
        if as_json:
            print_json({"jobId": job_id})
        else:
            click.echo(job_id)
            if not quiet:
                click.echo(
                    f"started in the background; follow with: subagents logs -f {job_id}", err=True
                )
        sys.exit(0)
    run_in_foreground(job, as_json=as_json, quiet=quiet)


def run_in_foreground(job: Any, *, as_json: bool, quiet: bool) -> NoReturn:
    """Drive a job here, showing progress; print its outcome; exit with its status code."""
    from subagents import api
    from subagents.display import Display
    from subagents.orchestrator import exit_code

    display = Display(enabled=not quiet, labels=api.run_labels(job))
    display.started(job)
    with display:
        result = api.drive(job, on_event=display.event)
    display.finished(result)
    single = job.plan.mode == "single" and len(result["runs"]) == 1
    if as_json:
        print_json(result["runs"][0] if single else result)
    else:
        emit_answer(result)
    exit_now(exit_code(result))


def emit_answer(result: dict[str, Any]) -> None:
    """stdout: the answer(s); stderr: what went wrong."""
    runs = result.get("runs") or []
    if result.get("mode") == "parallel":
        for i, r in enumerate(runs):
            label = f"[{i + 1}] {r.get('agent') or r.get('backend') or 'run'}: {r.get('status')}"
            click.echo(f"## {label}\n\n{(r.get('finalText') or '').rstrip()}\n")
    elif result.get("status") == "completed":
        text = result.get("finalText") or ""
        click.echo(text if text.endswith("\n") else text + "\n", nl=False)
    for r in runs:
        if r.get("status") != "completed":
            click.echo(r.get("diagnostics") or r.get("errorMessage") or r.get("status"), err=True)


# ---- job commands ------------------------------------------------------------


def _store() -> Any:
    from subagents.jobs import JobStore

    return JobStore()


def _resolve(store: Any, job_id: str) -> str:
    from subagents.jobs import JobIdError

    try:
        resolved: str = store.resolve(job_id)
    except JobIdError as exc:
        fail(str(exc))
    return resolved


def _elapsed(item: dict[str, Any]) -> str:
    if item.get("durationMs") is not None:
        seconds = item["durationMs"] / 1000
    elif item.get("createdAt"):
        seconds = time.time() - float(item["createdAt"])
    else:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


@main.command()
@click.option("--limit", "-n", default=20, show_default=True, help="How many jobs, newest first.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table.")
def ps(limit: int, as_json: bool) -> None:
    """Running and recent jobs: id, agents, status, elapsed, current activity."""
    from subagents import api

    items = api.list_jobs(limit)
    if as_json:
        for item in items:
            click.echo(json.dumps(item, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("JOB", "MODE", "AGENTS", "STATUS", "ELAPSED", "ACTIVITY"):
        table.add_column(col, overflow="ellipsis", no_wrap=col != "ACTIVITY")
    for item in items:
        table.add_row(
            item["jobId"],
            item.get("mode") or "",
            ",".join(item.get("agents") or []) or "-",
            item.get("status") or "",
            _elapsed(item),
            item.get("activity") or "",
        )
    if not items:
        click.echo("no jobs yet", err=True)
        return
    Console().print(table)


@main.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="The whole job.json.")
def show(job_id: str, as_json: bool) -> None:
    """A job's result, or its state while it runs."""
    store = _store()
    from subagents import api

    state = api.job_state(store, _resolve(store, job_id))
    if as_json:
        print_json(state)
        return
    click.echo(api.describe_job(state))


@main.command()
@click.argument("job_id")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing as the job goes on, until it ends."
)
def logs(job_id: str, follow: bool) -> None:
    """The transcript of a job's runs."""
    store = _store()
    from subagents import api

    try:
        for chunk in api.job_transcript(store, _resolve(store, job_id), follow=follow):
            click.echo(chunk, nl=False)
    except KeyboardInterrupt:
        sys.exit(130)


@main.command()
@click.argument("job_id")
@click.option(
    "--timeout", type=float, help="Give up after this many seconds (exit 124, the job runs on)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the job result.")
def wait(job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for a job to end; the exit code is the job's status code."""
    store = _store()
    from subagents import api
    from subagents.orchestrator import exit_code

    jid = _resolve(store, job_id)
    try:
        result = api.wait_job(store, jid, timeout)
    except KeyboardInterrupt:
        sys.exit(130)
    if result is None:
        fail(f"job {jid} is still running after {timeout:g}s", 124)
    if as_json:
        print_json(result)
    else:
        emit_answer(result)
    sys.exit(exit_code(result))


@main.command()
@click.argument("job_id")
def stop(job_id: str) -> None:
    """Stop a job: every run's process group is killed; the job ends 'aborted'."""
    store = _store()
    from subagents import api

    result = api.stop_job(store, _resolve(store, job_id))
    click.echo(f"{result['jobId']}: {result['status']}")


# ---- lifecycle records -------------------------------------------------------------


def _session_file(session: str | None) -> Path:
    from subagents import paths, sessionlog

    try:
        return sessionlog.session_path(
            paths.state_home(), session or sessionlog.default_session_id()
        )
    except ValueError as exc:
        fail(str(exc))


@main.command()
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
@click.option(
    "--status",
    type=click.Choice(["completed", "failed", "aborted"]),
    help="Only jobs that ended so.",
)
@click.option("--agent", help="Only jobs that ran this agent.")
@click.option("--since", help="Only entries since: 45s, 30m, 2h, 1d, 2w or an ISO date/time.")
@click.option("--all", "all_events", is_flag=True, help="Start entries too, not only ends.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, as stored.")
def history(
    session: str | None,
    status: str | None,
    agent: str | None,
    since: str | None,
    all_events: bool,
    as_json: bool,
) -> None:
    """What ran in a session: when, for whom, at what cost, and how it ended."""
    from subagents import sessionlog

    try:
        since_ts = sessionlog.parse_since(since) if since else None
    except ValueError as exc:
        fail(str(exc))
    entries = sessionlog.read(_session_file(session))
    ends = None if all_events else ["subagent:complete", "subagent:error", "subagent:aborted"]
    entries = sessionlog.select(
        entries, status=status, agent=agent, since=since_ts, event_types=ends
    )
    if as_json:
        for e in entries:
            click.echo(json.dumps(e, ensure_ascii=False))
        return
    if not entries:
        click.echo("no entries", err=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("TIME", "JOB", "EVENT", "AGENT", "DURATION", "TOKENS", "COST", "SUMMARY"):
        table.add_column(
            col, overflow="fold" if col == "SUMMARY" else "ellipsis", no_wrap=col != "SUMMARY"
        )
    for e in entries:
        usage = e.get("usage") or {}
        cost = usage.get("cost")
        table.add_row(
            str(e.get("timestamp", ""))[:19].replace("T", " "),
            str(e.get("jobId") or ""),
            str(e.get("eventType", "")).removeprefix("subagent:"),
            str(e.get("agentName") or "-"),
            f"{e['durationMs'] / 1000:.1f}s" if e.get("durationMs") is not None else "",
            str(usage.get("totalTokens") or ""),
            f"${cost:.4f}" if cost is not None else "",
            str(e.get("summary") or ""),
        )
    Console().print(table)


@main.command()
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
def watch(session: str | None) -> None:
    """Print each new lifecycle entry as it is appended, until interrupted."""
    from subagents import sessionlog

    path = _session_file(session)
    try:
        for e in sessionlog.follow(path):
            click.echo(json.dumps(e, ensure_ascii=False))
    except KeyboardInterrupt:
        sys.exit(130)


# ---- agents ------------------------------------------------------------------


@main.group(invoke_without_command=True)
@click.option(
    "--agent-scope",
    type=click.Choice(["user", "both"]),
    help="'both' also lists project-local agents.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def agents(ctx: click.Context, agent_scope: str | None, as_json: bool) -> None:
    """List agents: name, source, description. Broken files are reported, not hidden."""
    ctx.obj = {"scope": agent_scope}
    if ctx.invoked_subcommand is not None:
        return
    from subagents import api

    found = api.discover_agents(agent_scope)
    if as_json:
        for a in found.agents.values():
            click.echo(
                json.dumps(
                    {
                        "name": a.name,
                        "source": a.source,
                        "path": str(a.path) if a.path else None,
                        "description": a.description,
                        "backend": a.backend,
                        "model": a.model,
                    }
                )
            )
    else:
        width = max((len(n) for n in found.agents), default=4)
        for a in sorted(found.agents.values(), key=lambda x: x.name):
            click.echo(f"{a.name:<{width}}  {a.source:<8}  {a.description}")
    for problem in found.problems:
        click.echo(f"warning: {problem}", err=True)


@agents.command("show")
@click.argument("name")
@click.pass_context
def agents_show(ctx: click.Context, name: str) -> None:
    """Print one agent definition."""
    from subagents import api

    try:
        a = api.get_agent(name, (ctx.obj or {}).get("scope"))
    except api.BadRequest as exc:
        fail(str(exc))
    click.echo(f"name: {a.name}\nsource: {a.source}" + (f" ({a.path})" if a.path else ""))
    click.echo(f"description: {a.description}")
    for key in ("backend", "model", "thinking", "tools", "timeout"):
        value = getattr(a, key)
        if value is not None:
            click.echo(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    click.echo("\n" + a.system_prompt.rstrip())


# ---- doctor --------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True)
def doctor(as_json: bool) -> None:
    """For each backend: found or not, version, whether it looks usable, how to install it."""
    from dataclasses import asdict

    from subagents.config import ConfigError
    from subagents.doctor import check_backends, render_text
    from subagents.runs import limits_from_settings

    try:
        limits = limits_from_settings()  # config [bins] count, as for a run
    except ConfigError as exc:
        fail(str(exc))
    checks = check_backends(limits=limits)
    if as_json:
        for c in checks:
            click.echo(json.dumps(asdict(c), ensure_ascii=False))
    else:
        click.echo(render_text(checks), nl=False)


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

    from subagents import api
    from subagents.jobspec import parse_job
    from subagents.mockmodel import MockModelServer, Script, write_pi_config

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
            job = api.prepare_job(spec, cwd=project, tools=["bash", "read", "ls"], extra_env=pi_env)
        except api.BadRequest as exc:
            fail(str(exc))
        run_in_foreground(job, as_json=as_json, quiet=quiet)


# ---- MCP server ------------------------------------------------------------------------


@main.command("mcp")
@click.option(
    "--http",
    "http",
    is_flag=True,
    help="Serve streamable HTTP on 127.0.0.1 instead of stdio (bearer token required).",
)
@click.option(
    "--port",
    type=int,
    default=8765,
    show_default=True,
    help="With --http: the port (0 picks a free one).",
)
def mcp_server(http: bool, port: int) -> None:
    """Serve the subagents MCP server: stdio, or with --http streamable HTTP on 127.0.0.1.

    With --http every request needs `Authorization: Bearer <token>`: the token is
    $SUBAGENTS_MCP_TOKEN, else a new one printed on stderr at start. See docs/mcp.md.
    """
    try:
        from subagents import mcp
    except ImportError as exc:
        fail(f"the MCP server needs the 'mcp' package (pip install 'mcp>=2.3'): {exc}")
    if http:
        mcp.serve_http(port)
    else:
        mcp.serve_stdio()


if __name__ == "__main__":
    main()
