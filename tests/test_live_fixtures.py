"""The live-control captures (tests/fixtures/streams/live, issue 22): the facts about each
CLI's input path that docs/backends.md ("Each CLI's input path") states, pinned on the
captured streams, and what the normalizers make of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from subagents.testing.conformance import normalize_stream

LIVE = Path(__file__).parent / "fixtures" / "streams" / "live"
STEER = 'You said: "stop looping and say banana"'


def objs(name: str, part: str = "stdout") -> list[dict[str, Any]]:
    lines = (LIVE / f"{name}.{part}.jsonl").read_bytes().split(b"\n")
    return [json.loads(line) for line in lines if line.strip()]


def kinds(stream: list[dict[str, Any]]) -> list[str]:
    return [str(o.get("type") or o.get("method") or "response") for o in stream]


def test_every_capture_is_listed_and_whole() -> None:
    readme = (LIVE / "README.md").read_text()
    listed = set(re.findall(r"^\| ([\w.-]+)(?:, ([\w.-]+))? \|", readme, re.MULTILINE))
    names = {n for pair in listed for n in pair if n and n != "scenario"}
    files = {p.name.rsplit(".", 2)[0] for p in LIVE.glob("*.jsonl")}
    assert names == files
    for path in LIVE.glob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            # two lines sent on purpose are plain text: pi087.rpc.idle's and *.stdin-open's
            if line.strip() and line not in (b"not json", b"ALSO SAY PEAR"):
                assert isinstance(json.loads(line), dict), path.name


def test_pi_rpc_emits_the_json_mode_events_plus_responses() -> None:
    json_mode = [json.loads(line) for line in (LIVE.parent / "pi087.ls.jsonl").open()]
    rpc = objs("pi087.rpc.ls")
    assert kinds(json_mode)[0] == "session" and kinds(rpc)[0] == "response"
    assert kinds(json_mode)[1:] == kinds(rpc)[1:]


@pytest.mark.parametrize(
    ("name", "final", "tool_calls"),
    [
        ("pi087.rpc.steer", STEER, 1),
        ("pi087.rpc.follow-up", 'You said: "and one more: say plum"', 1),
        ("pi087.rpc.wrap-up", 'You said: "stop here and give your final answer now"', 2),
        ("pi073.rpc.steer", STEER, 1),
    ],
)
def test_the_pi_normalizer_reads_rpc_streams(name: str, final: str, tool_calls: int) -> None:
    norm, events = normalize_stream("pi", LIVE / f"{name}.stdout.jsonl")
    assert norm.final_text == final and norm.stop_reason == "stop"
    assert norm.tool_calls == tool_calls and norm.terminal and not norm.failed
    # what rpc adds (responses, queue updates, the user's own messages) yields no event yet
    assert {e["type"] for e in events} <= {
        "assistant_text",
        "tool_call",
        "tool_result",
        "usage",
    }


def test_pi_rpc_delivers_a_steer_as_a_user_message_and_settles() -> None:
    out = objs("pi087.rpc.steer")
    steer = next(i for i, o in enumerate(out) if o.get("command") == "steer")
    assert out[steer]["success"] is True
    queued = kinds(out).index("queue_update")
    delivered = next(
        i
        for i, o in enumerate(out)
        if o.get("type") == "message_end"
        and o["message"]["role"] == "user"
        and o["message"]["content"][0]["text"] == "stop looping and say banana"
    )
    assert queued < delivered and kinds(out)[delivered - 3 : delivered - 1] == [
        "turn_start",
        "queue_update",
    ]
    assert kinds(out)[-2:] == ["agent_end", "agent_settled"]
    assert "agent_settled" not in kinds(objs("pi073.rpc.steer"))


def test_pi_rpc_idle_messages_wait_for_a_prompt() -> None:
    out = objs("pi087.rpc.idle")
    assert kinds(out)[0] == "response"  # nothing ran for the task given in argv
    refused = {o["command"]: o["error"] for o in out if o.get("success") is False}
    assert set(refused) == {"parse", "no_such_command", "prompt"}
    assert "streamingBehavior" in refused["prompt"]
    start = kinds(out).index("agent_start")
    assert [o["command"] for o in out[:start] if o.get("type") == "response"] == [
        "get_state",
        "follow_up",
        "steer",
        "prompt",
    ]


def test_a_pi_rpc_abort_ends_in_an_error_message_and_settles_first() -> None:
    out = objs("pi087.rpc.abort")
    norm, _ = normalize_stream("pi", LIVE / "pi087.rpc.abort.stdout.jsonl")
    assert norm.stop_reason == "error" and norm.error_message == "This operation was aborted"
    assert kinds(out)[-3:] == ["agent_end", "agent_settled", "response"]
    assert out[-1]["command"] == "abort"


def results(name: str) -> list[dict[str, Any]]:
    return [o for o in objs(name) if o.get("type") == "result"]


def test_claude_takes_stdin_messages_mid_turn_and_after_a_result() -> None:
    (steered,) = results("claude.sj.steer")
    assert steered["result"] == STEER and steered["num_turns"] == 2
    first, second = results("claude.sj.follow-up")
    assert second["result"] == 'You said: "and now say cherry"'
    # usage is each result's own turn, the cost the session's running total
    assert (first["usage"]["input_tokens"], second["usage"]["input_tokens"]) == (20, 10)
    assert second["total_cost_usd"] == pytest.approx(first["total_cost_usd"] * 1.5)
    replays = [o for o in objs("claude.sj.replay") if o.get("isReplay")]
    assert [o["message"]["content"] for o in replays] == [
        "loop until told otherwise",
        "stop looping and say banana",
    ]
    assert [r["result"] for r in results("claude.sj.mid-answer")] == [
        "Hello from the mock model.",
        STEER,
    ]


@pytest.mark.parametrize(
    ("name", "subtype", "reason"),
    [
        ("claude.sj.max-turns", "error_max_turns", "max_turns"),
        ("claude.sj.max-budget", "error_max_budget_usd", "budget_exhausted"),
        ("claude.sj.interrupt", "error_during_execution", "aborted_tools"),
    ],
)
def test_claude_limits_and_interrupt_end_a_turn_not_the_session(
    name: str, subtype: str, reason: str
) -> None:
    first = results(name)[0]
    assert (first["subtype"], first["terminal_reason"], first["is_error"]) == (
        subtype,
        reason,
        True,
    )
    norm, _ = normalize_stream("claude", LIVE / f"{name}.stdout.jsonl")
    assert norm.terminal  # the last result read ends the run, as today


def test_codex_app_server_steers_interrupts_and_continues() -> None:
    out = objs("codex.app-server.steer")
    turn = next(o for o in out if o.get("id") == 3)["result"]["turn"]["id"]
    assert next(o for o in out if o.get("id") == 4)["result"] == {"turnId": turn}
    assert next(o for o in out if o.get("id") == 5)["error"]["code"] == -32600
    assert next(o for o in out if o.get("id") == 6)["error"]["message"] == "no active turn to steer"
    done = next(o for o in out if o.get("method") == "turn/completed")["params"]["turn"]
    assert done["status"] == "completed" and done["items"][-1]["text"] == STEER
    stopped = next(
        o for o in objs("codex.app-server.interrupt") if o.get("method") == "turn/completed"
    )
    assert stopped["params"]["turn"]["status"] == "interrupted"
    follow = [o for o in objs("codex.app-server.follow-up") if o.get("method") == "turn/completed"]
    assert len(follow) == 2
    assert "turn/completed" not in kinds(objs("codex.app-server.eof"))
