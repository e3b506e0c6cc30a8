"""`subagents doctor`: binaries found on a temp PATH, versions, credentials, install hints."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

import subagents.runs.versions as versions
from subagents.cli.doctor import BackendCheck, check_backend, check_backends, render_text


def fake_cli(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty HOME and a PATH holding only a fake `codex`."""
    home = tmp_path / "home"
    home.mkdir()
    bindir = tmp_path / "bin"
    fake_cli(bindir, "codex", 'echo "codex-cli 9.9.9"; echo "second line"')
    return {"PATH": str(bindir), "HOME": str(home)}


def by_name(checks: list[BackendCheck]) -> dict[str, BackendCheck]:
    return {c.name: c for c in checks}


@pytest.mark.process
def test_found_with_version_but_no_credentials(world: dict[str, str], tmp_path: Path) -> None:
    c = check_backend("codex", world)
    assert c.binary == str(tmp_path / "bin" / "codex")
    assert c.version == "codex-cli 9.9.9"
    assert not c.usable
    assert "OPENAI_API_KEY" in c.reason and c.install_hint is None


@pytest.mark.process
def test_credentials_from_env_name_only(world: dict[str, str]) -> None:
    c = check_backend("codex", {**world, "OPENAI_API_KEY": "sk-secret-value"})
    assert c.usable and c.reason == "OPENAI_API_KEY is set"
    assert "sk-secret-value" not in render_text([c])


@pytest.mark.process
def test_credentials_from_codex_home(world: dict[str, str], tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "auth.json").write_text("{}")
    c = check_backend("codex", {**world, "CODEX_HOME": str(codex_home)})
    assert c.usable and c.reason.startswith("logged in")


def test_missing_binary_has_an_install_hint(world: dict[str, str]) -> None:
    c = check_backend("claude", world)
    assert c.binary is None and c.version is None and not c.usable
    assert c.reason == "'claude' not found on PATH"
    assert c.install_hint == "npm install -g @anthropic-ai/claude-code"


@pytest.mark.process
def test_binary_override_env_var(world: dict[str, str], tmp_path: Path) -> None:
    gem = fake_cli(tmp_path / "elsewhere", "my-gemini", "echo 0.61.0")
    c = check_backend("gemini", {**world, "SUBAGENTS_GEMINI_BIN": str(gem), "GEMINI_API_KEY": "x"})
    assert (c.binary, c.version, c.usable) == (str(gem), "0.61.0", True)
    bad = check_backend("gemini", {**world, "SUBAGENTS_GEMINI_BIN": str(tmp_path / "nope")})
    assert bad.binary is None and "SUBAGENTS_GEMINI_BIN" in bad.reason


@pytest.mark.process
def test_version_failure_and_timeout(
    world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(Path(world["PATH"]), "opencode", 'echo "native binary not installed" >&2; exit 3')
    c = check_backend("opencode", world)
    assert c.binary is not None and c.version is None and not c.usable
    assert c.reason == "`opencode --version` failed (exit 3): native binary not installed"
    # A CLI that hangs (even through a child holding the pipe) is cut off in time.
    sleep = shutil.which("sleep")  # the temp PATH holds only the fakes
    fake_cli(Path(world["PATH"]), "pi", f"{sleep} 30 & {sleep} 30")
    monkeypatch.setattr(versions, "VERSION_TIMEOUT", 0.5)
    t0 = time.monotonic()
    c = check_backend("pi", world)
    assert time.monotonic() - t0 < 5
    assert c.version is None and "did not answer within 0.5s" in c.reason


@pytest.mark.process
def test_pi_credentials_from_agent_dir(world: dict[str, str], tmp_path: Path) -> None:
    fake_cli(Path(world["PATH"]), "pi", "echo 0.73.1")
    assert not check_backend("pi", world).usable
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    (agent_dir / "models.json").write_text("{}")
    c = check_backend("pi", {**world, "PI_CODING_AGENT_DIR": str(agent_dir)})
    assert c.usable and "models.json" in c.reason


@pytest.mark.process
def test_check_backends_covers_all_and_renders_a_table(world: dict[str, str]) -> None:
    checks = check_backends(world)
    names = [c.name for c in checks]
    assert names == sorted(names) and {"pi", "claude", "codex", "gemini", "opencode"} <= set(names)
    found = by_name(checks)
    assert found["codex"].version == "codex-cli 9.9.9"
    assert found["claude"].binary is None
    text = render_text(checks)
    lines = text.splitlines()
    assert lines[0].split() == ["BACKEND", "STATUS", "VERSION", "BINARY", "NOTE"]
    rows = {line.split()[0]: line for line in lines[1 : 1 + len(checks)]}
    # Aligned: every row's status column starts where the header's does.
    col = lines[0].index("STATUS")
    assert all(row[col - 2 : col] == "  " and row[col] != " " for row in rows.values())
    assert rows["codex"].split()[1:3] == ["not", "ready"]
    assert rows["claude"].split()[1] == "missing"
    assert "To install:" in lines
    assert "  claude: npm install -g @anthropic-ai/claude-code" in lines


# How pi 0.87 dies on Node 20: a stack whose first line is a file path.
CRASH = 'console.error("file:///x/cli.js:2"); console.error("SyntaxError: nope"); process.exit(1)'


def npm_cli(tmp_path: Path, engines: str, body: str = CRASH) -> Path:
    """An npm-style package whose bin runs on `node` from PATH and wants ``engines``."""
    pkg = tmp_path / "node_modules" / "tool"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "tool", "engines": {"node": engines}}))
    script = pkg / "dist" / "cli.js"
    script.write_text("#!/usr/bin/env node\n" + body + "\n")
    script.chmod(0o755)
    bindir = tmp_path / "node_modules" / ".bin"
    bindir.mkdir()
    (bindir / "pi").symlink_to(script)
    return bindir / "pi"


NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


@pytest.mark.process
@needs_node
def test_a_node_too_old_for_the_cli_is_named_with_the_fix(
    world: dict[str, str], tmp_path: Path
) -> None:
    pi = npm_cli(tmp_path, ">=999.0.0")
    env = {**world, "PATH": str(Path(str(NODE)).parent), "SUBAGENTS_PI_BIN": str(pi)}
    c = check_backend("pi", env)
    assert not c.usable
    assert "needs Node >= 999.0.0, but `node` on PATH is v" in c.reason
    assert "./scripts/setup puts Node 22 in .tools/node_modules/.bin" in c.reason


@pytest.mark.process
@needs_node
def test_a_failing_node_cli_is_reported_by_its_error_line(
    world: dict[str, str], tmp_path: Path
) -> None:
    pi = npm_cli(tmp_path, ">=1.0.0")  # the Node is new enough: something else broke
    env = {**world, "PATH": str(Path(str(NODE)).parent), "SUBAGENTS_PI_BIN": str(pi)}
    c = check_backend("pi", env)
    assert not c.usable and c.reason == "`pi --version` failed (exit 1): SyntaxError: nope"


@pytest.mark.process
def test_each_version_against_the_tested_ones_and_what_its_runs_can_do(
    world: dict[str, str], tmp_path: Path
) -> None:
    """pi before 0.80.4 takes no messages and its budgets abort; 0.87.1 and 1.6.0 take both; a
    version outside the tested ones says so; the table names what each installed one does."""
    checks = {}
    for version in ("0.60.0", "0.73.1", "0.87.1", "0.99.0", "1.6.0", "1.7.0"):
        binary = fake_cli(tmp_path / f"pi-{version}", "pi", f"echo {version}")
        checks[version] = check_backend("pi", {**world, "SUBAGENTS_PI_BIN": str(binary)})
    assert {v: c.tested for v, c in checks.items()} == {
        "0.60.0": "older than tested (0.73.1)",
        "0.73.1": "tested",
        "0.87.1": "tested",
        "0.99.0": "in the tested range",
        "1.6.0": "tested",
        "1.7.0": "newer than tested (1.6.0)",
    }
    old, new, pinned = (checks[v].supports for v in ("0.73.1", "0.87.1", "1.6.0"))
    assert old is not None and new is not None and pinned is not None
    assert (old["steer"], old["follow-up"], old["budgets"]) == ("no", "no", "abort-only")
    assert (new["steer"], new["follow-up"], new["budgets"]) == ("yes", "yes", "graceful")
    assert pinned == new
    gemini = fake_cli(tmp_path / "gem", "gemini", "echo 0.61.0")
    g = check_backend("gemini", {**world, "SUBAGENTS_GEMINI_BIN": str(gemini)})
    assert g.supports is not None and g.supports["follow-up"] == "as a continuation"
    assert "no cost limit" in g.supports["budgets"]
    text = render_text([checks["0.73.1"], checks["0.87.1"], g])
    table = text.split("What runs of each can do (docs/backends.md):\n")[1].splitlines()
    assert table[0].split() == ["BACKEND", "VERSION", "CONTINUE", "STEER", "FOLLOW-UP", "BUDGETS"]
    assert table[1].split()[:5] == ["pi", "0.73.1", "(tested)", "yes", "no"]
    assert table[2].split()[:6] == ["pi", "0.87.1", "(tested)", "yes", "yes", "yes"]
    assert table[3].split()[:4] == ["gemini", "0.61.0", "(tested)", "yes"]
