"""The stall watchdog, with fake children: a silent child is stalled, a long tool call is
not, and the abort policy ends a stalled run as failed with a diagnosis that says so.

Stall timeouts are small (0.5-1 s) but nothing asserts how soon anything happens: each
check waits for an outcome with a generous bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually
from support.cli import cli, invoke
from support.fake import Fake, fake_env

from subagents.core.files import read_events

pytestmark = pytest.mark.process


def _events(result: dict) -> list[dict]:
    return read_events(Path(result["paths"]["events"]))


def stalls(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "notice" and e.get("stalled")]


def after(events: list[dict], kind: str) -> list[dict]:
    """The events after the first of type ``kind``: the silence the test made, not the
    child's start (on a loaded machine a start may itself be silent past 0.5 s)."""
    first = next(i for i, e in enumerate(events) if e["type"] == kind)
    return events[first + 1 :]


def test_a_silent_child_is_stalled_then_recovers(fake: Fake) -> None:
    # A quick tool call, then silent (no tool call in flight) for 3 s against a 0.5 s
    # stall timeout, then it answers.
    steps = [*pi.start(), *pi.tool_use(), *pi.tool_end(), {"sleep": 3}, pi.text_end("late")]
    result = fake.run([*steps, *pi.end()], stall_timeout=0.5)
    assert result["status"] == "completed" and result["finalText"] == "late"
    notices = stalls(after(_events(result), "tool_result"))
    assert len(notices) == 1  # said once per silence, not on every tick
    assert notices[0]["level"] == "warn" and "no tool call in flight" in notices[0]["message"]
    assert notices[0]["since"] <= notices[0]["ts"]


def test_ps_and_show_say_stalled_for_n_s(fake: Fake) -> None:
    env = fake_env(fake, [*pi.start(), {"sleep": 60}])
    started = cli(["run", "--bg", "--json", "--stall-timeout", "0.5", "x"], env)
    assert started.returncode == 0, started.stderr
    job_id = json.loads(started.stdout)["jobId"]
    try:
        assert eventually(lambda: "stalled for" in invoke(["ps"]).stdout, timeout=30)
        shown = invoke(["show", job_id]).stdout
        assert "now: stalled for " in shown and " s" in shown
    finally:
        invoke(["stop", job_id])


def test_a_long_tool_call_is_not_a_stall(fake: Fake) -> None:
    # A tool call in flight for 3 s (the child prints nothing meanwhile): no stall. (The
    # policy is the notice: its start, before the call, may be silent past 0.5 s when the
    # machine is loaded, and is a stall.)
    steps = [
        *pi.start(),
        *pi.tool_use(),
        {"sleep": 3},
        *pi.tool_end(),
        pi.text_end("built"),
        *pi.end(),
    ]
    result = fake.run(steps, stall_timeout=0.5)
    assert result["status"] == "completed", result["errorMessage"]
    events = _events(result)
    during = after(events, "tool_call")
    during = during[: next(i for i, e in enumerate(during) if e["type"] == "tool_result")]
    assert stalls(during) == []


def test_abort_policy_fails_a_stalled_run_with_a_diagnosis(fake: Fake) -> None:
    # In this process no subprocess timeout ends a hang: the run's own --timeout bounds it.
    p = invoke(
        ["run", "--json", "--timeout", "120", "--stall-timeout", "0.5", "--on-stall", "abort", "x"],
        fake_env(fake, [*pi.start(), {"hang": True}]),
    )
    assert p.returncode == 1
    result = json.loads(p.stdout)
    assert result["status"] == "failed"
    assert result["errorMessage"].startswith("stalled: no event for 0.5 s")
    assert "stalled" in result["diagnostics"]
    assert len(stalls(_events(result))) == 1


def test_tool_timeout_bounds_one_tool_call(fake: Fake) -> None:
    steps = [*pi.start(), *pi.tool_use(), {"hang": True}]
    result = fake.run(steps, tool_timeout=0.5)
    assert result["status"] == "failed"
    assert "tool timeout of 0.5 s" in result["errorMessage"]


def test_config_default_and_zero_turns_it_off(fake: Fake) -> None:
    steps = [*pi.start(), {"sleep": 2}, pi.text_end("ok"), *pi.end()]
    env = {**fake_env(fake, steps), "SUBAGENTS_STALL_TIMEOUT": "0.5", "SUBAGENTS_ON_STALL": "abort"}
    from_config = json.loads(invoke(["run", "--json", "x"], env).stdout)
    assert from_config["status"] == "failed" and "stalled" in from_config["errorMessage"]
    off = invoke(["run", "--json", "--stall-timeout", "0", "x"], env)
    assert off.returncode == 0, off.stderr
    assert stalls(_events(json.loads(off.stdout))) == []


def test_bad_watchdog_options_are_bad_input(fake: Fake) -> None:
    p = invoke(["run", "--stall-timeout", "-1", "x"], fake_env(fake, pi.answer("x")))
    assert p.returncode == 2
    # The option as it is typed (not the field's name, --stall_timeout).
    assert p.stderr.startswith("subagents: --stall-timeout: ") and "stall_timeout" not in p.stderr
