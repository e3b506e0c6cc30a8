"""A run's options are defined once (subagents/options.py) and every face is made from that
definition: the job spec, the run request and its record, `run`'s flags, the MCP tool, the
Python API's keywords, the pi tool's parameters and docs/jobs.md's table; the supervisor's
RunSpec is checked against it. Errors carry where (``loc``) and what (``problem``), and each
surface names the place its own way."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from click.testing import CliRunner
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake

from subagents import types
from subagents.cli import main
from subagents.cli.options import chosen, on_the_command_line
from subagents.config import Settings
from subagents.errors import FieldProblem, PlanError, UsageError
from subagents.jobs import MAP_FIELDS, JobSpec, Step, job_of
from subagents.mcp.args import StepArg, SubagentArgs, in_the_tool
from subagents.options import FACES, MAP_TAKES, RunOptions, job_specs, map_specs, specs, step_specs
from subagents.runs import RunRequest
from subagents.supervisor.spec import FIELDS, RunSpec

REPO = Path(__file__).resolve().parent.parent


# ---- one definition, every face ---------------------------------------------------------


@pytest.mark.process
def test_the_generated_pi_types_schema_and_docs_table_are_current() -> None:
    """integrations/pi/options.ts, options.schema.json and docs/jobs.md's table are what
    scripts/gen-options makes from the definition (run it after changing an option)."""
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen-options"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr


def test_every_face_offers_every_option_the_definition_does_not_keep_from_it() -> None:
    run = main.commands["run"]
    flags = {o for p in run.params if not getattr(p, "hidden", False) for o in p.opts}
    schema = json.loads((REPO / "integrations" / "pi" / "options.schema.json").read_text())
    pi_names = {
        *schema["$defs"]["StepOptions"]["properties"],
        *schema["$defs"]["JobOptions"]["properties"],
    }
    for spec in specs():
        assert (spec.flag in flags) == spec.on("cli"), spec.flag
        assert (spec.name in SubagentArgs.model_fields) == spec.on("mcp"), spec.name
        assert (spec.json in pi_names) == spec.on("pi"), spec.json
        for face, why in spec.meta.not_on:
            assert face in FACES and why, spec.name
    for spec in step_specs():
        assert (spec.name in StepArg.model_fields) == spec.on("mcp"), spec.name
        assert (spec.field in types.RunOptionsDict.__annotations__) == spec.on("api")


def test_a_maps_options_are_offered_alike_by_the_command_the_mcp_tool_and_pi() -> None:
    from subagents.mcp.maptool import subagent_map

    command = main.commands["map"]
    flags = {o: p for p in command.params for o in p.opts}
    tool = inspect.signature(subagent_map).parameters
    schema = json.loads((REPO / "integrations" / "pi" / "options.schema.json").read_text())
    for spec in map_specs():
        assert spec.flag in flags and spec.name in tool and spec.name in MAP_FIELDS, spec.name
        assert spec.json in schema["$defs"]["MapOptions"]["properties"], spec.json
        if spec.name != "where":  # (the command's takes FIELD=VALUE, once per field)
            assert flags[spec.flag].help == spec.meta.help, spec.name
    # What a map takes of the run's and the job's options: each a flag of `map`, and each
    # the pi tool's name for an option it has.
    assert all(flag in flags for flag in MAP_TAKES.values())
    names = {s.json: s.name for s in specs()}
    assert {names[n] for n in schema["x-map-takes"]} == set(MAP_TAKES)


def test_step_and_request_embed_the_run_options_and_the_spec_the_job_options() -> None:
    names = [f.name for f in fields(RunOptions)]
    assert issubclass(Step, RunOptions) and issubclass(RunRequest, RunOptions)
    assert {f.name for f in fields(Step)} == {*names, "task", "cwd"}
    # (a map's own fields are its document's, not options of every job: docs/map.md)
    assert [s.field for s in job_specs()] == [
        f.name for f in fields(JobSpec) if f.name not in ("mode", "steps", "tasks", *MAP_FIELDS)
    ]


def test_the_static_mirrors_hold_to_the_definition() -> None:
    """What mypy needs written out (the API's keywords, the record's keys) names exactly the
    definition's options: a new option missing there fails here."""
    assert set(types.RunOptionsDict.__annotations__) == {s.field for s in step_specs()}
    record_keys = set(get_type_hints(types.RunRequestRecord)) - {"runner"}
    assert record_keys == {f.name for f in fields(RunRequest)}


