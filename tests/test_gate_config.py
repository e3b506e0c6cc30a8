"""Gates from config (docs/gates.md): ``verify``, ``review``, ``verify_timeout`` and
``verify_attempts`` as settings, each a default for the gate's field that a step or its agent
does not give; ``verify`` from the user's file or the environment only. In process: config
loading and planning (no run starts)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from subagents.config import Settings, load_settings
from subagents.errors import ConfigError, PlanError
from subagents.jobs.mapinput import Row
from subagents.jobs.mapplan import plan_map
from subagents.jobs.planning import plan
from subagents.jobs.spec import JobSpec, Step
from subagents.types import JsonObject


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A world with a pi (any executable will do: nothing runs) and an empty config dir."""
    config = tmp_path / "config"
    (config / "agents").mkdir(parents=True)
    return {
        "HOME": str(tmp_path),
        "SUBAGENTS_CONFIG_DIR": str(config),
        "SUBAGENTS_PI_BIN": sys.executable,
        "PATH": "/usr/bin:/bin",
    }


def settings(**values: object) -> Settings:
    return Settings(bins={"pi": sys.executable}, **values)  # type: ignore[arg-type]


def gates(spec: JobSpec, s: Settings, tmp_path: Path, env: dict[str, str]) -> list[JsonObject]:
    return [r.gate or {} for r in plan(spec, s, cwd=tmp_path, env=env).requests]


def test_the_configs_gate_is_every_runs_unless_its_step_gives_its_own(
    tmp_path: Path, env: dict[str, str]
) -> None:
    s = settings(verify="make check", verify_timeout=30.0, verify_attempts=3)
    spec = JobSpec(
        mode="parallel",
        steps=[Step(task="a"), Step(task="b", verify="pytest -q", verify_attempts=1)],
    )
    first, second = gates(spec, s, tmp_path, env)
    assert (first["verify"], first["timeout"], first["attempts"]) == ("make check", 30.0, 3)
    assert (second["verify"], second["timeout"], second["attempts"]) == ("pytest -q", 30.0, 1)
    # Without the config's, the same plain step has no gate.
    assert gates(JobSpec(mode="single", steps=[Step(task="a")]), settings(), tmp_path, env) == [{}]


def test_an_agents_gate_comes_before_the_configs(tmp_path: Path, env: dict[str, str]) -> None:
    agents = Path(env["SUBAGENTS_CONFIG_DIR"]) / "agents"
    (agents / "checked.md").write_text(
        "---\nname: checked\ndescription: checked work\nbackend: pi\nverify: ruff check\n---\nWork.\n"
    )
    s = settings(verify="make check", review="pi")
    [gate] = gates(
        JobSpec(mode="single", steps=[Step(task="a", agent="checked")]), s, tmp_path, env
    )
    # Each field on its own: the agent's command, the config's reviewer.
    assert (gate["verify"], gate["reviewer"]) == ("ruff check", "pi")


def test_the_configs_reviewer_and_a_councils_judge_are_not_gated(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # A reviewer given the config's reviewer would be reviewed by another, without end.
    s = settings(verify="make check", review="pi")
    [gate] = gates(JobSpec(mode="single", steps=[Step(task="a")]), s, tmp_path, env)
    reviewer = gate["review"]
    assert isinstance(reviewer, dict) and reviewer.get("gate") is None
    council = JobSpec(mode="council", steps=[Step(task="a"), Step(task="b")], judge="pi")
    *members, judge = gates(council, s, tmp_path, env)
    assert [m["verify"] for m in members] == ["make check", "make check"] and judge == {}


def test_attempts_alone_tune_the_configs_gate_and_are_refused_with_none(
    tmp_path: Path, env: dict[str, str]
) -> None:
    step = Step(task="a", verify_attempts=4)
    [gate] = gates(JobSpec(mode="single", steps=[step]), settings(verify="true"), tmp_path, env)
    assert (gate["verify"], gate["attempts"]) == ("true", 4)
    with pytest.raises(PlanError) as info:
        plan(JobSpec(mode="single", steps=[step]), settings(), cwd=tmp_path, env=env)
    assert "a gate's timeout and attempts need its command or its reviewer" in str(info.value)


def test_a_map_checks_the_configs_command_as_a_row_template(
    tmp_path: Path, env: dict[str, str]
) -> None:
    rows = [Row(0, "1", {"path": "a.py"}), Row(1, "2", {"path": "b.py"})]
    spec = JobSpec(mode="map", steps=[Step(task="fix {path}")], input="x.csv")
    job, _ = plan_map(spec, rows, settings(verify="ruff check {path}"), cwd=tmp_path, env=env)
    assert job.requests[0].gate is not None
    assert job.requests[0].gate["verify"] == "ruff check {path}"  # each row fills it in
    with pytest.raises(PlanError) as info:
        plan_map(spec, rows, settings(verify="ruff check {file}"), cwd=tmp_path, env=env)
    assert "verify: {file}: the input has no field 'file' (row 1 has: path)" in str(info.value)


# ---- config loading ---------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_gate_settings_from_the_user_file_and_the_environment(
    tmp_path: Path, env: dict[str, str]
) -> None:
    write(
        Path(env["SUBAGENTS_CONFIG_DIR"]) / "config.toml",
        'verify = "make check"\nreview = "claude"\nverify_timeout = 90\nverify_attempts = 3\n',
    )
    s = load_settings(tmp_path, env)
    assert (s.verify, s.review, s.verify_timeout, s.verify_attempts) == (
        "make check",
        "claude",
        90,
        3,
    )
    # The environment beats the file; "off" turns the command off for this shell.
    s = load_settings(tmp_path, {**env, "SUBAGENTS_VERIFY": "off", "SUBAGENTS_REVIEW": "pi"})
    assert (s.verify, s.review) == (None, "pi")


def test_a_project_file_may_tune_gates_but_not_name_a_command(
    tmp_path: Path, env: dict[str, str]
) -> None:
    project = tmp_path / "repo"
    path = write(project / ".subagents/config.toml", 'review = "pi"\nverify_attempts = 1\n')
    s = load_settings(project, env)
    assert (s.review, s.verify_attempts) == ("pi", 1)
    path.write_text('verify = "./evil"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path.resolve()}: verify: not allowed in a project config")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('verify = "echo \'x"\n', "verify: cannot split the command"),
        ('verify = "  "\n', "verify: must not be empty"),
        ('review = ""\n', "review: must not be empty"),
        ("verify_attempts = 0\n", "verify_attempts: must be 1 or more"),
        ("verify_timeout = -1\n", "verify_timeout: must be a positive number of seconds"),
    ],
)
def test_a_bad_gate_setting_is_one_line_naming_the_file_and_field(
    tmp_path: Path, env: dict[str, str], body: str, problem: str
) -> None:
    path = write(Path(env["SUBAGENTS_CONFIG_DIR"]) / "config.toml", body)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: {problem}"), message
