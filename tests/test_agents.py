from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.agentfiles import agent_env, agent_md, write

from subagents.agents import AgentDef, builtin_agents, discover, get_agent, parse_agent_file
from subagents.errors import AgentError

BUILTINS = {"general", "scout", "planner", "worker", "reviewer"}
READ_ONLY = {"read", "grep", "find", "ls", "bash"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # (the agent files' checks kept in the test's own state dir)
    return agent_env(tmp_path, os.environ["SUBAGENTS_HOME"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "repo"
    p.mkdir()
    return p


def home(env: dict[str, str]) -> Path:
    return Path(env["HOME"])


def user_dir(env: dict[str, str]) -> Path:
    return Path(env["SUBAGENTS_CONFIG_DIR"]) / "agents"


# --- built-ins ---------------------------------------------------------------


def test_every_builtin_parses_with_substantial_prompt() -> None:
    found = builtin_agents()
    assert found.problems == []
    assert set(found.agents) == BUILTINS
    for agent in found.agents.values():
        assert agent.source == "builtin"
        assert agent.backend is None, agent.name  # built-ins use the default backend
        assert len(agent.description) > 20
        assert len(agent.system_prompt) > 800, agent.name
        assert not agent.system_prompt.startswith("---")
        assert agent.path is not None and agent.path.name == f"{agent.name}.md"


def test_read_only_builtins_have_no_write_tools() -> None:
    agents = builtin_agents().agents
    for name in ("scout", "reviewer", "planner"):
        tools = agents[name].tools
        assert tools, name
        assert set(tools) <= READ_ONLY, (name, tools)
        assert "edit" not in tools and "write" not in tools
    assert "bash" not in (agents["scout"].tools or [])
    assert agents["worker"].tools is None  # default (full) tool set
    assert agents["general"].tools is None


def test_builtin_prompts_say_what_they_are_for() -> None:
    agents = builtin_agents().agents
    assert "never modify" in agents["scout"].system_prompt.lower()
    assert "line" in agents["scout"].system_prompt.lower()
    assert "plan" in agents["planner"].system_prompt.lower()
    assert "test" in agents["worker"].system_prompt.lower()
    assert "critical" in agents["reviewer"].system_prompt.lower()


# --- parsing -----------------------------------------------------------------


def test_full_frontmatter(tmp_path: Path) -> None:
    path = write(
        tmp_path / "file-name-differs.md",
        "---\nname: helper\ndescription: Helps\nbackend: codex\nmodel: gpt-x\nthinking: high\n"
        "tools:\n  - read\n  - bash\ntimeout: 90\n---\n\nYou help.\n\nA lot.\n",
    )
    agent = parse_agent_file(path, "user")
    assert agent == AgentDef(
        name="helper",
        description="Helps",
        backend="codex",
        model="gpt-x",
        thinking="high",
        tools=["read", "bash"],
        timeout=90.0,
        system_prompt="You help.\n\nA lot.",
        source="user",
        path=path,
    )


def test_claude_format_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "code-reviewer.md",
        "---\nname: code-reviewer\ndescription: Expert code review specialist. Use after changes.\n"
        "tools: Read, Grep, Glob\nmodel: inherit\ncolor: purple\n---\nYou are a senior reviewer.\n",
    )
    agent = parse_agent_file(path, "user")
    assert agent.name == "code-reviewer"
    assert agent.tools == ["Read", "Grep", "Glob"]
    assert agent.extra == {"color": "purple"}
    assert agent.model is None  # "inherit": the default model
    assert agent.system_prompt == "You are a senior reviewer."


def test_pi_format_file_with_thinking_off(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.md",
        "---\nname: s\ndescription: d\ntools: read,grep , find\nthinking: off\n"
        "model: claude-haiku-4-5\n---\nbody\n",
    )
    agent = parse_agent_file(path, "project")
    assert agent.tools == ["read", "grep", "find"]
    assert agent.thinking == "off"  # YAML 1.1 reads bare off as False
    assert agent.source == "project"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("just a prompt\n", "no YAML frontmatter"),
        ("---\nname: x\ndescription: y\nno closing line\n", "no YAML frontmatter"),
        ("---\nname: x\ndescription: a: b\n---\nbody\n", "bad YAML frontmatter at line 3"),
        ("---\n- a\n- b\n---\nbody\n", "frontmatter must be a mapping"),
        ("---\ndescription: y\n---\nbody\n", "missing required field 'name'"),
        ("---\nname: x\n---\nbody\n", "missing required field 'description'"),
        ("---\nname: x\ndescription: ''\n---\nbody\n", "description"),
        ("---\nname: x\ndescription: y\ntimeout: soon\n---\nb\n", "timeout"),
        ("---\nname: x\ndescription: y\ntools: 5\n---\nb\n", "tools"),
        ("---\nname: x\ndescription: y\ntools: [read, 3]\n---\nb\n", "tools"),
        ("---\nname: {a: 1}\ndescription: y\n---\nb\n", "name"),
    ],
)
def test_broken_files_raise_with_path(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path / "bad.md", text)
    with pytest.raises(AgentError) as info:
        parse_agent_file(path, "user")
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert problem in message
    assert "\n" not in message


# --- discovery ---------------------------------------------------------------


