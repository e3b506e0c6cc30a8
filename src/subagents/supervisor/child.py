"""Starting the child: its environment, its own process group, its stdout pipe made before
the spawn (sized then), stderr through a pipe, and its stdin: /dev/null, the file holding
a long task, or (a live run) a pipe the supervisor holds. No shell ever sees its argv.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

from subagents.core.files import read_json
from subagents.core.procs import RUN_ENV
from subagents.supervisor.handover import ENVIRON_FILE
from subagents.supervisor.lines import grow_pipe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from subagents.supervisor.spec import RunSpec


class Child:
    """A spawned child: its process, the read end of its stdout, and the write end of its
    stdin when the supervisor holds it (-1 otherwise)."""

    def __init__(self, proc: subprocess.Popen[bytes], out_fd: int, stdin_fd: int) -> None:
        self.proc = proc
        self.out_fd = out_fd
        self.stdin_fd = stdin_fd


def environment(run_dir: Path, spec: RunSpec) -> dict[str, str]:
    env = dict(os.environ)
    environ_file = run_dir / ENVIRON_FILE
    if environ_file.exists():
        # Launched through a runner that does not pass the caller's environment on.
        with contextlib.suppress(OSError, ValueError):
            saved = read_json(environ_file)
            if isinstance(saved, dict):
                env = {k: str(v) for k, v in saved.items()}
        with contextlib.suppress(OSError):
            environ_file.unlink()
    env.update(spec.env)
    # Some CLIs (opencode) take their working directory from $PWD, not from getcwd().
    env["PWD"] = spec.cwd
    env["SUBAGENTS_CHILD"] = "1"
    env["SUBAGENTS_DEPTH"] = str(spec.depth)
    env[RUN_ENV] = spec.runId  # inherited by all it starts: see procs.end_recorded_group
    return env


def spawn(spec: RunSpec, argv: list[str], env: dict[str, str]) -> Child | str:
    """Start ``argv``; the child, or an error message when it could not start."""
    stdin_w = -1
    try:
        if spec.live:
            stdin_r, stdin_w = os.pipe()
            stdin: Any = stdin_r
        else:
            # A regular file, written whole before the run started: a CLI reading its task
            # there sees it end, and none can wait on an open terminal.
            stdin = open(spec.stdinFile, "rb") if spec.stdinFile else subprocess.DEVNULL  # noqa: SIM115
    except OSError as exc:
        return f"could not open the task file {spec.stdinFile}: {exc.strerror or exc}"
    # The stdout pipe is made here, so it has its size before the child writes a byte.
    out_r, out_w = os.pipe()
    grow_pipe(out_w)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=spec.cwd,
            env=env,
            stdin=stdin,
            stdout=out_w,
            stderr=subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
        )
    except OSError as exc:
        what = exc.strerror or str(exc)
        target = (
            spec.cwd if isinstance(exc, NotADirectoryError) or exc.filename == spec.cwd else argv[0]
        )
        os.close(out_r)
        if stdin_w >= 0:
            os.close(stdin_w)
        return f"could not start {argv[0]!r}: {what}: {target}"
    except BaseException:
        os.close(out_r)
        if stdin_w >= 0:
            os.close(stdin_w)
        raise
    finally:
        os.close(out_w)
        if spec.live:
            os.close(stdin)  # the child's end; the supervisor keeps the other
        elif stdin is not subprocess.DEVNULL:
            stdin.close()
    return Child(proc, out_r, stdin_w)
