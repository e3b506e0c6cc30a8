"""What `subagents run -q` loads: only what the run uses (its fixed cost is mostly imports).

Observed on the real command (`python -X importtime` lists every module it imported), and
checked against the same command with an agent and a config file, so the test would fail
if a module it says is skipped were never on the run path at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import pistream as pi
from support.cli import cli, imported_modules
from support.fake import Fake

pytestmark = pytest.mark.process

# Read only when the run names an agent (agent files: yaml and their model) or a config
# file exists (tomllib, and pydantic to check it); rich only for a display. The command
# line's job spec is checked without pydantic (click checked its types).
SKIPPED = {"yaml", "subagents.agents", "tomllib", "rich", "platformdirs", "pydantic"}


def imported(fake: Fake, args: list[str], cwd: Path, **settings: str) -> set[str]:
    env = {
        **os.environ,
        "SUBAGENTS_PI_BIN": str(fake.launcher),
        **fake.env(pi.answer("ok")),
        **settings,
        "SUBAGENTS_WARM": "0",  # the command's own imports: in-process (test_warm.py: served)
    }
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "subagents.cli", "run", "-q", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert '"finalText": "ok"' in p.stdout
    return imported_modules(p.stderr)


def test_a_plain_run_skips_agent_files_config_parsing_and_rich(fake: Fake, tmp_path: Path) -> None:
    # Settings from the environment are read without pydantic too (text to a scalar).
    loaded = imported(fake, ["x"], tmp_path, SUBAGENTS_MAX_PARALLEL_TASKS="20")
    assert {
        "subagents.jobs.orchestrator",
        "subagents.core.inputs",
    } <= loaded  # the run's own imports
    assert not SKIPPED & loaded, SKIPPED & loaded


def test_an_agent_and_a_config_file_are_still_read_and_checked(fake: Fake, tmp_path: Path) -> None:
    config = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("concurrency = 3\n")
    loaded = imported(fake, ["--agent", "scout", "x"], tmp_path)
    assert {"yaml", "subagents.agents", "tomllib", "pydantic"} <= loaded
    # The same checks as ever: a bad value in that file still stops the run.
    (config / "config.toml").write_text("concurrency = 0\n")
    p = subprocess.run(
        [sys.executable, "-m", "subagents.cli", "run", "-q", "x"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)},
        cwd=tmp_path,
    )
    assert p.returncode == 2 and "concurrency" in p.stderr, p.stderr


def test_an_agent_file_read_before_is_not_checked_again(fake: Fake, tmp_path: Path) -> None:
    first = imported(fake, ["--agent", "scout", "x"], tmp_path)
    assert {"yaml", "pydantic", "subagents.agents.check"} <= first
    again = imported(fake, ["--agent", "scout", "x"], tmp_path)
    assert "subagents.agents" in again
    assert not {"yaml", "pydantic", "subagents.agents.check"} & again
    # A bad agent file: the same one line and exit 2, checked or kept.
    agents = Path(os.environ["SUBAGENTS_CONFIG_DIR"]) / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "bad.md").write_text("---\nname: bad\ndescription: d\ntimeout: soon\n---\nb\n")
    said = set()
    for _ in range(2):
        p = cli(["run", "-q", "--agent", "bad", "x"], {"SUBAGENTS_PI_BIN": str(fake.launcher)})
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        said.add(p.stderr)
    assert len(said) == 1 and "bad.md: timeout" in said.pop()