def test_user_overrides_builtin_and_formats_layer(env: dict[str, str], project: Path) -> None:
    write(home(env) / ".pi/agent/agents/scout.md", agent_md("scout", body="pi scout"))
    write(home(env) / ".claude/agents/rev.md", agent_md("reviewer", body="claude reviewer"))
    write(home(env) / ".claude/agents/mine.md", agent_md("mine", body="claude mine"))
    write(user_dir(env) / "x.md", agent_md("mine", body="our mine"))
    found = discover(project, env=env)
    assert found.problems == []
    assert found.agents["scout"].system_prompt == "pi scout"
    assert found.agents["scout"].source == "user"
    assert found.agents["reviewer"].system_prompt == "claude reviewer"
    # Our own user dir beats the pi/Claude dirs; the name comes from the frontmatter.
    assert found.agents["mine"].system_prompt == "our mine"
    assert found.agents["mine"].path == user_dir(env) / "x.md"
    assert found.agents["worker"].source == "builtin"


def test_project_agents_only_with_scope_both(env: dict[str, str], project: Path) -> None:
    write(user_dir(env) / "scout.md", agent_md("scout", body="user scout"))
    write(project / ".subagents/agents/scout.md", agent_md("scout", body="project scout"))
    write(project / ".claude/agents/local.md", agent_md("local", body="claude local"))
    write(project / ".pi/agents/local.md", agent_md("local", body="pi local"))
    user_only = discover(project, "user", env)
    assert user_only.agents["scout"].system_prompt == "user scout"
    assert "local" not in user_only.agents

    both = discover(project, "both", env)
    assert both.agents["scout"].system_prompt == "project scout"
    assert both.agents["scout"].source == "project"
    assert both.agents["scout"].path == (project / ".subagents/agents/scout.md").resolve()
    assert both.agents["local"].system_prompt == "pi local"  # .pi beats .claude


def test_project_dir_found_from_subdirectory(env: dict[str, str], project: Path) -> None:
    write(project / ".pi/agents/a.md", agent_md("proj-a"))
    sub = project / "src" / "pkg"
    sub.mkdir(parents=True)
    assert "proj-a" in discover(sub, "both", env).agents


def test_home_claude_dir_is_not_a_project(env: dict[str, str]) -> None:
    # ~/.claude/agents is user-level; from a dir under HOME it must not turn "project".
    write(home(env) / ".claude/agents/c.md", agent_md("c"))
    work = home(env) / "code" / "thing"
    work.mkdir(parents=True)
    agent = discover(work, "both", env).agents["c"]
    assert agent.source == "user"


def test_broken_files_reported_good_ones_load(env: dict[str, str], project: Path) -> None:
    bad_yaml = write(user_dir(env) / "a-bad.md", "---\nname: [oops\n---\nbody\n")
    no_front = write(home(env) / ".claude/agents/plain.md", "Just text.\n")
    no_desc = write(project / ".subagents/agents/nodesc.md", "---\nname: nodesc\n---\nb\n")
    write(user_dir(env) / "b-good.md", agent_md("good"))
    write(project / ".subagents/agents/ok.md", agent_md("proj-ok"))
    write(user_dir(env) / "notes.txt", "ignored: not markdown")
    found = discover(project, "both", env)
    assert {"good", "proj-ok"} <= set(found.agents)
    assert set(found.agents) >= BUILTINS
    assert len(found.problems) == 3, found.problems
    by_path = {p.split(": ", 1)[0]: p for p in found.problems}
    assert str(bad_yaml) in by_path and "bad YAML" in by_path[str(bad_yaml)]
    assert str(no_front) in by_path and "frontmatter" in by_path[str(no_front)]
    nodesc = str(no_desc.resolve())
    assert nodesc in by_path and "description" in by_path[nodesc]


def test_duplicate_name_in_one_dir_is_a_problem(env: dict[str, str], project: Path) -> None:
    write(user_dir(env) / "a.md", agent_md("twin", body="first"))
    second = write(user_dir(env) / "b.md", agent_md("twin", body="second"))
    found = discover(project, env=env)
    assert found.agents["twin"].system_prompt == "first"
    assert any(p.startswith(f"{second}: duplicate agent name 'twin'") for p in found.problems)


def test_invalid_scope(env: dict[str, str], project: Path) -> None:
    with pytest.raises(AgentError, match="invalid agent scope"):
        discover(project, "project", env)


# --- get_agent ---------------------------------------------------------------


def test_get_agent(env: dict[str, str], project: Path) -> None:
    write(user_dir(env) / "s.md", agent_md("scout", body="mine"))
    assert get_agent("scout", project, env=env).system_prompt == "mine"
    assert get_agent("planner", project, env=env).source == "builtin"


def test_unknown_agent_lists_known(env: dict[str, str], project: Path) -> None:
    write(user_dir(env) / "z.md", agent_md("zeta"))
    with pytest.raises(AgentError) as info:
        get_agent("nope", project, env=env)
    assert str(info.value) == (
        "unknown agent 'nope' (known: general, planner, reviewer, scout, worker, zeta)"
    )


def test_project_only_agent_with_user_scope_says_so(env: dict[str, str], project: Path) -> None:
    path = write(project / ".claude/agents/deployer.md", agent_md("deployer"))
    with pytest.raises(AgentError) as info:
        get_agent("deployer", project, "user", env)
    message = str(info.value)
    assert str(path.resolve()) in message
    assert "project-local agent" in message
    assert "--agent-scope both" in message
    assert get_agent("deployer", project, "both", env).source == "project"


def test_unknown_agent_mentions_its_broken_file(env: dict[str, str], project: Path) -> None:
    write(user_dir(env) / "helper.md", "---\nname: helper\n---\nbody\n")
    with pytest.raises(AgentError) as info:
        get_agent("helper", project, env=env)
    message = str(info.value)
    assert message.startswith("unknown agent 'helper' (known: general,")
    assert "helper.md: missing required field 'description'" in message
