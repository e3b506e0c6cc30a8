"""The fake agent (subagents.testing.fakeagent) as tests drive it: a real supervisor whose
child plays scripted steps, and the environment that points the CLI at it."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.config import Settings
from subagents.runs import RunHandle, RunRequest, start
from subagents.testing.fakeagent import SCRIPT_ENV, write_script


@dataclass
class Fake:
    """A fake pi: ``run(steps)`` starts a real supervisor whose child plays ``steps``."""

    dir: Path
    launcher: Path
    grace: float = 0.25
    kill_grace: float = 1.0
    counter: int = 0

    def env(self, steps: list[dict[str, Any]]) -> dict[str, str]:
        self.counter += 1
        script = write_script(self.dir, steps, name=f"script{self.counter}.json")
        return {SCRIPT_ENV: str(script)}

    def start(
        self, steps: list[dict[str, Any]], timeout: float | None = None, **kw: Any
    ) -> RunHandle:
        env = {**os.environ, "SUBAGENTS_PI_BIN": str(self.launcher)}
        req = RunRequest(
            task="do it",
            backend="pi",
            cwd=str(self.dir),
            env=self.env(steps),
            timeout=timeout,
            **kw,
        )
        return start(req, Settings(grace=self.grace, kill_grace=self.kill_grace), env=env)

    def run(
        self, steps: list[dict[str, Any]], timeout: float | None = None, **kw: Any
    ) -> dict[str, Any]:
        handle = self.start(steps, timeout=timeout, **kw)
        result = handle.wait(timeout=60)
        assert result is not None, "run did not finish within 60 s"
        return result


def fake_env(fake: Fake, steps: list[dict[str, Any]]) -> dict[str, str]:
    return {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}


def script_launcher(fake: Fake, name: str, body: str) -> dict[str, str]:
    """A fake pi from a Python body; ``task`` is the task text (the last argument).
    ``--version`` alone is answered at once, as ``write_launcher``'s is (no version in it):
    a body that waits (a slow pi, a gate) would hold up every run's version check, which
    gives up only after ``runs.versions.VERSION_TIMEOUT`` (10 s)."""
    script = fake.dir / f"{name}.py"
    script.write_text(
        "import json, os, sys, time\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    print('fake-agent')\n"
        "    sys.exit(0)\n"
        "task = sys.argv[-1]\n"
        "def answer(text):\n"
        "    msg = {'role': 'assistant', 'content': [{'type': 'text', 'text': text}], 'stopReason': 'stop', 'model': 'm'}\n"
        "    print(json.dumps({'type': 'message_end', 'message': msg}), flush=True)\n" + body
    )
    launcher = fake.dir / name
    launcher.write_text(f"#!{sys.executable}\nexec(open({str(script)!r}).read())\n")
    launcher.chmod(0o755)
    return {"SUBAGENTS_PI_BIN": str(launcher)}


def bin_env(fake: Fake) -> dict[str, str]:
    return {"SUBAGENTS_PI_BIN": str(fake.launcher)}
