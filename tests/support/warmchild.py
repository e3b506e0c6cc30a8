"""A pi stand-in that shows its environment and waits for a gate, and runs started with it:
for the tests of supervisors started ahead of their run (spares, templates)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.config import Settings
from subagents.runs import RunHandle, RunRequest, start

if TYPE_CHECKING:
    from subagents.types import JobResult
from support.checks import eventually


def child(tmp_path: Path) -> Path:
    """A pi stand-in: writes its environment to $ENV_DUMP, waits for $GATE (bounded), answers.
    Written once per directory: rewritten while another run's supervisor forks (a template's,
    a spare's), the forked copy holds it open for writing until it execs, and an exec of it
    meanwhile fails "Text file busy"."""
    path = tmp_path / "env-child"
    if path.exists():
        return path
    path.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            """
            import json, os, pathlib, sys, time
            pathlib.Path(os.environ["ENV_DUMP"]).write_text(json.dumps(dict(os.environ)))
            gate, until = pathlib.Path(os.environ["GATE"]), time.monotonic() + 60
            while not gate.exists() and time.monotonic() < until:
                time.sleep(0.02)
            msg = {"role": "assistant", "content": [{"type": "text", "text": "done " + sys.argv[-1]}],
                   "stopReason": "stop", "model": "m"}
            print(json.dumps({"type": "message_end", "message": msg}), flush=True)
            """
        )
    )
    path.chmod(0o755)
    return path


def request(tmp_path: Path, name: str, gate: Path) -> tuple[RunRequest, dict[str, str]]:
    """A run of the stand-in named ``name`` (it answers "done NAME" once ``gate`` exists),
    and the environment to prepare it with."""
    req = RunRequest(
        task=name,
        backend="pi",
        cwd=str(tmp_path),
        env={"ENV_DUMP": str(tmp_path / f"{name}.env.json"), "GATE": str(gate)},
    )
    return req, {**os.environ, "SUBAGENTS_PI_BIN": str(child(tmp_path))}


def start_run(tmp_path: Path, name: str, gate: Path) -> RunHandle:
    req, env = request(tmp_path, name, gate)
    return start(req, Settings(kill_grace=1.0), env=env)


def parallel_job(tmp_path: Path, tasks: int, concurrency: int) -> JobResult:
    """A parallel job of the stand-in through the API, its gate open; SUBAGENTS_PI_BIN
    must name ``child(tmp_path)``."""
    from subagents.api import drive, prepare_job

    gate = tmp_path / "gate"
    gate.touch()
    spec: dict[str, Any] = {
        "mode": "parallel",
        "concurrency": concurrency,
        "tasks": [{"task": f"t{i}"} for i in range(tasks)],
    }
    extra_env = {"GATE": str(gate), "ENV_DUMP": os.devnull}
    result = drive(prepare_job(spec, cwd=str(tmp_path), extra_env=extra_env))
    assert result["status"] == "completed", result
    assert [r["finalText"] for r in result["runs"]] == [f"done t{i}" for i in range(tasks)]
    return result


def child_env(tmp_path: Path, name: str) -> dict[str, str]:
    dump = tmp_path / f"{name}.env.json"
    env: dict[str, str] = {}

    def written() -> bool:  # (the child writes it in place: whole once it parses)
        try:
            env.update(json.loads(dump.read_text()))
        except (OSError, ValueError):
            return False
        return True

    assert eventually(written), "the child did not start within 30 s"
    return {k: v for k, v in env.items() if k not in ("ENV_DUMP",)}


def fd_target(pid: int, fd: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def left_by_a_dead_starter(start: str) -> int:
    """The pid of what ``start`` (Python code that binds ``w``, something with ``pid`` and
    ``wait_ready``) started, from a process that then exits at once."""
    code = f"import os; {start}; w.wait_ready(30); print(w.pid, flush=True); os._exit(0)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return int(out.stdout)
