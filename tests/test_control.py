"""Live control's parts, with the fake agent and the real supervisor: the control endpoint
(its socket, a run directory past a socket path's length), the child's stdin written from a
buffer, the budget counter, and every bad input to ``send`` and the budgets refused in one
line, nothing sent or started."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually
from support.claude import claude_steps, events, start_claude
from support.cli import invoke
from support.fake import Fake

import subagents
from subagents.core import controlsock
from subagents.core import events as ev
from subagents.errors import JobIdError, MessageRefused, UsageError
from subagents.runs import send
from subagents.supervisor.budget import Budget
from subagents.supervisor.stdin import InputWriter


def one_line(p: subprocess.CompletedProcess[str], *words: str) -> None:
    """Bad input: exit 2, one line on stderr naming the problem, nothing on stdout."""
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stdout == "", p.stderr
    for word in words:
        assert word in p.stderr, p.stderr


# --------------------------------------------------------------------------- a live fake


@pytest.mark.process
def test_the_endpoint_is_the_owners_only_and_goes_with_the_run(fake: Fake) -> None:
    gate = fake.dir / "gate"
    handle = start_claude(fake, claude_steps(gate, echo="look at b.py"))
    assert eventually(lambda: any(e["type"] == "tool_call" for e in events(handle)))
    sock = handle.run_dir / "control.sock"
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
    receipt = subagents.send(handle.run_id, "look at b.py")
    assert receipt == {"runId": handle.run_id, "id": "m1", "mode": "steer", "receipt": "queued"}
    gate.touch()
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    assert result["messages"] == {"sent": 1, "delivered": 1}
    assert not sock.exists()
    # a request that is not one gets an answer, not a hang (here: the run is over)
    with pytest.raises(MessageRefused, match="has ended"):
        subagents.send(handle.run_id, "too late")


@pytest.mark.process
def test_a_run_directory_past_a_socket_paths_length_is_reached(fake: Fake, tmp_path: Path) -> None:
    home = tmp_path / ("h" * 90)  # run dirs under it are longer than a socket path may be
    gate = fake.dir / "gate"
    handle = start_claude(fake, claude_steps(gate, echo="hi"), home=home)
    assert len(str(handle.run_dir / "control.sock").encode()) > 107
    assert eventually(lambda: any(e["type"] == "tool_call" for e in events(handle)))
    assert send(handle.run_dir, "hi")["receipt"] == "queued"
    gate.touch()
    assert (handle.wait(timeout=60) or {}).get("status") == "completed"


@pytest.mark.process
def test_a_message_never_taken_is_refused_when_the_run_ends(fake: Fake) -> None:
    """A steer claude never echoed (it ended first) is not counted as delivered."""
    gate = fake.dir / "gate"
    handle = start_claude(fake, claude_steps(gate))
    assert eventually(lambda: any(e["type"] == "tool_call" for e in events(handle)))
    subagents.send(handle.run_id, "ignored")
    gate.touch()
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed"  # its answer stands
    assert result["messages"] == {"sent": 1, "delivered": 0}
    words = [(e["receipt"], e.get("reason")) for e in events(handle) if e["type"] == "user_message"]
    assert words[-1] == ("refused", "the run ended before the child took it")


@pytest.mark.process
def test_a_follow_up_to_a_run_that_fails_is_refused_with_the_reason(fake: Fake) -> None:
    steps = [*pi.start(), *pi.tool_use(), {"wait_for": str(fake.dir / "gate")}, {"exit": 3}]
    handle = fake.start(steps)
    assert eventually(lambda: any(e["type"] == "tool_call" for e in events(handle)))
    # a fake pi prints no version: it runs as a pi too old for messages, and says so
    with pytest.raises(MessageRefused, match=r"could not read pi's version"):
        subagents.send(handle.run_id, "x", "follow-up")
    (fake.dir / "gate").touch()
    assert (handle.wait(timeout=60) or {}).get("status") == "failed"


# --------------------------------------------------------------------------- where a message goes


@pytest.mark.process
def test_a_job_id_reaches_its_one_running_run_and_only_that(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = fake.dir / "gate"
    plan = {"mode": "parallel", "tasks": [{"task": "a"}, {"task": "b"}]}
    steps = [*pi.start(), *pi.tool_use(), {"wait_for": str(gate)}, *pi.answer("done")]
    for key, value in {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}.items():
        monkeypatch.setenv(key, value)
    job = subagents.start(plan)
    assert eventually(lambda: len([r for r in job.state().get("runIds") or [] if r]) == 2)
    with pytest.raises(JobIdError, match=r"has 2 runs going: send to one by its run id"):
        subagents.send(job.job_id, "x")
    gate.touch()
    job.wait(timeout=60)
    with pytest.raises(MessageRefused, match=r"has no run going \(completed\)"):
        subagents.send(job.job_id, "x")


def test_a_run_on_a_ray_node_is_refused_before_asking(tmp_path: Path, isolated_state: Path) -> None:
    run_dir = isolated_state / "runs" / "01m81qhye5-q9cx8b8d"
    run_dir.mkdir(parents=True)
    (run_dir / "meta.json").write_text(json.dumps({"runId": run_dir.name}))
    (run_dir / "supervisor.json").write_text(json.dumps({"runner": "ray", "ray": {}}))
    with pytest.raises(MessageRefused, match="runs on a Ray node"):
        subagents.send(run_dir.name, "x")


# --------------------------------------------------------------------------- bad input


@pytest.mark.process
def test_bad_messages_are_one_line_and_exit_2(fake: Fake) -> None:
    one_line(invoke(["send", "01zzzzzzzz", ""]), "text: the message is empty")
    one_line(invoke(["send", "01zzzzzzzz", "-"], input=b"\xffoops"), "not valid UTF-8")
    big = "x" * ((1 << 20) + 1)
    one_line(
        invoke(["send", "01zzzzzzzz", "-"], input=big.encode()), "over the limit of 1048576 bytes"
    )
    one_line(invoke(["send", "01zzzzzzzz", "hi"]), "no job or run with id '01zzzzzzzz'")
    one_line(invoke(["send", "not/an/id", "hi"]), "no job or run")
    bad_mode = invoke(["send", "01zzzzzzzz", "hi", "--mode", "later"])  # (click's own words)
    assert (
        bad_mode.returncode == 2 and "'later' is not one of 'steer', 'follow-up'" in bad_mode.stderr
    )
    done = fake.run(pi.answer("ok"))
    one_line(invoke(["send", done["runId"], "hi"]), f"run {done['runId']} has ended (completed)")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--max-turns", "0"], ("--max-turns", "1 or more")),
        (["--max-turns", "-3"], ("--max-turns", "1 or more")),
        (["--max-tokens", "-1"], ("--max-tokens",)),
        (["--max-cost", "-0.5"], ("--max-cost", "positive amount of USD")),
        (["--max-cost", "nan"], ("--max-cost", "positive amount of USD")),
        (["--job-max-cost", "0"], ("--job-max-cost", "positive amount of USD")),
        (["--backend", "codex", "--max-cost", "1"], ("codex reports no cost",)),
        (["--backend", "gemini", "--max-cost", "1"], ("gemini reports no cost",)),
    ],
)
def test_bad_budgets_are_one_line_and_start_nothing(
    args: list[str], words: tuple[str, ...], isolated_state: Path, tmp_path: Path
) -> None:
    bins = tmp_path / "bin"
    bins.mkdir()
    for name in ("codex", "gemini"):  # found, never run
        (bins / name).write_text("#!/bin/sh\nexit 9\n")
        (bins / name).chmod(0o755)
    env = {
        "SUBAGENTS_CODEX_BIN": str(bins / "codex"),
        "SUBAGENTS_GEMINI_BIN": str(bins / "gemini"),
    }
    p = invoke(["run", *args, "a task"], env)
    one_line(p, *words)
    assert not (isolated_state / "runs").exists() or not any((isolated_state / "runs").iterdir())


def test_non_numeric_budgets_are_refused_by_the_option_parser() -> None:
    p = invoke(["run", "--max-turns", "many", "x"])
    assert p.returncode == 2 and "'many' is not a valid integer" in p.stderr


def test_budgets_in_plans_agents_config_and_the_api_are_checked_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("mode: single\nmax_cost: -1\nsteps:\n  - task: x\n")
    one_line(invoke(["run", "-f", str(plan)]), "max_cost: must be a positive amount of USD")
    plan.write_text("mode: single\nsteps:\n  - task: x\n    max_turns: 1.5\n")
    one_line(invoke(["run", "-f", str(plan)]), "steps.0.max_turns")
    with pytest.raises(UsageError, match="max_tokens: must be a whole number, 1 or more"):
        subagents.run("x", max_tokens=0)
    monkeypatch.setenv("SUBAGENTS_MAX_TURNS", "zero")
    with pytest.raises(UsageError, match="SUBAGENTS_MAX_TURNS: must be an integer"):
        subagents.run("x")


# --------------------------------------------------------------------------- the counter


def usage(tokens: int, cost: float | None = None) -> Any:
    return {**ev.empty_usage(), "totalTokens": tokens, "cost": cost}


def test_a_turn_budget_wraps_up_at_the_limit_and_aborts_after_the_grace() -> None:
    budget = Budget({"turns": 3}, grace=2, graceful=True)
    assert [budget.check(t, usage(0), False) for t in (1, 2)] == [None, None]
    assert budget.check(3, usage(0), False) == "wrap-up"
    budget.wrap_up_taken(3)  # the child took the message in before its next turn
    assert budget.check(4, usage(0), False) is None  # a grace turn
    assert budget.check(5, usage(0), False) == "abort"
    assert budget.record == {
        "kind": "turns",
        "limit": 3,
        "used": 5,
        "action": "abort",
        "scope": "run",
    }


def test_a_token_budget_wraps_up_one_turn_early_and_an_answer_ends_it() -> None:
    """15 tokens a turn, 100 at most: at 90 the next turn would reach it."""
    budget = Budget({"tokens": 100}, grace=2, graceful=True)
    for turn in range(1, 6):
        assert budget.check(turn, usage(15 * turn), False) is None
    assert budget.check(6, usage(90), False) == "wrap-up"
    assert budget.check(7, usage(105), True) is None  # it answered in a grace turn
    budget.settle(7, usage(105))
    assert budget.record is not None and budget.record["used"] == 105
    assert budget.record["action"] == "wrap-up" and budget.message() is None


def test_without_input_a_budget_aborts_at_the_limit_itself() -> None:
    budget = Budget({"cost": 0.1}, grace=2, graceful=False)
    assert budget.check(4, usage(60, 0.08), False) is None  # the next turn would reach it
    assert budget.check(5, usage(75, 0.1), False) == "abort"
    assert budget.message() == "stopped at the cost limit of $0.10: $0.10 used"


def test_a_jobs_budget_speaks_of_the_job() -> None:
    """A chain's later step: 2 turns left of the job's 5 (3 used before it)."""
    budget = Budget({"turns": 2}, grace=1, graceful=True, job={"turns": 3})
    assert budget.check(2, usage(0), False) == "wrap-up"
    budget.wrap_up_taken(2)
    assert budget.check(3, usage(0), False) == "abort"
    assert budget.record == {
        "kind": "turns",
        "limit": 5,
        "used": 6,
        "action": "abort",
        "scope": "job",
    }
    forced = Budget({}, grace=2, graceful=False)
    assert forced.force("cost", 1.0, 1.2, 3, usage(0)) == "abort"
    assert forced.message() == "stopped at its job's cost limit of $1.00: $1.20 used"


def test_a_jobs_limit_met_during_a_turn_gives_the_grace_from_when_the_child_took_it_in() -> None:
    """The job's limit comes while this run's third turn is under way: that turn did not see
    the wrap-up, so it is not the one turn the run had to answer (CI run of 2026-11-28)."""
    budget = Budget({}, grace=2, graceful=True)
    assert budget.force("turns", 4, 4, 2, usage(0)) == "wrap-up"
    assert budget.check(3, usage(0), False) is None  # under way when it was sent
    budget.wrap_up_taken(3)
    assert budget.check(4, usage(0), False) == "abort"  # one turn after taking it in
    assert budget.message() == (
        "stopped at its job's turn limit of 4 turns: 4 turns used"
        " (no answer to the wrap-up within 1 turn)"
    )
    answered = Budget({}, grace=2, graceful=True)
    answered.force("turns", 4, 4, 2, usage(0))
    answered.check(3, usage(0), False)
    answered.wrap_up_taken(3)
    assert answered.check(4, usage(0), True) is None and answered.message() is None


def test_a_wrap_up_never_said_taken_in_still_ends_at_the_limit() -> None:
    """A CLI that never confirms the message: one turn more than the grace, then abort."""
    budget = Budget({"turns": 3}, grace=1, graceful=True)
    assert budget.check(3, usage(0), False) == "wrap-up"
    assert budget.check(4, usage(0), False) is None
    assert budget.check(5, usage(0), False) == "abort"


# --------------------------------------------------------------------------- the child's stdin


def test_stdin_is_written_from_a_buffer_without_blocking() -> None:
    r, w = os.pipe()
    sel = selectors.DefaultSelector()
    writer = InputWriter(w, sel)
    data = b"x" * (4 << 20)  # far more than a pipe holds
    t0 = time.monotonic()
    assert writer.write(data)
    assert time.monotonic() - t0 < 5  # (never waits on the reader: a bound, not a timing)
    assert writer.buffer and sel.get_map()  # the rest waits for room
    got = bytearray()
    os.set_blocking(r, False)
    writer.close()  # closes once the buffer is out
    deadline = time.monotonic() + 30
    while not writer.closed and time.monotonic() < deadline:
        for key, _ in sel.select(0.1):
            key.data.on_writable()
        with contextlib.suppress(BlockingIOError):
            got += os.read(r, 1 << 20)
    while chunk := os.read(r, 1 << 20):
        got += chunk
    assert bytes(got) == data and writer.closed and not writer.write(b"more")
    os.close(r)
    sel.close()


def test_a_child_that_stopped_reading_drops_what_is_left() -> None:
    r, w = os.pipe()
    os.close(r)
    writer = InputWriter(w, selectors.DefaultSelector())
    writer.write(b"hello\n")
    assert writer.broken and writer.closed and not writer.buffer


@pytest.mark.process
def test_the_endpoint_answers_a_request_that_is_not_one(fake: Fake) -> None:
    gate = fake.dir / "gate"
    handle = start_claude(fake, claude_steps(gate))
    assert eventually(lambda: any(e["type"] == "tool_call" for e in events(handle)))
    reply = controlsock.request(handle.run_dir, {"op": "dance"}, 10)
    assert reply["receipt"] == "refused"
    gate.touch()
    handle.wait(timeout=60)


# --------------------------------------------------------------------------- the CLI's version


def test_an_npm_clis_version_is_read_from_its_package(tmp_path: Path) -> None:
    from subagents.backends import get_backend
    from subagents.runs import installed_version

    package = tmp_path / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"version": "0.87.1", "bin": {"pi": "dist/cli.js"}})
    )
    cli_js = package / "dist" / "cli.js"
    cli_js.write_text("#!/bin/sh\necho ran >> " + str(tmp_path / "ran") + "\n")
    cli_js.chmod(0o755)
    link = tmp_path / "pi"
    link.symlink_to(cli_js)
    assert (
        installed_version(get_backend("pi"), str(link), os.environ, tmp_path / "home") == "0.87.1"
    )
    assert not (tmp_path / "ran").exists()  # read, not run


def test_a_version_looked_up_without_a_probe_never_runs_the_cli(tmp_path: Path) -> None:
    """What a warm worker's rehearsal asks (``probe=False``): a version known (kept, or in
    its npm package) or none; the CLI itself is never run for it."""
    from subagents.backends import get_backend
    from subagents.runs import installed_version

    ran = tmp_path / "ran"
    wrapper = tmp_path / "pi-wrapper"
    wrapper.write_text(f"#!/bin/sh\necho x >> {ran}\necho 'pi 0.90.2'\n")
    wrapper.chmod(0o755)
    got = installed_version(get_backend("pi"), str(wrapper), os.environ, tmp_path, probe=False)
    assert got is None and not ran.exists()


@pytest.mark.process
def test_a_version_is_asked_once_and_a_failure_again(tmp_path: Path) -> None:
    from subagents.backends import get_backend
    from subagents.runs import installed_version

    log = tmp_path / "asked"
    wrapper = tmp_path / "pi-wrapper"
    wrapper.write_text(f"#!/bin/sh\necho x >> {log}\necho 'pi 0.90.2'\n")
    wrapper.chmod(0o755)
    home = tmp_path / "home"
    pi_backend = get_backend("pi")
    for _ in range(3):
        assert installed_version(pi_backend, str(wrapper), os.environ, home) == "0.90.2"
    assert log.read_text().count("x") == 1
    broken = tmp_path / "pi-broken"
    broken.write_text(f"#!/bin/sh\necho x >> {log}\nexit 1\n")
    broken.chmod(0o755)
    for _ in range(2):
        assert installed_version(pi_backend, str(broken), os.environ, home) is None
    assert log.read_text().count("x") == 3  # not kept: asked each time
