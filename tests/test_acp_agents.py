"""Real ACP agents, end to end through our run path: ``runs.start`` -> supervisor -> the
agent in ACP mode (``acp:gemini``, ``acp:qwen``, ``acp:claude`` and ``acp:codex``: Zed's
adapters, ``acp:opencode``) -> the loopback mock model. A task with a tool call, a model
error, a steer and then a follow-up, a budget, a schema answer, permissions under each policy,
a continuation (opencode: a tool call, a steer and a follow-up, a continuation; codex: a tool
call, a follow-up).

Each test is skipped, with its reason, when that agent is not installed
(``scripts/setup --test`` installs them).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.checks import eventually
from support.gate import GATED, held, reached
from support.liverun import Live

import subagents
from subagents.config import Settings
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.demo.mockmodel.acpclis import ACP_WRITERS, SHELL_TOOL
from subagents.runs import RunRequest, start

pytestmark = pytest.mark.e2e

BINARIES = {
    "gemini": "gemini",
    "qwen": "qwen",
    "claude": "claude-agent-acp",
    "opencode": "opencode",
    "codex": "codex-acp",
}
NO_USAGE = {"codex"}  # agents that report no token usage over ACP
FINAL = "Listed: {tool_output}."
STEER = "stop looping and say banana"
FOLLOW = "and now say cherry"


def agents(*names: str) -> list[Any]:
    return [
        pytest.param(
            n,
            marks=pytest.mark.skipif(
                shutil.which(BINARIES[n]) is None, reason=f"{BINARIES[n]} is not installed"
            ),
        )
        for n in names
    ]


@contextlib.contextmanager
def acp_run(
    tmp_path: Path, name: str, script: Script, task: str = "list files", **kw: Any
) -> Iterator[Live]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "a.txt").write_text("a\n")
    with MockModelServer(script) as srv:
        env = ACP_WRITERS[name](tmp_path / f"{name}-home", srv.url)
        req = RunRequest(task=task, backend=f"acp:{name}", cwd=str(work), env=env, **kw)
        handle = start(req, Settings(default_backend="pi"))
        try:
            yield Live(handle, srv)
        finally:
            if handle.result() is None:
                handle.stop()


def shell(name: str, **kw: Any) -> Script:
    return Script(tool_name=SHELL_TOOL[name], **kw)


def check_tool_call(name: str, result: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """A task with a tool call (``shell``) ran to its answer, and the run says so."""
    stderr = Path(result["paths"]["stderr"]).read_text()[-2000:]
    assert result["status"] == "completed", (result["errorMessage"], stderr)
    assert result["backend"] == f"acp:{name}"
    # The mock's answer quotes the tool's output: it reached the model.
    assert result["finalText"].startswith("Listed: ") and "a.txt" in result["finalText"]
    assert (result["stopReason"], result["rawStopReason"]) == ("stop", "end_turn")
    assert result["toolCalls"] >= 1
    assert any(e["type"] == "tool_call" for e in events)
    assert any(e["type"] == "tool_result" and not e["isError"] for e in events)
    # codex-acp 0.16 sends no usage (no usage_update, no PromptResponse usage): none counted.
    assert (result["usage"]["totalTokens"] > 0) == (name not in NO_USAGE)
    assert events[-1]["type"] == "run_finished"
    assert "ACP: " in next(e["message"] for e in events if e["type"] == "notice")


# The other agents' task with a tool call is the first run of their continuation test
# (continued): one agent process checked for both.
@pytest.mark.parametrize("name", agents("codex"))
def test_a_task_with_a_tool_call(tmp_path: Path, name: str) -> None:
    with acp_run(tmp_path, name, shell(name, final_text=FINAL)) as live:
        result = live.result()
    check_tool_call(name, result, live.events())


@pytest.mark.parametrize("name", agents("gemini", "qwen", "claude"))
def test_a_model_error_fails_the_run(tmp_path: Path, name: str) -> None:
    script = Script(error_status=400, error_times=-1, error_message="mock model is down")
    with acp_run(tmp_path, name, script) as live:
        result = live.result()
    assert result["status"] == "failed", result
    assert result["diagnostics"] and result["toolCalls"] == 0
    said = result["errorMessage"] + json.dumps(live.events())
    assert "mock model is down" in said or "400" in said, result["errorMessage"]


# (gemini's, qwen's and opencode's follow-up is the steered run's next prompt, below)
@pytest.mark.parametrize("name", agents("claude", "codex"))
def test_a_follow_up_is_the_next_prompt_of_the_same_session(tmp_path: Path, name: str) -> None:
    script = shell(name, loop=True, loop_limit=2, command=GATED)  # (going till let go)
    with (
        held(tmp_path / "work") as release,
        acp_run(tmp_path, name, script, task="loop until told otherwise") as live,
    ):
        assert eventually(lambda: reached(tmp_path / "work"), 90), live.events()
        receipt = subagents.send(live.handle.run_id, FOLLOW, "follow-up")
        assert receipt["receipt"] == "queued"
        release()
        result = live.result()
    assert result["status"] == "completed", result["errorMessage"]
    assert result["finalText"] == f'You said: "{FOLLOW}"'
    assert result["messages"] == {"sent": 1, "delivered": 1}
    starts = [e for e in live.events() if e["type"] == "run_started"]
    assert len(starts) == 1  # one agent process, one session


def answers(events: list[dict[str, Any]]) -> list[str]:
    """The texts of the turns' answers (a turn that goes on with tool calls has none)."""
    return [e["text"] for e in events if e["type"] == "assistant_text" and e["text"]]


