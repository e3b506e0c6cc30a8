"""A pi stand-in that shows its environment and waits for a gate, and runs started with it:
for the tests of supervisors started ahead of their run (spares, templates)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from subagents.config import Settings
from subagents.runs import RunHandle, RunRequest, start
from support.checks import eventually


def child(tmp_path: Path) -> Path:
    """A pi stand-in: writes its environment to $ENV_DUMP, waits for $GATE (bounded), answers."""
    path = tmp_path / "env-child"
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


def start_run(tmp_path: Path, name: str, gate: Path) -> RunHandle:
    req = RunRequest(
        task=name,
        backend="pi",
        cwd=str(tmp_path),
        env={"ENV_DUMP": str(tmp_path / f"{name}.env.json"), "GATE": str(gate)},
    )
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(child(tmp_path))}
    return start(req, Settings(kill_grace=1.0), env=env)


def child_env(tmp_path: Path, name: str) -> dict[str, str]:
    dump = tmp_path / f"{name}.env.json"
    assert eventually(dump.exists), "the child did not start within 30 s"
    env: dict[str, str] = json.loads(dump.read_text())
    return {k: v for k, v in env.items() if k not in ("ENV_DUMP",)}


def fd_target(pid: int, fd: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/{fd}")
