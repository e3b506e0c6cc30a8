"""The command line as a user runs it: ``python -m subagents.cli`` in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

CLI = [sys.executable, "-m", "subagents.cli"]


def cli(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120, **kw: Any
) -> subprocess.CompletedProcess[str]:
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        **kw,
    )


def no_traceback(*procs: subprocess.CompletedProcess[str]) -> None:
    for p in procs:
        assert "Traceback" not in p.stderr + p.stdout, (p.args, p.stderr)


# An in-process command has no subprocess timeout to end it if it hangs: past this, the test's
# process prints every thread's stack and exits (a failure xdist reports), not a hung suite.
INVOKE_BOUND = 600.0


def invoke(
    args: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    input: str | bytes | None = None,
    bound: float = INVOKE_BOUND,
) -> subprocess.CompletedProcess[str]:
    """``cli(args, env)`` in this process, through click's runner: for what ends before
    anything starts (bad input, --help, wording), for looks at what is on disk (ps,
    show, wait) and for foreground runs whose command's own process is not the subject
    (its supervisor and child are processes all the same), at a fraction of a process's
    cost. The same exit code, stdout and stderr (``input`` is its stdin); a command that
    would start a process fails the test unless it is marked ``process``
    (tests/support/spawns.py). Past ``bound`` seconds this process ends with every
    thread's stack on stderr (faulthandler): nothing waits for ever."""
    import faulthandler

    from click.testing import CliRunner

    from subagents.cli import main

    def exit_now(code: int) -> NoReturn:  # the CLI's fast exit must not end pytest
        raise SystemExit(code)

    saved, here = os._exit, os.getcwd()
    os._exit = exit_now  # type: ignore[assignment]
    faulthandler.dump_traceback_later(bound, exit=True)
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(main, args, input=input, env=env, prog_name="subagents")
    finally:
        faulthandler.cancel_dump_traceback_later()
        os._exit = saved
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback: the test shows it, as the process would
    return subprocess.CompletedProcess(
        ["subagents", *args], result.exit_code, result.stdout, result.stderr
    )


def imported_modules(importtime: str) -> set[str]:
    """The modules ``python -X importtime`` (or PYTHONPROFILEIMPORTTIME) says were
    imported, from its lines in ``importtime`` (a process's stderr, a log)."""
    return {
        line.split("|")[2].strip()
        for line in importtime.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
