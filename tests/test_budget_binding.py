"""Issue 39, item 4: budgets bind, or say why they cannot. A cost budget on a model its CLI
prices at nothing says so once; a job's budget stops each of its runs within one turn past
the point it was reached (no grace turns of their own beyond it) and the job records its
``limit`` and ``errorMessage``; budgets in plans and the API are checked as strictly as in
config. Real pi against the looping mock model; no network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke

import subagents
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.errors import PlanError, UsageError

TASK = {"task": "loop until told otherwise", "backend": "pi", "model": "mock/mock-model"}


def events(run: dict[str, Any]) -> list[dict[str, Any]]:
    text = Path(run["paths"]["events"]).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("pi") is None, reason="the pi CLI is not installed")
def test_a_cost_budget_on_an_unpriced_model_says_once_it_cannot_be_counted(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with MockModelServer(Script(loop=True, loop_limit=4, command="true")) as srv:
        env = mm.write_pi_config(tmp_path / "pi-config", srv.url)  # no price: cost 0
        result = subagents.run({"mode": "single", "tasks": [{**TASK, "max_cost": 0.01}]},
                               cwd=work, env=env)  # fmt: skip
    run = result["runs"][0]
    assert run["usage"]["totalTokens"] > 0 and run["usage"]["cost"] == 0
    notices = [
        e["message"] for e in events(run) if e["type"] == "notice" and "cannot be counted" in e["message"]
    ]  # fmt: skip
    assert len(notices) == 1, notices


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("pi") is None, reason="the pi CLI is not installed")
def test_a_job_budget_stops_each_run_within_one_turn_and_the_job_records_it(
    tmp_path: Path,
) -> None:
    """Three children that ignore the wrap-up, $0.10 for the job, $0.02 a turn: each run,
    told the job's limit is reached, is stopped after at most one more turn once it took the
    message in (a turn already under way when it was told never saw it)."""
    work = tmp_path / "work"
    work.mkdir()
    script = Script(loop=True, loop_limit=40, heed_messages=False, command="sleep 0.3")
    with MockModelServer(script) as srv:
        env = mm.write_pi_config(tmp_path / "pi-config", srv.url, price=(1000, 2000))
        spec = {"mode": "parallel", "tasks": [TASK, TASK, TASK], "max_cost": 0.1}
        result = subagents.run(spec, cwd=work, env=env)
    assert result["status"] == "failed"
    limit = result.get("limit")
    assert limit is not None and (limit["kind"], limit["scope"], limit["limit"]) == (
        "cost",
        "job",
        0.1,
    )
    assert limit["used"] == pytest.approx(result["usage"]["cost"])
    assert "the job's cost limit of $0.10 was reached" in result.get("errorMessage", "")
    for run in result["runs"]:
        assert "paths" in run and run["status"] == "failed"
        acted = [e for e in events(run) if e["type"] == "limit"]
        assert [e["action"] for e in acted] == ["wrap-up", "abort"], acted
        stopped = acted[1]["seq"]
        taken = [
            e["seq"]
            for e in events(run)
            if e["type"] == "user_message"
            and e["mode"] == "wrap-up"
            and e["receipt"] == "delivered"
        ]
        # From when the child took the wrap-up in; never taken in, one turn more from when
        # it was told.
        told = taken[0] if taken else acted[0]["seq"]
        grace = 1 if taken else 2
        turns = [e.get("turns", 0) for e in events(run) if e["type"] == "usage"]
        at = {e["seq"]: e.get("turns", 0) for e in events(run) if e["type"] == "usage"}
        before = max([t for s, t in at.items() if s < told] or [0])
        after = max([t for s, t in at.items() if s < stopped] or [0])
        assert after - before <= grace, (before, after, turns, bool(taken))
    # and `show` says so in its words
    shown = invoke(["show", result["jobId"]])
    assert "the job's cost limit of $0.10 was reached" in shown.stdout + shown.stderr


@pytest.mark.parametrize("value", [True, "3", [3]])
@pytest.mark.parametrize("where", ["job", "step"])
@pytest.mark.parametrize("name", ["max_turns", "max_tokens", "max_cost"])
def test_plan_and_api_budgets_are_as_strict_as_config(value: Any, where: str, name: str) -> None:
    spec: dict[str, Any] = {"mode": "single", "tasks": [{"task": "x"}]}
    (spec if where == "job" else spec["tasks"][0])[name] = value
    with pytest.raises((PlanError, UsageError)) as caught:
        subagents.start(spec)
    message = str(caught.value)
    assert "\n" not in message and name in message and "must be a number" in message


def test_a_plan_file_with_a_boolean_budget_is_one_line_and_exit_2(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("mode: single\nmax_turns: true\nsteps:\n  - task: x\n    max_cost: '3'\n")
    p = invoke(["run", "-f", str(plan)])
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "must be a number" in p.stderr