def test_a_request_record_is_one_generic_conversion_both_ways() -> None:
    req = RunRequest(
        task="t",
        backend="pi",
        stall_timeout=5.0,
        on_stall="abort",
        max_turns=3,
        env={"A": "1"},
        watch=[{"pid": 1, "createTime": 2.0}],
        output_schema={"type": "object"},
    )
    record = req.to_record()
    assert set(record) == {f.name for f in fields(RunRequest)}
    assert RunRequest.from_record(record) == req
    record["env"]["A"] = "changed"  # the record and the request share nothing
    assert req.env == {"A": "1"}
    # Written by an older version: no budget, no schema, env null, a runner beside.
    old: Any = {"task": "t", "backend": "pi", "env": None, "runner": "tmux"}
    back = RunRequest.from_record(old)
    assert (back.env, back.watch, back.max_turns, back.output_schema) == ({}, [], None, None)


GATE = {"verify", "verify_timeout", "verify_attempts", "review"}


def test_each_option_default_and_supervisor_key_exist() -> None:
    settings = {f.name for f in fields(Settings)}
    for spec in specs():
        if spec.meta.setting is not None:
            assert spec.meta.setting in settings, spec.name
    for spec in step_specs():
        if spec.field in GATE:  # the job acts on these once the run completed (jobs/gates.py)
            assert spec.meta.supervisor is None, spec.name
            continue
        assert spec.meta.supervisor in FIELDS, spec.name  # what the run's meta.json says


# ---- the supervisor's spec -------------------------------------------------------------


def test_run_spec_refuses_a_key_it_does_not_have() -> None:
    """Before, RunSpec(**fields) dropped a misspelled key: stallTimout=5 left stallTimeout None."""
    base: dict[str, Any] = {"runId": "r", "backend": "pi", "task": "t", "cwd": "/", "argv": []}
    with pytest.raises(TypeError, match="stallTimout"):
        RunSpec(**base, stallTimout=5)
    with pytest.raises(TypeError):
        RunSpec("r", "pi", "t", "/", [])  # type: ignore[misc]  # keywords only
    spec = RunSpec(**base, stallTimeout=5)
    assert spec.stallTimeout == 5 and spec.env == {} and spec.watch == []
    assert list(spec.to_dict())[:5] == ["runId", "backend", "task", "cwd", "argv"]
    # meta.json written by a newer version: a key this one does not know is passed over.
    assert RunSpec.from_dict({**spec.to_dict(), "laterField": 1}).to_dict() == spec.to_dict()
    with pytest.raises(TypeError, match="lacks argv"):
        RunSpec.from_dict({k: v for k, v in spec.to_dict().items() if k != "argv"})


# ---- where a problem is, as each surface names it ---------------------------------------


def test_a_problem_carries_its_place_and_each_surface_names_it() -> None:
    with pytest.raises(PlanError) as caught:
        job_of("chain", [{"task": "a"}, {"task": "b", "max_turns": 0}], source="plan.yaml")
    exc = caught.value
    assert exc.loc == ("steps", 1, "max_turns")
    assert exc.problem == "must be a whole number, 1 or more, not 0"
    assert str(exc) == f"plan.yaml: steps.1.max_turns: {exc.problem}"
    assert in_the_tool(exc, "chain") == f"chain.1.max_turns: {exc.problem}"
    assert in_the_tool(exc, "parallel") == f"steps.1.max_turns: {exc.problem}"
    assert on_the_command_line(exc, 2) == f"steps.1.max_turns: {exc.problem}"

    one = PlanError("must be 1 or more, not 0", ("steps", 0, "stall_timeout"))
    assert on_the_command_line(one, 1) == "--stall-timeout: must be 1 or more, not 0"
    assert in_the_tool(one, "single") == "stall_timeout: must be 1 or more, not 0"
    job = PlanError("must be a positive amount of USD, not 0", ("max_cost",))
    assert on_the_command_line(job, 1).startswith("--job-max-cost: ")
    assert in_the_tool(job, "single").startswith("job_max_cost: ")
    # A FieldProblem's place is a loc too (its dotted path parsed, indexes as numbers).
    assert FieldProblem("steps.0.task", "the task is empty").loc == ("steps", 0, "task")
    # A message that names its place first (its str for a caller of the API) gives the
    # problem without it, so no surface names the place twice ("cwd: cwd: ...").
    cwd = UsageError("cwd: the working directory does not exist: /x", "cwd")
    assert (cwd.loc, cwd.problem) == (("cwd",), "the working directory does not exist: /x")
    assert str(cwd) == "cwd: the working directory does not exist: /x"
    assert on_the_command_line(cwd, 1) == str(cwd)
    assert UsageError("no such job", "job").problem == "no such job"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--max-turns", "0"], "--max-turns: must be a whole number, 1 or more, not 0"),
        (["--job-max-tokens", "0"], "--job-max-tokens: must be a whole number, 1 or more, not 0"),
        (["--on-stall", "abort", "--tool-timeout", "-1"], "--tool-timeout: must be 0 (off)"),
        (["-j", "0"], "--concurrency: must be 1 or more, not 0"),
        (["--launcher", "tmux", "--runner", "process"], "--launcher and --runner say the same"),
    ],
)
def test_the_command_line_names_the_flag_in_one_line(
    args: list[str], line: str, isolated_state: Path
) -> None:
    result = CliRunner().invoke(main, ["run", *args, "a task"])
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"subagents: {line}"), result.output
    assert not (isolated_state / "jobs").exists() or not any((isolated_state / "jobs").iterdir())