# One agent process for both: the steered turn's answer, then a follow-up as the session's
# next prompt (sent while the steered turn runs: it waits for that turn's end).
@pytest.mark.parametrize("name", agents("gemini", "qwen", "opencode"))
def test_a_steer_cancels_the_turn_and_is_answered_then_a_follow_up_is_the_next_prompt(
    tmp_path: Path, name: str
) -> None:
    script = shell(name, loop=True, loop_limit=30, command="sleep 1")
    with acp_run(tmp_path, name, script, task="loop until told otherwise") as live:
        live.wait_for("tool_call")
        receipt = subagents.send(live.handle.run_id, STEER)
        assert receipt["receipt"] in ("queued", "delivered")
        receipt = subagents.send(live.handle.run_id, FOLLOW, "follow-up")
        assert receipt["receipt"] == "queued"
        result = live.result()
    assert result["status"] == "completed", result["errorMessage"]
    events = live.events()
    # the steer answered in its own turn, then the follow-up in the next
    assert answers(events)[-2:] == [f'You said: "{STEER}"', f'You said: "{FOLLOW}"']
    assert result["finalText"] == f'You said: "{FOLLOW}"'
    assert result["messages"] == {"sent": 2, "delivered": 2}
    assert len(live.srv.requests) < 30  # it stopped looping
    starts = [e for e in events if e["type"] == "run_started"]
    assert len(starts) == 1  # one agent process, one session


@pytest.mark.parametrize("name", agents("gemini"))
def test_a_turn_budget_wraps_up(tmp_path: Path, name: str) -> None:
    script = shell(name, loop=True, loop_limit=30, command="sleep 0.2")
    with acp_run(tmp_path, name, script, task="loop until told otherwise", max_turns=2) as live:
        result = live.result()
    assert result["status"] == "completed", result["errorMessage"]
    assert result["limit"]["kind"] == "turns" and result["limit"]["action"] == "wrap-up"
    assert result["finalText"].startswith('You said: "stop here')
    assert any(e["type"] == "limit" for e in live.events())


# qwen: its preset starts it in the approval mode that asks (in its own default, `auto`, its
# model judges each call and a write under `deny` was made).
@pytest.mark.parametrize(("policy", "allowed"), [("allow", True), ("deny", False)])
@pytest.mark.parametrize("name", agents("gemini", "qwen"))
def test_a_permission_request_under_each_policy(
    tmp_path: Path, name: str, policy: str, allowed: bool
) -> None:
    target = tmp_path / "work" / "new.txt"
    script = Script(tool_name="write_file", tool_args={"file_path": str(target), "content": "hi\n"})
    with acp_run(tmp_path, name, script, task="write it", permissions=policy) as live:
        result = live.result()
    assert result["status"] == "completed", result["errorMessage"]
    notices = [e["message"] for e in live.events() if e["type"] == "notice"]
    word = "allowed" if allowed else "denied"
    assert any(n.startswith(f"permission {word}: edit") for n in notices), notices
    assert target.exists() == allowed


