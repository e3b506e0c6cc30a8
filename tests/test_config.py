from __future__ import annotations

from pathlib import Path

import pytest

from subagents import config
from subagents.config import (
    Settings,
    find_project_config,
    load_settings,
    state_home,
    user_config_dir,
)
from subagents.errors import ConfigError


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(user config dir, project dir, env) with a temp HOME and nothing configured."""
    home = tmp_path / "home"
    home.mkdir()
    user = tmp_path / "userconf"
    user.mkdir()
    project = tmp_path / "proj"
    (project / ".subagents").mkdir(parents=True)
    env = {
        "HOME": str(home),
        "SUBAGENTS_CONFIG_DIR": str(user),
        "SUBAGENTS_HOME": str(tmp_path / "state"),  # where checked files are kept
    }
    return user, project, env


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    _, project, env = dirs
    s = load_settings(project, env)
    assert s == Settings()
    assert (s.default_backend, s.runner, s.concurrency, s.max_parallel_tasks) == (
        "pi",
        "process",
        4,
        8,
    )
    assert (s.max_spawns_per_job, s.timeout, s.grace, s.kill_grace) == (32, None, 0.25, 2.0)
    assert (s.max_depth, s.agent_scope, s.bins, s.hooks, s.notify_desktop) == (
        2,
        "user",
        {},
        [],
        False,
    )
    assert s.default_agent is None


def test_precedence_defaults_user_project_env(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    write(
        user / "config.toml",
        'default_backend = "claude"\nconcurrency = 2\ngrace = 1.5\nmax_depth = 5\n'
        'runner = "tmux"\n[bins]\npi = "/user/pi"\nclaude = "/user/claude"\n',
    )
    write(project / ".subagents/config.toml", "concurrency = 3\ngrace = 0.5\ntimeout = 60\n")
    env = {**env, "SUBAGENTS_GRACE": "0.1", "SUBAGENTS_PI_BIN": "/env/pi"}
    s = load_settings(project, env)
    assert s.default_backend == "claude"  # user only
    assert s.runner == "tmux"  # user only
    assert s.max_depth == 5  # user only
    assert s.concurrency == 3  # project beats user
    assert s.timeout == 60.0  # project only
    assert s.grace == 0.1  # env beats project and user
    assert s.kill_grace == 2.0  # default
    assert s.bins == {"pi": "/env/pi", "claude": "/user/claude"}  # merged per backend


def test_project_file_found_in_nearest_ancestor(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    _, project, env = dirs
    write(project / ".subagents/config.toml", "concurrency = 7\n")
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    assert find_project_config(deep) == (project / ".subagents/config.toml").resolve()
    assert load_settings(deep, env).concurrency == 7
    # A nearer project file wins over the farther one.
    write(project / "a" / ".subagents/config.toml", "concurrency = 9\n")
    assert load_settings(deep, env).concurrency == 9


def test_env_overrides_all_fields(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    _, project, env = dirs
    env = {
        **env,
        "SUBAGENTS_DEFAULT_BACKEND": "codex",
        "SUBAGENTS_DEFAULT_AGENT": "scout",
        "SUBAGENTS_RUNNER": "tmux",
        "SUBAGENTS_CONCURRENCY": "6",
        "SUBAGENTS_MAX_PARALLEL_TASKS": "12",
        "SUBAGENTS_MAX_SPAWNS_PER_JOB": "40",
        "SUBAGENTS_TIMEOUT": "30.5",
        "SUBAGENTS_GRACE": "0.5",
        "SUBAGENTS_KILL_GRACE": "4",
        "SUBAGENTS_MAX_DEPTH": "1",
        "SUBAGENTS_AGENT_SCOPE": "both",
        "SUBAGENTS_NOTIFY_DESKTOP": "true",
        "SUBAGENTS_CLAUDE_BIN": "/opt/claude",
        "SUBAGENTS_OPENCODE_BIN": "/opt/opencode",
        "SUBAGENTS_DEPTH": "1",  # runtime variable, not a setting: ignored
        "SUBAGENTS_HOME": "/tmp/x",  # likewise
    }
    s = load_settings(project, env)
    assert s.default_backend == "codex"
    assert s.default_agent == "scout"
    assert s.runner == "tmux"
    assert (s.concurrency, s.max_parallel_tasks, s.max_spawns_per_job) == (6, 12, 40)
    assert (s.timeout, s.grace, s.kill_grace, s.max_depth) == (30.5, 0.5, 4.0, 1)
    assert s.agent_scope == "both"
    assert s.notify_desktop is True
    assert s.bins == {"claude": "/opt/claude", "opencode": "/opt/opencode"}


def test_empty_env_var_is_unset_and_timeout_none(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    write(user / "config.toml", "concurrency = 2\ntimeout = 10\n")
    s = load_settings(project, {**env, "SUBAGENTS_CONCURRENCY": "", "SUBAGENTS_TIMEOUT": "none"})
    assert s.concurrency == 2
    assert s.timeout is None


def test_timeout_zero_in_project_disables_user_timeout(
    dirs: tuple[Path, Path, dict[str, str]],
) -> None:
    user, project, env = dirs
    write(user / "config.toml", "timeout = 10\n")
    write(project / ".subagents/config.toml", "timeout = 0\n")
    assert load_settings(project, env).timeout is None


def test_hooks_from_user_file(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    write(
        user / "config.toml",
        '[[hooks]]\non = ["complete", "error"]\ncommand = ["notify-send", "done"]\n'
        '[[hooks]]\non = ["error"]\ncommand = ["true"]\ntimeout = 3\n',
    )
    s = load_settings(project, env)
    assert [h.on for h in s.hooks] == [["complete", "error"], ["error"]]
    assert s.hooks[0].command == ["notify-send", "done"]
    assert (s.hooks[0].timeout, s.hooks[1].timeout) == (10.0, 3.0)


def assert_one_line(message: str, *parts: str) -> None:
    assert "\n" not in message
    for part in parts:
        assert part in message, (part, message)


def test_bad_field_names_file_and_field(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    _, project, env = dirs
    path = write(project / ".subagents/config.toml", 'concurrency = "lots"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    message = str(info.value)
    assert message.startswith(f"{path.resolve()}: concurrency: ")
    assert_one_line(message, "valid integer")


def test_wrong_toml_type_is_rejected_not_coerced(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    path = write(user / "config.toml", "notify_desktop = 1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), f"{path}: notify_desktop: ")


def test_bad_toml_names_file_and_line(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    path = write(user / "config.toml", 'runner = "tmux"\nconcurrency = = 3\n')
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), f"{path}: invalid TOML", "line 2")


def test_unterminated_toml_still_names_a_line(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    path = write(user / "config.toml", "a = [\n1,\n")
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), f"{path}: invalid TOML", "line 3")


def test_unknown_key_rejected(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    path = write(user / "config.toml", "concurency = 3\n")
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), f"{path}: concurency: unknown setting", "concurrency")


def test_unknown_key_in_hook_rejected(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    user, project, env = dirs
    write(user / "config.toml", '[[hooks]]\non = ["complete"]\ncommand = ["x"]\nshell = true\n')
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), "hooks.0.shell: unknown key")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('runner = "screen"\n', "runner"),
        ("concurrency = 0\n", "concurrency"),
        ("timeout = -5\n", "timeout"),
        ("grace = -1\n", "grace"),
    ],
)
def test_invalid_values(dirs: tuple[Path, Path, dict[str, str]], body: str, field: str) -> None:
    user, project, env = dirs
    path = write(user / "config.toml", body)
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), f"{path}: {field}: ")


def test_bad_env_value_names_variable(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    _, project, env = dirs
    with pytest.raises(ConfigError) as info:
        load_settings(project, {**env, "SUBAGENTS_MAX_DEPTH": "deep"})
    assert_one_line(str(info.value), "SUBAGENTS_MAX_DEPTH: ", "must be an integer, not 'deep'")
    with pytest.raises(ConfigError) as info:
        load_settings(project, {**env, "SUBAGENTS_AGENT_SCOPE": "everything"})
    assert_one_line(str(info.value), "SUBAGENTS_AGENT_SCOPE: ")


@pytest.mark.parametrize(
    "body",
    [
        'agent_scope = "both"\n',
        '[bins]\npi = "./evil"\n',
        '[[hooks]]\non = ["complete"]\ncommand = ["x"]\n',
    ],
)
def test_project_file_cannot_grant_itself_trust(
    dirs: tuple[Path, Path, dict[str, str]], body: str
) -> None:
    _, project, env = dirs
    path = write(project / ".subagents/config.toml", body)
    key = body.split()[0].strip("[]")
    with pytest.raises(ConfigError) as info:
        load_settings(project, env)
    assert_one_line(str(info.value), f"{path.resolve()}: {key}: not allowed in a project config")


def test_user_config_dir_and_state_home(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert user_config_dir({**env, "SUBAGENTS_CONFIG_DIR": str(tmp_path / "c")}) == tmp_path / "c"
    assert state_home({**env, "SUBAGENTS_HOME": str(tmp_path / "s")}) == (tmp_path / "s").resolve()
    # XDG-style fallback from the passed HOME, where the platform uses XDG.
    import sys

    if sys.platform.startswith("linux"):
        assert user_config_dir(env) == tmp_path / ".config" / "subagents"
        assert user_config_dir({**env, "XDG_CONFIG_HOME": str(tmp_path / "x")}) == (
            tmp_path / "x" / "subagents"
        )


def test_user_file_from_home_when_no_override(tmp_path: Path) -> None:
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("XDG layout")
    write(tmp_path / ".config/subagents/config.toml", "max_depth = 4\n")
    project = tmp_path / "p"
    project.mkdir()
    assert load_settings(project, {"HOME": str(tmp_path)}).max_depth == 4


def test_every_scalar_setting_has_its_variable() -> None:
    """The environment's table comes from the dataclass: a new setting gets its
    SUBAGENTS_<NAME> variable without a list to keep, and its type must convert from text."""
    from dataclasses import fields

    from subagents.config import ENV_SETTINGS, _from_text

    names = {f.name for f in fields(Settings)} - {"bins", "hooks", "acp"}
    assert set(ENV_SETTINGS) == {f"SUBAGENTS_{n.upper()}" for n in names}
    assert set(ENV_SETTINGS.values()) == names
    defaults = Settings()
    for name in names:
        value = getattr(defaults, name)
        text = "none" if value is None else str(value).lower()
        assert _from_text(name, text) == value, name  # converts, by the field's type


@pytest.mark.parametrize(
    ("var", "text", "setting", "value"),
    [
        ("SUBAGENTS_MAX_DEPTH", "3", "max_depth", 3),  # int
        ("SUBAGENTS_GRACE", "1e-1", "grace", 0.1),  # float
        ("SUBAGENTS_KEEP_WORKTREE", "Yes", "keep_worktree", True),  # bool
        ("SUBAGENTS_COPILOT_AGENT_INITIATOR", "off", "copilot_agent_initiator", False),
        ("SUBAGENTS_ON_STALL", "abort", "on_stall", "abort"),  # Literal
        ("SUBAGENTS_TOOL_TIMEOUT", "12", "tool_timeout", 12.0),  # float | None
        ("SUBAGENTS_STALL_TIMEOUT", "null", "stall_timeout", None),
        ("SUBAGENTS_RAY_ADDRESS", "10.0.0.5:6379", "ray_address", "10.0.0.5:6379"),  # str | None
        ("SUBAGENTS_DEFAULT_AGENT", "off", "default_agent", None),
    ],
)
def test_env_values_convert_by_the_fields_type(
    dirs: tuple[Path, Path, dict[str, str]], var: str, text: str, setting: str, value: object
) -> None:
    _, project, env = dirs
    assert getattr(load_settings(project, {**env, var: text}), setting) == value


@pytest.mark.parametrize(
    ("var", "text", "problem"),
    [
        ("SUBAGENTS_CONCURRENCY", "2.5", "must be an integer, not '2.5'"),
        ("SUBAGENTS_TIMEOUT", "soon", "must be a number, not 'soon'"),
        ("SUBAGENTS_NOTIFY_DESKTOP", "maybe", "must be true or false, not 'maybe'"),
        ("SUBAGENTS_RUNNER", "screen", "must be 'process' or 'tmux', not 'screen'"),
        ("SUBAGENTS_GRACE", "none", "must be a number, not 'none'"),  # not optional
    ],
)
def test_env_values_of_the_wrong_type_name_the_variable(
    dirs: tuple[Path, Path, dict[str, str]], var: str, text: str, problem: str
) -> None:
    _, project, env = dirs
    with pytest.raises(ConfigError) as info:
        load_settings(project, {**env, var: text})
    assert str(info.value) == f"environment: {var}: {problem}"


def test_a_type_the_environment_cannot_give_is_refused_loudly() -> None:
    from subagents.config import _convert

    with pytest.raises(TypeError, match="no conversion"):
        _convert("x", list[str], "a")
    with pytest.raises(TypeError, match="no conversion"):
        _convert("x", int | str, "a")


def test_settings_are_frozen_and_an_override_is_checked_again() -> None:
    from dataclasses import FrozenInstanceError, replace

    from subagents.errors import FieldProblem

    s = Settings()
    with pytest.raises(FrozenInstanceError):
        s.runner = "tmux"  # type: ignore[misc]
    assert replace(s, runner="tmux", timeout=0).timeout is None
    with pytest.raises(FieldProblem, match="'local' or 'ray'"):
        replace(s, executor="kubernetes")  # type: ignore[arg-type]


def test_a_jobs_record_of_its_settings_holds_no_secret_and_reads_back() -> None:
    from subagents.config import Hook, settings_from_record, settings_record

    s = Settings(
        mcp_token="secret",
        web_token="another-secret",
        hooks=[Hook(on=["complete"], command=["x"])],
        bins={"pi": "/opt/pi"},
        runner="tmux",
        timeout=60,
    )
    record = settings_record(s)
    assert not {"mcp_token", "web_token", "hooks"} & record.keys()
    back = settings_from_record({**record, "from_a_newer_version": 1})
    assert (back.runner, back.timeout, back.bins) == ("tmux", 60, {"pi": "/opt/pi"})
    assert back.mcp_token is None and back.hooks == []


def test_a_config_file_checked_once_is_read_again_without_its_check(
    dirs: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic checks a config file's types once per content: the same bytes read again
    make the same settings from the kept check; changed bytes are checked again."""
    user, project, env = dirs
    body = (
        'default_backend = "claude"\ntimeout = 10\ngrace = 1\n'
        '[bins]\npi = "/opt/pi"\n'
        '[[hooks]]\non = ["complete"]\ncommand = ["notify-send", "done"]\n'
        '[acp.mine]\ncommand = ["my-agent", "--acp"]\n'
    )
    write(user / "config.toml", body)
    first = load_settings(project, env)
    checked: list[str] = []
    real = config._check

    def counted(layer: object, where: str, *args: object, **kwargs: object) -> object:
        checked.append(where)
        return real(layer, where, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(config, "_check", counted)
    again = load_settings(project, env)
    assert again == first and checked == ["environment"]
    assert isinstance(again.timeout, float) and again.hooks[0].command == ["notify-send", "done"]
    assert again.acp["mine"].command == ["my-agent", "--acp"] and again.bins == {"pi": "/opt/pi"}
    write(user / "config.toml", body.replace("timeout = 10", "timeout = -1"))
    with pytest.raises(ConfigError, match="timeout"):
        load_settings(project, env)


def test_a_kept_check_is_the_files_own_kind(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    """Bytes checked as the user's file are checked again as a project's: a project file
    may not set what the user's may."""
    user, project, env = dirs
    body = '[bins]\npi = "/opt/pi"\n'
    write(user / "config.toml", body)
    assert load_settings(project, env).bins == {"pi": "/opt/pi"}
    write(project / ".subagents" / "config.toml", body)
    with pytest.raises(ConfigError, match="bins: not allowed in a project config"):
        load_settings(project, env)
