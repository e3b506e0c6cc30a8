"""An agent file is checked (yaml, pydantic) once per content: the same bytes read again give
the kept result, agent or problem, without the check; changed bytes, a new checking code or
a damaged keep are checked again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.agentfiles import agent_env, agent_md, write

from subagents import agents
from subagents.agents import check, discover, get_agent
from subagents.errors import AgentError


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return agent_env(tmp_path, str(tmp_path / "state"))


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files checked (by path), as each check happens."""
    checked: list[str] = []
    real = check.check_agent_text

    def counted(text: str, source: check.Source, path: Path | None = None) -> dict[str, object]:
        checked.append(str(path))
        return real(text, source, path)

    monkeypatch.setattr(check, "check_agent_text", counted)
    return checked


def user_agent(env: dict[str, str], name: str, body: str = "Prompt.", **keys: str) -> Path:
    path = Path(env["SUBAGENTS_CONFIG_DIR"]) / "agents" / f"{name}.md"
    return write(path, agent_md(name, body=body, **keys))


def kept_file(env: dict[str, str]) -> Path:
    return Path(env["SUBAGENTS_HOME"]) / agents.CHECKS_FILE


def test_the_same_bytes_are_not_checked_again(
    env: dict[str, str], tmp_path: Path, checks: list[str]
) -> None:
    mine = user_agent(env, "mine", tools="read, grep", timeout="90", max_turns="5")
    first = discover(tmp_path, env=env)
    assert str(mine) in checks and len(checks) == 6  # the five built-ins and mine
    checks.clear()
    again = discover(tmp_path, env=env)
    assert checks == []
    assert again.agents["mine"] == first.agents["mine"]
    assert set(again.agents) == set(first.agents)
    agent = again.agents["mine"]
    assert (agent.tools, agent.timeout, agent.max_turns, agent.path) == (
        ["read", "grep"],
        90.0,
        5,
        mine,
    )
    assert isinstance(agent.timeout, float) and isinstance(agent.path, Path)


def test_a_changed_file_is_checked_again(
    env: dict[str, str], tmp_path: Path, checks: list[str]
) -> None:
    mine = user_agent(env, "mine", body="old prompt")
    discover(tmp_path, env=env)
    checks.clear()
    user_agent(env, "mine", body="new prompt")
    assert get_agent("mine", tmp_path, env=env).system_prompt == "new prompt"
    assert checks == [str(mine)]
    # Now bad: the same one line as ever, whether checked now or kept from before.
    user_agent(env, "mine", timeout="soon")
    for _ in range(2):
        checks.clear()
        with pytest.raises(AgentError, match=r"could not load .*mine\.md: timeout"):
            get_agent("mine", tmp_path, env=env)
    assert checks == []  # the second time, the problem kept for these bytes


def test_a_damaged_keep_is_ignored_and_written_again(
    env: dict[str, str], tmp_path: Path, checks: list[str]
) -> None:
    user_agent(env, "mine")
    discover(tmp_path, env=env)
    kept = kept_file(env)
    kept.write_text('{"not json')
    checks.clear()
    assert get_agent("mine", tmp_path, env=env).name == "mine"
    assert len(checks) == 6  # every file checked again
    assert "user " + str(Path(env["SUBAGENTS_CONFIG_DIR"]) / "agents" / "mine.md") in json.loads(
        kept.read_text()
    )
    # A kept record of another shape (another version's) is a miss, not an error.
    data = json.loads(kept.read_text())
    for entry in data.values():
        del entry["value"]["description"]
    kept.write_text(json.dumps(data))
    checks.clear()
    assert get_agent("mine", tmp_path, env=env).description == "does things"
    assert len(checks) == 6


def test_what_json_would_change_is_not_kept(
    env: dict[str, str], tmp_path: Path, checks: list[str]
) -> None:
    # A YAML date in the frontmatter's extra keys: no JSON value, so checked each time.
    user_agent(env, "dated", since="2024-01-02")
    assert str(get_agent("dated", tmp_path, env=env).extra["since"]) == "2024-01-02"
    checks.clear()
    get_agent("dated", tmp_path, env=env)
    assert len(checks) == 1 and checks[0].endswith("dated.md")


def test_a_keep_is_read_once_and_written_only_for_new_checks(
    env: dict[str, str], tmp_path: Path
) -> None:
    user_agent(env, "mine")
    discover(tmp_path, env=env)
    kept = kept_file(env)
    before = kept.stat().st_mtime_ns, kept.stat().st_ino
    discover(tmp_path, env=env)
    assert (kept.stat().st_mtime_ns, kept.stat().st_ino) == before


@pytest.mark.process
def test_a_kept_agent_is_read_without_yaml_or_pydantic(env: dict[str, str], tmp_path: Path) -> None:
    user_agent(env, "mine", tools="read")
    code = (
        "import sys; from pathlib import Path; from subagents.agents import get_agent; "
        f"a = get_agent('mine', Path({str(tmp_path)!r})); "
        "print(a.tools, sorted({'yaml', 'pydantic'} & sys.modules.keys()))"
    )

    def run() -> str:
        p = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    assert run() == "['read'] ['pydantic', 'yaml']"  # checked: the first read
    assert run() == "['read'] []"