@pytest.mark.parametrize(
    ("args", "loc", "flag"),
    [
        (["--max-turns", "0", "a task"], ["steps", 0, "max_turns"], "--max-turns"),
        (["--chain", "--max-turns", "0", "a", "b"], ["steps", 0, "max_turns"], "--max-turns"),
        (["--parallel", "--job-max-turns", "0", "a", "b"], ["max_turns"], "--job-max-turns"),
        (["--backend", "acp:nope", "a task"], ["steps", 0, "backend"], "--backend"),
    ],
)
def test_with_json_a_refusal_is_also_data_its_place_and_flag(
    args: list[str], loc: list[Any], flag: str | None, isolated_state: Path
) -> None:
    """What the pi tool names in its own words (``maxTurns``, ``jobMaxTurns``): stdout holds
    the refusal's place, problem and flag; stderr the one line; no job is made."""
    result = CliRunner().invoke(main, ["run", "--json", *args])
    assert result.exit_code == 2, result.output
    refused = json.loads(result.stdout)["refused"]
    assert refused["loc"] == loc and refused["flag"] == flag, refused
    line = result.stderr.strip()
    assert "\n" not in line and line.endswith(refused["problem"]), result.stderr
    assert not (isolated_state / "jobs").exists() or not any((isolated_state / "jobs").iterdir())


# ---- --launcher, and its two older names ---------------------------------------------------


def _settings(**values: Any) -> dict[str, Any]:
    base = {"tools": None, "launcher": None, "ray_address": None, "ray_shared_cwd": None}
    base.update({"agent_scope": None, "runner": None, "executor": None})
    base.update({s.name: None for s in specs() if s.scope != "settings" and s.on("cli")})
    return chosen({**base, **values}).settings


def test_the_launcher_and_its_aliases_choose_the_same_settings() -> None:
    assert _settings(launcher="tmux") == {"runner": "tmux", "executor": "local"}
    assert _settings(launcher="ray") == {"executor": "ray"}
    assert _settings(runner="tmux") == {"runner": "tmux"}
    assert _settings(executor="ray", runner="tmux") == {"runner": "tmux", "executor": "ray"}
    assert _settings(tools="read, ls") == {"tools": ["read", "ls"]}


@pytest.mark.process
def test_a_run_through_the_launcher_flag_records_that_launcher(fake: Fake) -> None:
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(pi.answer("fine"))}
    p = invoke(["run", "--json", "--launcher", "process", "--stall-timeout", "60", "x"], env)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    shown = invoke(["show", "--json", result["jobId"]])
    plan = json.loads(shown.stdout)["plan"]
    assert plan["placement"]["launcher"] == "process"
    assert plan["requests"][0]["stall_timeout"] == 60
    meta = json.loads(Path(result["paths"]["events"]).with_name("meta.json").read_text())
    assert meta["stallTimeout"] == 60


# ---- an option added as docs/design.md says: one field, its backend lines --------------------


@pytest.mark.process
def test_thinking_is_a_step_option_on_every_face(fake: Fake, isolated_state: Path) -> None:
    """``thinking`` (before: an agent's only) is given on the command line and reaches the
    child's argv; a backend without thinking levels refuses it in one line."""
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(pi.answer("fine"))}
    p = invoke(["run", "--json", "--thinking", "high", "x"], env)
    assert p.returncode == 0, p.stderr
    meta = json.loads(
        Path(json.loads(p.stdout)["paths"]["events"]).with_name("meta.json").read_text()
    )
    assert meta["argv"][meta["argv"].index("--thinking") + 1] == "high"
    refused = CliRunner().invoke(main, ["run", "--backend", "claude", "--thinking", "high", "x"])
    assert refused.exit_code == 2
    assert refused.output.strip() == (
        "subagents: backend claude has no thinking level setting;"
        " drop 'thinking' (or the agent's) or choose another backend"
    )
    assert "thinking" in SubagentArgs.model_fields and "thinking" in StepArg.model_fields
