"""Issue 27, bad input: a limit in seconds is checked at one place, with one cap, whichever
surface it comes from (command line, plan file, config, environment, MCP, Python); and no
accepted limit can crash a supervisor (epoll waits at most 2^31 ms)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake, fake_env

from subagents import api

CAP = "must be at most 2592000 seconds (30 days), not 1e+12"


def nothing_made(home: Path) -> bool:
    return not any((home / "jobs").glob("*")) and not any((home / "runs").glob("*"))


@pytest.mark.process
@pytest.mark.parametrize("name", ["stall-timeout", "tool-timeout"])
def test_the_longest_watchdog_limit_accepted_never_crashes_the_supervisor(
    fake: Fake, name: str
) -> None:
    p = invoke(["run", "--json", f"--{name}", "2592000", "x"], fake_env(fake, pi.answer("fine")))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["finalText"] == "fine"


@pytest.mark.process
def test_a_limit_from_meta_json_past_what_epoll_takes_never_crashes_the_supervisor(
    fake: Fake,
) -> None:
    # Whatever a run's meta.json says (a record made by another version, say).
    from subagents.config import Settings
    from subagents.core.files import write_json_atomic
    from subagents.launchers import Placement
    from subagents.runs import RunRequest, RunSpec, prepare, start_prepared

    env = {**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)}
    req = RunRequest(task="x", backend="pi", cwd=str(fake.dir), env=fake.env(pi.answer("fine")))
    spec, run_dir = prepare(req, Settings(), env)
    meta = {**spec.to_dict(), "stallTimeout": 1e12, "toolTimeout": 1e12}
    write_json_atomic(run_dir / "meta.json", meta)
    handle = start_prepared(RunSpec.from_dict(meta), run_dir, Placement())
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed", result


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1e12", CAP),
        ("inf", "must be at most 2592000 seconds (30 days), not inf"),
        ("nan", "must be 0 (off) or a positive number of seconds, not nan"),
        ("-1", "must be 0 (off) or a positive number of seconds, not -1"),
    ],
)
def test_the_command_line_refuses_a_watchdog_limit_in_one_line(
    fake: Fake, isolated_state: Path, value: str, problem: str
) -> None:
    for option in ("--stall-timeout", "--tool-timeout"):
        p = invoke(["run", f"{option}={value}", "x"], fake_env(fake, pi.answer("never")))
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip() == f"subagents: {option}: {problem}"
    assert nothing_made(isolated_state)


def test_every_surface_says_the_same_of_a_limit_past_the_cap(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    env = fake_env(fake, pi.answer("never"))
    plan = tmp_path / "plan.yaml"
    plan.write_text("mode: single\nsteps:\n  - task: x\n    stall_timeout: 1.0e+12\n")
    p = invoke(["run", "-f", str(plan)], env)
    assert (
        p.returncode == 2 and p.stderr.strip() == f"subagents: {plan}: steps.0.stall_timeout: {CAP}"
    )
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text("tool_timeout = 1e12\n")
    p = invoke(["run", "x"], env)
    assert p.returncode == 2
    assert p.stderr.strip() == f"subagents: {config / 'config.toml'}: tool_timeout: {CAP}"
    (config / "config.toml").unlink()
    p = invoke(["run", "x"], {**env, "SUBAGENTS_STALL_TIMEOUT": "1e12"})
    assert p.returncode == 2
    assert p.stderr.strip() == f"subagents: environment: SUBAGENTS_STALL_TIMEOUT: {CAP}"
    with pytest.raises(api.BadRequest, match=re.escape(f"steps.0.stall_timeout: {CAP}")):
        api.prepare_job({"mode": "single", "steps": [{"task": "x", "stall_timeout": 1e12}]})
    assert nothing_made(isolated_state)


def test_true_is_not_a_number_of_seconds(fake: Fake, tmp_path: Path, isolated_state: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("mode: single\nsteps:\n  - task: x\n    stall_timeout: true\n")
    p = invoke(["run", "-f", str(plan)], fake_env(fake, pi.answer("never")))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().startswith(f"subagents: {plan}: steps.0.stall_timeout: ")
    with pytest.raises(api.BadRequest, match="tool_timeout"):
        api.prepare_job({"mode": "single", "steps": [{"task": "x", "tool_timeout": True}]})
    assert nothing_made(isolated_state)


@pytest.mark.process
def test_mcp_arguments_get_the_same_check(fake: Fake, isolated_state: Path) -> None:
    from support.mcp_client import connect, run, text_of

    async def main() -> None:
        async with connect(fake_env(fake, pi.answer("never"))) as client:
            for args, problem in (
                ({"task": "x", "stall_timeout": 1e12}, f"stall_timeout: {CAP}"),
                ({"task": "x", "tool_timeout": True}, "tool_timeout"),
                ({"tasks": [{"task": "x", "timeout": 1e12}]}, f"tasks.0.timeout: {CAP}"),
            ):
                result = await client.call_tool("subagent", args)
                assert result.is_error, args
                assert problem in text_of(result), text_of(result)

    run(main)
    assert nothing_made(isolated_state)


@pytest.mark.parametrize("command", ["run", "continue", "apply", "ps", "cost", "send"])
def test_help_shows_an_example(command: str) -> None:
    p = invoke([command, "--help"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:"))
    assert lines[start + 1].strip().startswith(f"subagents {command}") or any(
        line.strip().startswith(f"subagents {command} ") for line in lines[start + 1 : start + 5]
    ), p.stdout
