"""The command line: a thin layer over the Python API."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from subagents.result import EXIT_CODES

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"subagents: {message}", err=True)
    sys.exit(code)


def load_limits(cwd: Path | None = None) -> Any:
    from subagents.config import ConfigError
    from subagents.runs import limits_from_settings

    try:
        return limits_from_settings(cwd)
    except ConfigError as exc:
        fail(str(exc))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="subagents")
def main() -> None:
    """Delegate tasks to child coding agents and get back a result you can trust."""


@main.command()
@click.argument("task", required=False)
@click.option("--backend", "-b", help="Agent CLI to run (pi, ...). Default: from config, else pi.")
@click.option("--model", "-m", help="Model, e.g. provider/id for pi.")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False, path_type=Path), help="Working directory for the child.")
@click.option("--timeout", type=float, help="Wall-clock limit in seconds (status 'timeout', exit 124).")
@click.option("--tools", help="Comma-separated tool allow-list, where the backend supports one.")
@click.option("--json", "as_json", is_flag=True, help="Print result.json on stdout instead of the answer.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
def run(
    task: str | None,
    backend: str | None,
    model: str | None,
    cwd: Path | None,
    timeout: float | None,
    tools: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Run one TASK on a child agent and print its final answer.

    Progress goes to stderr; stdout carries only the answer (or, with --json,
    result.json). Exit codes: 0 completed, 1 failed, 2 bad input, 124 timeout,
    130 aborted.
    """
    from subagents.runs import RunRequest

    if task is None or task == "-":
        if task == "-" or not sys.stdin.isatty():
            task = sys.stdin.read()
        else:
            fail("missing TASK (give it as an argument, or '-' to read it from stdin)")
    tool_list = [t.strip() for t in tools.split(",") if t.strip()] if tools is not None else None
    req = RunRequest(task=task, backend=backend, model=model, cwd=str(cwd) if cwd else None, timeout=timeout, tools=tool_list)
    run_foreground(req, as_json=as_json, quiet=quiet)


def run_foreground(req: Any, *, as_json: bool, quiet: bool, limits: Any = None) -> NoReturn:
    """Start one run, show its progress, print its outcome, exit with its status code."""
    from subagents.display import Display
    from subagents.runs import InputError, start

    limits = limits or load_limits(Path(req.cwd) if req.cwd else None)
    try:
        handle = start(req, limits)
    except InputError as exc:
        fail(str(exc))
    display = Display(enabled=not quiet)
    display.started(handle.run_id, handle.run_dir, req.backend or limits.default_backend)
    try:
        with display:
            result = handle.wait(on_event=display.event)
    except KeyboardInterrupt:
        display.note("interrupted: stopping the run…")
        result = handle.stop()
    assert result is not None
    display.finished(result)
    emit_result(result, as_json)
    sys.exit(EXIT_CODES.get(result.get("status", "failed"), 1))


def emit_result(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    if result.get("status") == "completed":
        text = result.get("finalText") or ""
        click.echo(text if text.endswith("\n") else text + "\n", nl=False)
    else:
        click.echo(result.get("diagnostics") or result.get("errorMessage") or result.get("status"), err=True)


DEMO_FILES = {
    "README.md": "# todo-api\n\nA tiny service that keeps a to-do list.\n",
    "app.py": "def add(todos, item):\n    return [*todos, item]\n",
    "test_app.py": "from app import add\n\n\ndef test_add():\n    assert add([], 'x') == ['x']\n",
}


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print result.json on stdout instead of the answer.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option("--task", default="Look around this project and tell me what it is.", show_default=True)
def demo(as_json: bool, quiet: bool, task: str) -> None:
    """Run a real pi subagent offline, against a local mock model.

    Starts the project's mock model server on 127.0.0.1, points pi at it with a
    throw-away config, and runs one task in a small sample project through the
    normal run path: live progress, run directory, result. Needs pi on PATH (or
    SUBAGENTS_PI_BIN); no network, no API key.
    """
    import tempfile

    from subagents.mockmodel import MockModelServer, Script, write_pi_config
    from subagents.runs import RunRequest

    script = Script(final_text="This is a small Python project. I listed it and found: {tool_output}.")
    with tempfile.TemporaryDirectory(prefix="subagents-demo-") as tmp, MockModelServer(script) as server:
        project = Path(tmp) / "todo-api"
        project.mkdir()
        for name, text in DEMO_FILES.items():
            (project / name).write_text(text)
        pi_env = write_pi_config(Path(tmp) / "pi-agent", server.url)
        req = RunRequest(
            task=task, backend="pi", model="mock/mock-model", tools=["bash", "read", "ls"], cwd=str(project), env=pi_env
        )
        run_foreground(req, as_json=as_json, quiet=quiet)


if __name__ == "__main__":
    main()