@pytest.mark.parametrize("name", agents("gemini"))
def test_ask_waits_in_the_inbox_for_a_decision(tmp_path: Path, name: str) -> None:
    """--approvals ask (docs/approvals.md): the agent's permission request waits in the
    inbox, with the options it offered, until decided. Both choices in one run: the model
    asks for the same write twice, denied, then allowed."""
    target = tmp_path / "work" / "new.txt"
    args = {"file_path": str(target), "content": "hi\n"}
    script = Script(tool_name="write_file", tool_args=args, loop=True, loop_limit=2)
    with acp_run(tmp_path, name, script, task="write it", approvals="ask") as live:
        decided: list[str] = []
        for choice in ("deny", "allow"):
            assert eventually(lambda: waiting(decided), timeout=120), live.events()
            (item,) = waiting(decided)
            assert item["tool"] == "Edit" and item["input"]["options"]
            assert not target.exists()  # nothing written while it waits, nor once denied
            subagents.decide(item["id"], choice)  # type: ignore[arg-type]
            decided.append(item["id"])
        result = live.result()
    assert result["status"] == "completed", result["errorMessage"]
    assert target.exists()  # allowed
    assert [record["choice"] for record in result["approvals"]] == ["deny", "allow"]


def waiting(decided: list[str]) -> list[Any]:
    """The inbox's items not decided yet (a decided one may still be listed a moment)."""
    return [item for item in subagents.inbox() if item["id"] not in decided]


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
ANSWER = FINAL + '\n```json\n{"n": 3}\n```'


def continued(tmp_path: Path, name: str) -> tuple[dict[str, Any], dict[str, Any], Live]:
    """A task with a tool call and an output schema (check_tool_call, and its answer's JSON
    read), then a run continuing it: the session loaded in a new agent process."""
    with acp_run(tmp_path, name, shell(name, final_text=ANSWER), output_schema=SCHEMA) as live:
        first = live.result()
        check_tool_call(name, first, live.events())
        assert first["structured"] == {"n": 3}
        assert "JSON Schema" in json.dumps(live.srv.requests[0])  # the task carried the schema
        assert first["sessionId"]
        req = RunRequest(
            task="and again",
            backend=f"acp:{name}",
            cwd=first["cwd"],
            env=ACP_WRITERS[name](tmp_path / f"{name}-home", live.srv.url),
            continue_from=first["runId"],
        )
        second = start(req, Settings()).wait(timeout=180)
    assert second is not None
    return first, dict(second), live


@pytest.mark.parametrize("name", agents("qwen", "claude", "opencode"))
def test_continue_loads_the_session(tmp_path: Path, name: str) -> None:
    first, second, live = continued(tmp_path, name)
    assert second["status"] == "completed", second["errorMessage"]
    assert second["continuedFrom"] == first["runId"]
    # The mock answers again from the tool output the loaded conversation holds.
    assert second["finalText"] == first["finalText"]
    assert "list files" in json.dumps(live.srv.requests[-1])  # the old conversation came along


@pytest.mark.parametrize("name", agents("gemini"))
def test_gemini_061_loading_its_own_session_is_said_either_way(tmp_path: Path, name: str) -> None:
    """Gemini CLI 0.61 advertises loadSession, but whether its session/load finds the session
    is a race inside gemini: its new session config may start the session's record anew
    (no resumable content) before it lists the records, or after. Either way the run says
    what happened: the conversation continued, or the agent's own words for why not."""
    first, second, _ = continued(tmp_path, name)
    if second["status"] == "completed":
        assert second["continuedFrom"] == first["runId"]
        # The answer to "and again" is the first one again (the mock answers from the tool
        # output the conversation holds). Gemini 0.61 may also send its replay of the old
        # answer after its session/load response, against ACP's order (replay, then the
        # response), so the replay can come ahead of it: the answer twice.
        assert second["finalText"] in (first["finalText"], first["finalText"] * 2)
        return
    assert second["status"] == "failed"
    message = second["errorMessage"]
    assert message.startswith(f"the agent could not load session {second_session(second)}")
    assert message.endswith(": Internal error: No previous sessions found for this project.")


def second_session(result: dict[str, Any]) -> str:
    meta = json.loads((Path(result["paths"]["events"]).parent / "meta.json").read_text())
    return str(meta["command"]["resume"])
