"""The job spec is checked the same way however it is made: from the command line's
values (``job_of``, no pydantic) or from a document (``parse_job``, pydantic checks the
types against the same dataclasses). Settings likewise (``Settings`` vs a config file)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from subagents.config import Settings, load_settings
from subagents.errors import ConfigError, FieldProblem, PlanError
from subagents.jobs import JobSpec, job_of, parse_job, with_options

BAD_STEPS: list[tuple[dict[str, Any], str]] = [
    ({"task": "  "}, "steps.0.task: the task is empty"),
    ({"task": "a\x00b"}, "steps.0.task: contains a NUL character"),
    ({"task": "x", "model": "m\udcff"}, "steps.0.model: not valid UTF-8"),
    ({"task": "x", "timeout": -1.0}, "steps.0.timeout: must be a positive number"),
    ({"task": "x", "timeout": math.inf}, "steps.0.timeout: must be at most"),
    (
        {"task": "x", "stall_timeout": -1.0},
        "steps.0.stall_timeout: must be 0 (off) or a positive number of seconds, not -1",
    ),
    (
        {"task": "x", "tool_timeout": math.nan},
        "steps.0.tool_timeout: must be 0 (off) or a positive number of seconds, not nan",
    ),
    ({"task": "x", "on_stall": "boom"}, "steps.0.on_stall:"),
    ({"task": "x", "isolate": "vm"}, "steps.0.isolate:"),
]


@pytest.mark.parametrize(("step", "expected"), BAD_STEPS)
def test_a_bad_step_is_refused_the_same_way_from_arguments_and_documents(
    step: dict[str, Any], expected: str
) -> None:
    with pytest.raises(PlanError) as from_args:
        job_of("single", [step], source="job")
    with pytest.raises(PlanError) as from_document:
        parse_job({"mode": "single", "steps": [step]})
    assert str(from_args.value).startswith(f"job: {expected}"), from_args.value
    if step.get("on_stall") is None and step.get("isolate") is None:
        # choices: pydantic names the allowed values itself for a document
        assert str(from_document.value) == str(from_args.value)
    else:
        assert str(from_document.value).startswith(f"job: {expected}"), from_document.value


def test_job_level_checks_are_shared() -> None:
    for mode, steps, concurrency, expected in [
        ("chain", [{"task": "use {previous}"}], None, "steps.0.task: the first step has no"),
        ("single", [{"task": "a"}, {"task": "b"}], None, "mode 'single' takes exactly one task"),
        ("parallel", [{"task": "a"}], 0, "concurrency: must be 1 or more"),
        ("parallel", [], None, "the job has no tasks"),
    ]:
        with pytest.raises(PlanError, match=expected):
            job_of(mode, steps, concurrency)
        document: dict[str, Any] = {"mode": mode, "steps": steps}
        if concurrency is not None:
            document["concurrency"] = concurrency
        with pytest.raises(PlanError, match=expected):
            parse_job(document)


def test_a_document_gets_its_types_checked_and_coerced() -> None:
    spec = parse_job({"mode": "parallel", "tasks": [{"task": "a", "timeout": "5"}]})
    assert isinstance(spec, JobSpec) and spec.steps[0].timeout == 5.0 and spec.tasks is None
    with pytest.raises(PlanError, match=r"tasks\.0\.colour: unknown field"):
        parse_job({"mode": "parallel", "tasks": [{"task": "a", "colour": "red"}]})
    with pytest.raises(PlanError, match=r"steps\.0\.timeout: Input should be a valid number"):
        parse_job({"mode": "single", "steps": [{"task": "a", "timeout": "soon"}]})


def test_settings_check_themselves_and_a_file_names_where(tmp_path: Path) -> None:
    with pytest.raises(FieldProblem, match="concurrency: must be 1 or more"):
        Settings(concurrency=0)
    assert Settings(timeout=0).timeout is None  # 0 means none, however it is set
    config = tmp_path / "conf"
    config.mkdir()
    (config / "config.toml").write_text("grace = 7200\n")
    env = {"HOME": str(tmp_path), "SUBAGENTS_CONFIG_DIR": str(config)}
    with pytest.raises(ConfigError, match=r"config\.toml: grace: must be at most 3600 seconds"):
        load_settings(tmp_path, env)
    (config / "config.toml").write_text("[[hooks]]\non = ['error']\ncommand = []\n")
    with pytest.raises(ConfigError, match=r"config\.toml: hooks\.0\.command: must name a program"):
        load_settings(tmp_path, env)
    env_only = {**env, "SUBAGENTS_CONFIG_DIR": str(tmp_path / "none"), "SUBAGENTS_PI_BIN": "/x/pi"}
    assert load_settings(tmp_path, env_only).bins == {"pi": "/x/pi"}
    with pytest.raises(ConfigError, match="environment: SUBAGENTS_CONCURRENCY: must be 1 or more"):
        load_settings(tmp_path, {**env_only, "SUBAGENTS_CONCURRENCY": "0"})


def test_command_line_options_over_a_plan_are_checked_too() -> None:
    plan = parse_job({"mode": "parallel", "concurrency": 2, "tasks": [{"task": "a", "model": "m"}]})
    spec = with_options(plan, {"model": "x", "timeout": 5.0}, None, "plan.yaml")
    # A step's own value wins; the option fills what it left unset; the plan's concurrency stays.
    assert (spec.steps[0].model, spec.steps[0].timeout, spec.concurrency) == ("m", 5.0, 2)
    assert with_options(plan, {}, 3, "plan.yaml").concurrency == 3
    with pytest.raises(PlanError, match=r"^plan\.yaml: concurrency: must be 1 or more"):
        with_options(plan, {}, 0, "plan.yaml")  # -j 0 is refused, not taken as "unset"
    with pytest.raises(PlanError, match=r"^plan\.yaml: steps\.0\.timeout: must be a positive"):
        with_options(plan, {"timeout": -1.0}, None, "plan.yaml")
