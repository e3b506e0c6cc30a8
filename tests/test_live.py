"""Live control end to end (issue 22): messages sent to a running child (steer, follow-up)
and budgets, through our own run path (``runs.start`` -> supervisor -> the real agent CLI)
against the looping mock model (a tool call every turn until a user message comes after the
task, then an answer quoting it). No network.

Each test is skipped, with its reason, when its CLI is not installed (``./scripts/setup
--test`` puts them in .tools).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.checks import eventually
from support.cli import invoke
from support.gate import GATED, held, reached
from support.liverun import Live

import subagents
from subagents.config import Settings
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.errors import MessageRefused
from subagents.runs import RunRequest, start

pytestmark = pytest.mark.e2e

STEER = "stop looping and say banana"
FOLLOW = "and now say cherry"
WRAP_UP = "stop here and give your final answer now"
PI_073 = (
    Path(__file__).resolve().parent.parent / ".tools" / "pi073" / "node_modules" / ".bin" / "pi"
)

# backend -> (model, config writer with the fewest retries; a price where the CLI takes one)
CLIS: dict[str, tuple[str, Callable[[Path, str], dict[str, str]]]] = {
    "pi": ("mock/mock-model", lambda d, url: mm.write_pi_config(d, url, price=(1000, 2000))),
    "claude": (mm.CLAUDE_MODEL, lambda d, url: mm.write_claude_config(d, url, max_retries=0)),
    "codex": (mm.CODEX_MODEL, lambda d, url: mm.write_codex_config(d, url)),
    "gemini": (mm.GEMINI_MODEL, lambda d, url: mm.write_gemini_config(d, url, max_attempts=1)),
    "opencode": (
        mm.OPENCODE_MODEL,
        lambda d, url: mm.write_opencode_config(d, url, price=(1000, 2000)),
    ),
}


def needs(name: str) -> Any:
    return pytest.mark.skipif(shutil.which(name) is None, reason=f"the {name} CLI is not installed")


def cli(*names: str) -> list[Any]:
    return [pytest.param(n, marks=needs(n)) for n in names]


@contextlib.contextmanager
def live_run(
    tmp_path: Path, backend: str, script: Script, binary: str | None = None, **kw: Any
) -> Iterator[Live]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    model, writer = CLIS[backend]
    with MockModelServer(script) as srv:
        env = writer(tmp_path / f"{backend}-config", srv.url)
        bins = {backend: binary} if binary else {}
        req = RunRequest(
            task="loop until told otherwise",
            backend=backend,
            cwd=str(work),
            env=env,
            model=model,
            **kw,
        )
        handle = start(req, Settings(default_backend=backend, bins=bins))
        try:
            yield Live(handle, srv)
        finally:
            if handle.result() is None:
                handle.stop()


def sent(live: Live) -> list[dict[str, Any]]:
    return [e for e in live.events() if e["type"] == "user_message"]


# --------------------------------------------------------------------------- steer


# One run for both: a steer while a tool runs, then a follow-up once its answer is given.
@pytest.mark.parametrize("backend", cli("pi", "claude", "codex"))
def test_a_steer_reaches_the_model_in_its_next_request_then_a_follow_up_is_answered_after(
    tmp_path: Path, backend: str
) -> None:
    with (
        held(tmp_path / "work") as release,
        live_run(tmp_path, backend, Script(loop=True, command=GATED)) as live,
    ):
        assert eventually(lambda: reached(tmp_path / "work"), 90), live.events()
        before = len(live.srv.requests)  # the tool waits: no model request is in flight
        receipt = subagents.send(live.handle.run_id, STEER)
        assert receipt["receipt"] in ("queued", "delivered") and receipt["mode"] == "steer"
        receipt = subagents.send(live.handle.run_id, FOLLOW, "follow-up")
        assert receipt["receipt"] == "queued" and "turn ends" in receipt.get("reason", "")
        release()
        assert STEER in live.request(before)  # the very next request carries it
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    answers = [e["text"] for e in live.events() if e["type"] == "assistant_text" and e["text"]]
    # the steer's answer, then the follow-up's, in one run
    assert answers[-2:] == [f'You said: "{STEER}"', f'You said: "{FOLLOW}"']
    assert result["finalText"] == f'You said: "{FOLLOW}"'
    assert result["messages"] == {"sent": 2, "delivered": 2}
    for mode in ("steer", "follow-up"):
        assert [e["receipt"] for e in sent(live) if e["mode"] == mode] == ["queued", "delivered"]
    transcript = Path(result["paths"]["transcript"]).read_text()
    assert f"> you → child (steer): {STEER}" in transcript
    assert "- ✓ the child took your steer" in transcript
    assert not (live.handle.run_dir / "control.sock").exists()  # gone with the run


def test_pi_073_refuses_messages_naming_its_version(tmp_path: Path) -> None:
    if not PI_073.exists():
        pytest.skip("pi 0.73.1 is not installed (./scripts/setup --test)")
    script = Script(loop=True, loop_limit=2, command=GATED)
    with (
        held(tmp_path / "work") as release,
        live_run(tmp_path, "pi", script, binary=str(PI_073)) as live,
    ):
        live.wait_for("run_started")
        meta = json.loads((live.handle.run_dir / "meta.json").read_text())
        assert meta["live"] is False and "--mode" in meta["argv"] and "json" in meta["argv"]
        for mode in ("steer", "follow-up"):
            with pytest.raises(MessageRefused, match=r"pi 0\.73\.1 takes no messages"):
                subagents.send(live.handle.run_id, STEER, mode)  # type: ignore[arg-type]
        release()
        assert live.result()["status"] == "completed"


# --------------------------------------------------------------------------- follow-up


@pytest.mark.parametrize("backend", cli("gemini", "opencode"))
def test_a_cli_without_input_refuses_a_steer_and_continues_after_a_follow_up(
    tmp_path: Path, backend: str
) -> None:
    """A CLI that takes no input while it runs refuses a steer in one line; a follow-up
    continues its conversation in a new process of the same run (the backend's resume, as
    ``subagents continue`` does: test_continue checks that path with the other CLIs)."""
    script = Script(loop=True, loop_limit=1, command=GATED, final_text="first answer")
    with held(tmp_path / "work") as release, live_run(tmp_path, backend, script) as live:
        # (opencode tells of a tool call once it has ended: its start is the gate's)
        assert eventually(lambda: reached(tmp_path / "work"), 90), live.events()
        with pytest.raises(MessageRefused, match=f"{backend} takes no messages while it runs"):
            subagents.send(live.handle.run_id, STEER)
        receipt = subagents.send(live.handle.run_id, FOLLOW, "follow-up")
        assert receipt["receipt"] == "queued"
        release()
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["finalText"] == f'You said: "{FOLLOW}"'
    starts = [e for e in live.events() if e["type"] == "run_started"]
    assert len(starts) == 2 and starts[0]["pid"] != starts[1]["pid"]  # two children, one run
    assert result["messages"] == {"sent": 1, "delivered": 1}  # the steer was never sent
    assert [e["mode"] for e in sent(live)] == ["follow-up", "follow-up"]  # queued, delivered
    assert result["usage"]["totalTokens"] > 30  # both children's
    # The second child resumed the first one's conversation: its request holds the task,
    # the first child's answer and the follow-up.
    last = json.dumps(live.srv.requests[-1])
    assert "loop until told otherwise" in last and "first answer" in last and FOLLOW in last


# --------------------------------------------------------------------------- budgets


# Each kind once and each CLI with live input once: what a kind counts is test_control's;
# the wrap-up is delivered as a steer whatever the kind (Live._act).
@pytest.mark.parametrize(
    ("backend", "kind", "limit"),
    [
        pytest.param("pi", "cost", 0.1, marks=needs("pi")),
        pytest.param("claude", "turns", 3, marks=needs("claude")),
        pytest.param("codex", "tokens", 100, marks=needs("codex")),
    ],
)
def test_a_budget_wraps_up_a_looping_child_that_then_answers(
    tmp_path: Path, backend: str, kind: str, limit: float
) -> None:
    script = Script(loop=True, loop_limit=20, command="sleep 0.2")
    with live_run(tmp_path, backend, script, **{f"max_{kind}": limit}) as live:
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["finalText"] == f'You said: "{WRAP_UP}"'
    record = result["limit"]
    assert record is not None and (record["kind"], record["action"]) == (kind, "wrap-up")
    # each turn here: 15 tokens, $0.02 (pi's price); an answer within one turn past the limit
    turn = {"turns": 1, "tokens": 15, "cost": 0.02}[kind]
    assert record["limit"] == limit and record["used"] <= limit + turn + 1e-9
    assert result["messages"] == {"sent": 1, "delivered": 1}
    assert [e["mode"] for e in sent(live)] == ["wrap-up", "wrap-up"]


@pytest.mark.parametrize("backend", cli("pi", "codex"))
def test_a_child_that_ignores_the_wrap_up_is_stopped_after_the_grace_turns(
    tmp_path: Path, backend: str
) -> None:
    script = Script(loop=True, loop_limit=20, heed_messages=False, command="sleep 0.2")
    with live_run(tmp_path, backend, script, max_turns=2) as live:
        result = live.result()
    assert result["status"] == "failed"
    assert result["limit"] == {
        "kind": "turns",
        "limit": 2,
        "used": 4,
        "action": "abort",
        "scope": "run",
    }
    assert result["errorMessage"] == (
        "stopped at the turn limit of 2 turns: 4 turns used (no answer to the wrap-up within 2 turns)"
    )
    assert result["toolCalls"] >= 3 and result["usage"]["totalTokens"] > 0  # partial work kept
    assert [(e["action"]) for e in live.events() if e["type"] == "limit"] == ["wrap-up", "abort"]


# (opencode's turns are counted as its cost is: one step, one turn; checked below.)
@pytest.mark.parametrize(("backend", "kind", "limit"), [
    pytest.param("opencode", "cost", 0.05, marks=needs("opencode")),
    pytest.param("gemini", "turns", 2, marks=needs("gemini")),
])  # fmt: skip
def test_without_input_a_budget_stops_the_child(
    tmp_path: Path, backend: str, kind: str, limit: float
) -> None:
    script = Script(loop=True, loop_limit=20, command="sleep 0.2")
    with live_run(tmp_path, backend, script, **{f"max_{kind}": limit}) as live:
        result = live.result()
    assert result["status"] == "failed"
    record = result["limit"]
    assert record is not None and (record["kind"], record["action"]) == (kind, "abort")
    turn = {"turns": 0, "cost": 0.02}[kind]
    assert limit <= record["used"] <= limit + turn + 1e-9
    assert result["errorMessage"].startswith(f"stopped at the {kind.rstrip('s')} limit of")
    if kind == "cost":  # each turn costs 0.02 (the price): as many turns counted as paid for
        usage = [e for e in live.events() if e["type"] == "usage"]
        assert usage and all(round(e["cost"] / turn) == e["turns"] for e in usage), usage


@needs("claude")
def test_claude_cost_is_bounded_by_its_own_flag_behind_ours(tmp_path: Path) -> None:
    """claude reports cost only with each result: its --max-budget-usd (checked after every
    model turn) ends the turn at the limit, and the result names our limit."""
    script = Script(loop=True, loop_limit=20, heed_messages=False, command="sleep 0.2")
    with live_run(tmp_path, "claude", script, max_cost=0.0005) as live:
        argv = json.loads((live.handle.run_dir / "meta.json").read_text())["argv"]
        assert "--max-budget-usd=0.0005" in argv
        result = live.result()
    assert result["status"] == "failed"
    assert result["limit"] is not None and result["limit"]["kind"] == "cost"
    assert result["limit"]["action"] == "abort" and result["limit"]["used"] >= 0.0005
    assert "the CLI's own bound behind it ended the run" in result["errorMessage"]


@needs("pi")
def test_a_job_budget_spans_its_runs(tmp_path: Path) -> None:
    """Two runs side by side, 4 turns for the job: when their sum reaches it, both wrap up."""
    work = tmp_path / "work"
    work.mkdir()
    with MockModelServer(Script(loop=True, loop_limit=30, command="sleep 0.3")) as srv:
        env = mm.write_pi_config(tmp_path / "pi-config", srv.url)
        task = {"task": "loop until told otherwise", "backend": "pi", "model": "mock/mock-model"}
        spec = {"mode": "parallel", "tasks": [task, task], "max_turns": 4}
        result = subagents.run(spec, cwd=work, env=env)
    assert result["status"] == "completed", [r.get("errorMessage") for r in result["runs"]]
    for run in result["runs"]:
        assert "paths" in run  # (a run's result.json, not a run never started)
        assert run["finalText"] == f'You said: "{WRAP_UP}"'
        assert run["limit"] is not None and run["limit"]["scope"] == "job"
        assert run["limit"]["kind"] == "turns" and run["limit"]["limit"] == 4


# --------------------------------------------------------------------------- surfaces


@needs("pi")
def test_send_from_the_command_line_to_a_job_with_one_running_run(tmp_path: Path) -> None:
    with live_run(tmp_path, "pi", Script(loop=True, command="sleep 1")) as live:
        live.wait_for("tool_call")
        job_id = json.loads((live.handle.run_dir / "meta.json").read_text())["jobId"]
        target = job_id or live.handle.run_id  # a bare run has no job: its own id
        p = invoke(["send", target, STEER], bound=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(("queued: steer m1 to run", "delivered: steer m1 to run"))
        assert live.result()["finalText"] == f'You said: "{STEER}"'
    p = invoke(["send", live.handle.run_id, "more"], bound=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"subagents: run {live.handle.run_id} has ended (completed)")
