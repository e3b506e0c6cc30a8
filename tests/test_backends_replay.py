"""Claude, Codex, Gemini and OpenCode backends: real captured streams replayed through
a real supervisor (the conformance kit), the normalizers' traps with hand-written
lines, and the command lines they build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.backends import get_backend, known_backends
from subagents.backends.base import CommandRequest, Normalizer
from subagents.backends.claude import ROOT_ALLOWED_TOOLS, ClaudeBackend
from subagents.backends.codex import CodexBackend
from subagents.backends.gemini import GeminiBackend
from subagents.backends.opencode import OpenCodeBackend
from subagents.config import Settings
from subagents.errors import UsageError
from subagents.runs import RunRequest, check_capabilities, start
from subagents.testing.conformance import Case, check_backend, normalize_stream
from subagents.testing.fakeagent import SCRIPT_ENV, write_launcher, write_script

STREAMS = Path(__file__).parent / "fixtures" / "streams"
LIVE = STREAMS / "live"
MOCK_ERROR = "mock invalid request: model is bad"
RUN_EVENTS = ("assistant_text", "tool_call", "tool_result", "usage")

# --------------------------------------------------------------------------- replay (conformance kit)

# What the captured successful claude run must come to.
CLAUDE_SUCCESS: dict[str, Any] = {
    "status": "completed",
    "final_text": "All done.",
    "stop_reason": "stop",
    "tool_calls": 1,
    "usage": {
        "input": 200,
        "output": 24,
        "cacheRead": 50,
        "cacheWrite": 100,
        "totalTokens": 374,
        "cost": 0.00135,
    },
    "model": "claude-sonnet-4-5",
    "event_types": RUN_EVENTS,
}

CASES: dict[str, tuple[str, Case]] = {
    "claude": (
        "claude",
        Case(
            STREAMS / "claude.jsonl",
            **CLAUDE_SUCCESS,
        ),
    ),
    "claude.partial": (
        "claude",
        Case(
            STREAMS / "claude.partial.jsonl",  # the same run, with stream_event lines
            **CLAUDE_SUCCESS,
        ),
    ),
    "claude.maxturns": (
        "claude",
        Case(
            STREAMS / "claude.maxturns.jsonl",
            status="failed",
            stop_reason="toolUse",
            tool_calls=1,
            usage={"input": 100, "output": 12, "cacheRead": 25, "cacheWrite": 50, "cost": 0.000675},
            error_contains="turn limit (error_max_turns) after 2 turns: Reached maximum number of turns (1)",
            exit_code=1,
            event_types=("tool_call", "tool_result", "error"),
        ),
    ),
    "codex": (
        "codex",
        Case(
            LIVE / "codex.app-server.ls.stdout.jsonl",
            status="completed",
            final_text="Listed: a.txt, b.py.",
            stop_reason="stop",
            tool_calls=1,
            usage={
                "input": 20,
                "output": 10,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 30,
                "cost": None,
            },
            event_types=RUN_EVENTS,
        ),
    ),
    "codex.error400": (
        "codex",
        Case(
            LIVE / "codex.app-server.error400.stdout.jsonl",
            status="failed",
            stop_reason="error",
            tool_calls=0,
            usage={"cost": None},
            error_contains="mock invalid request",
            exit_code=1,
        ),
    ),
    "gemini": (
        "gemini",
        Case(
            STREAMS / "gemini.jsonl",
            status="completed",
            final_text="All done.",
            stop_reason="stop",
            tool_calls=1,
            usage={
                "input": 320,
                "output": 30,
                "cacheRead": 80,
                "cacheWrite": 0,
                "totalTokens": 430,
                "cost": None,
            },
            model="gemini-2.5-flash",
            event_types=RUN_EVENTS,
        ),
    ),
    "gemini.error400": (
        "gemini",
        Case(
            STREAMS / "gemini.error400.jsonl",
            status="failed",
            stop_reason="error",
            tool_calls=0,
            usage={"cost": None},
            error_contains=f"API error: {MOCK_ERROR}",
            exit_code=144,  # HTTP 400 mod 256
        ),
    ),
    "opencode": (
        "opencode",
        Case(
            STREAMS / "opencode.jsonl",
            status="completed",
            final_text="All done.",
            stop_reason="stop",
            tool_calls=1,
            usage={
                "input": 200,
                "output": 24,
                "cacheRead": 40,
                "cacheWrite": 0,
                "totalTokens": 264,
                "cost": 0.0,
            },
            event_types=RUN_EVENTS,
        ),
    ),
    "opencode.error400": (
        "opencode",
        Case(
            STREAMS / "opencode.error400.jsonl",
            status="failed",
            stop_reason="error",
            tool_calls=0,
            error_contains=f"APIError (HTTP 400): {MOCK_ERROR}",
            exit_code=1,
        ),
    ),
}


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(CASES))
def test_captured_stream_conforms(name: str, tmp_path: Path) -> None:
    backend, case = CASES[name]
    assert not check_backend(backend, [case], tmp_path)


@pytest.mark.process
@pytest.mark.parametrize(
    "name", ["claude.maxturns", "codex.error400", "gemini.error400", "opencode.error400"]
)
def test_error_streams_fail_even_with_exit_zero(name: str, tmp_path: Path) -> None:
    """The outcome comes from the stream: a CLI that reports failure fails, whatever its exit code."""
    backend, case = CASES[name]
    case.exit_code = 0
    assert not check_backend(backend, [case], tmp_path)


def _replay_with_model(backend: str, stream: Path, model: str, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    script = write_script(work, [{"replay": str(stream)}, {"exit": 0}])
    launcher = write_launcher(work)
    b = get_backend(backend)
    env = {b.binary_env_var(): str(launcher), SCRIPT_ENV: str(script), "PATH": "/usr/bin:/bin"}
    handle = start(
        RunRequest(
            task="t", backend=backend, model=model, cwd=str(work), env={SCRIPT_ENV: str(script)}
        ),
        Settings(default_backend=backend, grace=0.25, kill_grace=1.0),
        env=env,
        home=work / "home",
    )
    result = handle.wait(timeout=60)
    assert result is not None
    return result


@pytest.mark.process
@pytest.mark.parametrize("backend", ["codex", "opencode"])
def test_requested_model_is_not_assumed(backend: str, tmp_path: Path) -> None:
    """Codex and OpenCode name no model in their stream: the result's model stays null."""
    stream = CASES[backend][1].stream
    result = _replay_with_model(backend, Path(stream), "some/requested-model", tmp_path)
    assert result["status"] == "completed"
    assert result["requestedModel"] == "some/requested-model"
    assert result["model"] is None


# --------------------------------------------------------------------------- normalizer traps


def feed_all(norm: Normalizer, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in lines:
        out.extend(norm.feed(line))
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


# Claude


def claude_assistant(
    msg_id: str, *blocks: dict[str, Any], parent: str | None = None
) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {
            "id": msg_id,
            "model": "claude-x",
            "content": list(blocks),
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 1},
        },
        "parent_tool_use_id": parent,
    }


def test_claude_success_subtype_with_is_error_is_a_failure() -> None:
    norm = get_backend("claude").normalizer()
    feed_all(norm, [claude_assistant("m1", {"type": "text", "text": "Working on it."})])
    assert not norm.terminal
    out = norm.feed(
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "api_error_status": 529,
            "result": "API Error: overloaded",
            "stop_reason": "end_turn",
            "total_cost_usd": 0.01,
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }
    )
    assert norm.terminal and norm.failed
    assert norm.error_message == "claude reported an error (API status 529): API Error: overloaded"
    assert norm.final_text == "Working on it."  # the error text is not the answer
    assert "error" in types(out)
    assert norm.usage["cost"] == 0.01


def test_claude_tool_use_turn_is_not_terminal_and_result_is() -> None:
    norm = get_backend("claude").normalizer()
    out = feed_all(
        norm,
        [
            claude_assistant("m1", {"type": "text", "text": "Let me look."}),
            claude_assistant(
                "m1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
            ),
        ],
    )
    assert norm.stop_reason == "toolUse" and not norm.terminal
    assert norm.usage["input"] == 10  # one message id: usage counted once, not per block
    out = norm.feed(
        {
            "type": "user",
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "a.txt"}],
                        "is_error": True,
                    }
                ]
            },
        }
    )
    assert out == [
        {
            "type": "tool_result",
            "toolCallId": "t1",
            "toolName": "Bash",
            "isError": True,
            "text": "a.txt",
            "truncated": False,
        }
    ]
    norm.feed(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "Done: a.txt",
            "stop_reason": "end_turn",
        }
    )
    assert norm.terminal and not norm.failed
    assert (norm.stop_reason, norm.raw_stop_reason, norm.final_text) == (
        "stop",
        "end_turn",
        "Done: a.txt",
    )


def test_claude_result_without_stop_reason_is_derived() -> None:
    norm = get_backend("claude").normalizer()
    norm.feed(
        {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "errors": ["boom"],
        }
    )
    assert norm.terminal and norm.failed
    assert (norm.stop_reason, norm.raw_stop_reason) == ("error", None)
    assert norm.error_message == "claude ended with error_during_execution: boom"


def test_claude_subagent_text_is_not_the_answer() -> None:
    norm = get_backend("claude").normalizer()
    out = feed_all(
        norm,
        [
            claude_assistant("m1", {"type": "text", "text": "Main answer."}),
            claude_assistant(
                "s1",
                {"type": "text", "text": "sub-agent chatter"},
                {"type": "tool_use", "id": "t9", "name": "Read", "input": {"file_path": "x"}},
                parent="t0",
            ),
        ],
    )
    assert norm.final_text == "Main answer."
    assert norm.tool_calls == 1 and "tool_call" in types(out)
    assert norm.usage["input"] == 10  # the sub-agent's usage is in the result, not summed here


def test_claude_skips_partial_message_lines_and_reports_retries() -> None:
    norm = get_backend("claude").normalizer()
    assert not norm.wants(b'{"type":"stream_event","event":{"type":"content_block_delta"}}')
    assert norm.wants(b'{"type":"assistant","message":{}}')
    out = norm.feed(
        {
            "type": "system",
            "subtype": "api_retry",
            "attempt": 2,
            "max_retries": 10,
            "retry_delay_ms": 1500,
            "error_status": 529,
        }
    )
    assert out == [
        {
            "type": "notice",
            "level": "warn",
            "message": "API request failed (529); retry 2/10 in 1.5s",
        }
    ]
    assert not norm.terminal


# Codex (app-server)


def notify(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": params}


@pytest.mark.process
def test_codex_error_notice_then_completed_turn_is_completed(tmp_path: Path) -> None:
    """An error codex retries is a notice; the turn completing after it is the end."""
    lines = [
        notify("turn/started", turn={"id": "t1", "status": "inProgress"}),
        notify("error", error={"message": "stream disconnected"}, willRetry=True),
        notify("item/completed", item={"id": "m1", "type": "agentMessage", "text": "Recovered."}),
        notify("thread/tokenUsage/updated", tokenUsage={"total": {"inputTokens": 50, "cachedInputTokens": 0, "outputTokens": 5}}),
        notify("turn/completed", turn={"id": "t1", "status": "completed"}),
    ]  # fmt: skip
    norm = get_backend("codex").normalizer()
    norm.feed(lines[0])
    out = norm.feed(lines[1])
    assert out == [
        {"type": "notice", "level": "warn", "message": "stream disconnected (codex retries)"}
    ]
    assert not norm.terminal and not norm.failed
    for line in lines[2:]:
        norm.feed(line)
    assert norm.terminal and not norm.failed and norm.final_text == "Recovered."
    assert norm.turns == 1 and norm.usage["totalTokens"] == 55
    # Through a real supervisor: completed, with the notice recorded.
    stream = tmp_path / "codex.retry.jsonl"
    stream.write_text("".join(json.dumps(line) + "\n" for line in lines))
    case = Case(
        stream,
        status="completed",
        final_text="Recovered.",
        stop_reason="stop",
        event_types=("notice",),
    )
    assert not check_backend("codex", [case], tmp_path / "work")


def test_codex_items_map_to_tool_calls() -> None:
    norm = get_backend("codex").normalizer()
    cmd = {
        "id": "i1",
        "type": "commandExecution",
        "command": "/bin/bash -c false",
        "aggregatedOutput": None,
        "exitCode": None,
        "status": "inProgress",
    }
    out = norm.feed(notify("item/started", item=cmd))
    assert out == [
        {"type": "tool_call", "toolCallId": "i1", "toolName": "command_execution", "args": {"command": "/bin/bash -c false"}}
    ]  # fmt: skip
    assert norm.stop_reason == "toolUse" and not norm.terminal
    done = {**cmd, "aggregatedOutput": "oops", "exitCode": 1, "status": "failed"}
    out = norm.feed(notify("item/completed", item=done))
    assert types(out) == ["tool_result"] and out[0]["isError"] and out[0]["text"] == "oops"
    # a file change arrives only completed: call and result together
    change = {
        "id": "i2",
        "type": "fileChange",
        "changes": [{"path": "a.py", "kind": {"type": "update"}, "diff": ""}],
        "status": "completed",
    }
    out = norm.feed(notify("item/completed", item=change))
    assert types(out) == ["tool_call", "tool_result"]
    assert out[0]["args"] == {"changes": [{"path": "a.py", "kind": "update"}]}
    assert out[1]["text"] == "update a.py" and not out[1]["isError"]
    mcp = {
        "id": "i3",
        "type": "mcpToolCall",
        "server": "fs",
        "tool": "read",
        "arguments": {},
        "result": None,
        "error": {"message": "denied"},
        "status": "failed",
    }
    out = norm.feed(notify("item/completed", item=mcp))
    assert out[-1]["isError"] and out[-1]["text"] == "denied"
    reasoning = {"id": "i4", "type": "reasoning", "summary": ["hmm"], "content": []}
    assert norm.feed(notify("item/completed", item=reasoning)) == [
        {"type": "thinking", "text": "hmm"}
    ]
    assert norm.tool_calls == 3  # fmt: skip


def test_codex_usage_counts_from_this_runs_first_turn() -> None:
    """The thread's running total, less what a resumed thread had before this run."""
    norm = get_backend("codex").normalizer()

    def usage(i: int, c: int, o: int) -> dict[str, Any]:
        total = {"inputTokens": i, "cachedInputTokens": c, "outputTokens": o}
        return notify("thread/tokenUsage/updated", tokenUsage={"total": total})

    assert norm.feed(usage(100, 40, 10)) == []  # the earlier runs' total, reported on resume
    norm.feed(notify("turn/started", turn={"id": "t1"}))
    norm.feed(usage(250, 100, 30))
    assert norm.usage == {
        "input": 90,
        "output": 20,
        "cacheRead": 60,
        "cacheWrite": 0,
        "totalTokens": 170,
        "cost": None,
    }
    assert norm.turns == 1 and norm.model is None  # fmt: skip


@pytest.mark.parametrize(
    ("status", "stop", "message"),
    [("failed", "error", "plain failure"), ("interrupted", "aborted", "the turn was interrupted")],
)
def test_codex_turn_that_did_not_complete(status: str, stop: str, message: str) -> None:
    norm = get_backend("codex").normalizer()
    norm.feed(
        notify(
            "turn/completed",
            turn={"id": "t", "status": status, "error": {"message": "plain failure"}},
        )
    )
    assert norm.terminal and norm.failed and norm.stop_reason == stop
    assert norm.error_message == message


def test_codex_requests_are_refused_never_left_waiting() -> None:
    """codex may ask its client (approvals, user input): a headless run says no at once."""
    norm = get_backend("codex").normalizer()
    out = norm.feed({"id": 7, "method": "item/commandExecution/requestApproval", "params": {}})
    assert types(out) == ["notice"]
    assert json.loads(out.writes[-1]) == {"id": 7, "result": {"decision": "decline"}}
    out = norm.feed({"id": "x", "method": "account/chatgptAuthTokens/refresh", "params": {}})
    assert json.loads(out.writes[-1])["error"]["code"] == -32601


def test_codex_steers_the_active_turn_and_starts_follow_ups(tmp_path: Path) -> None:
    """What the supervisor writes: the thread started with the run's settings, the task as a
    turn, a steer with the active turn's id, a late steer as the next turn."""
    norm = get_backend("codex").normalizer()
    prompt = tmp_path / "sp.md"
    prompt.write_text("be brief")
    fed = norm.begin(
        CommandRequest(task="list files", cwd="/w", model="m", system_prompt_file=str(prompt))
    )
    sent = [json.loads(line) for line in fed.writes]
    assert [m.get("method") for m in sent] == ["initialize", "initialized", "thread/start"]
    assert sent[2]["params"] == {
        "cwd": "/w",
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
        "model": "m",
        "developerInstructions": "be brief",
    }
    fed = norm.feed({"id": 2, "result": {"thread": {"id": "th"}}})
    turn_start = json.loads(fed.writes[-1])
    assert turn_start["params"] == {
        "threadId": "th",
        "input": [{"type": "text", "text": "list files"}],
        "clientUserMessageId": "task",
    }
    fed = norm.steer("m1", "too early")  # no turn yet: sent once it runs
    assert not fed.writes
    fed = norm.feed(notify("turn/started", turn={"id": "t1"}))
    steer = json.loads(fed.writes[-1])
    assert steer["method"] == "turn/steer" and steer["params"]["expectedTurnId"] == "t1"
    fed = norm.feed({"id": steer["id"], "result": {"turnId": "t1"}})
    assert list(fed.receipts) == [("m1", "queued", None)]
    fed = norm.feed(
        notify("item/started", item={"type": "userMessage", "id": "u", "clientId": "m1"})
    )
    assert fed.receipts[-1] == ("m1", "delivered", None)
    fed = norm.steer("m2", "late")
    late = json.loads(fed.writes[-1])
    norm.feed(notify("turn/completed", turn={"id": "t1", "status": "completed"}))
    # its answer has not come: wait for it (the run goes on, at rest no more)
    assert norm.terminal and norm.held_input() is not None
    fed = norm.feed(
        {"id": late["id"], "error": {"code": -32600, "message": "no active turn to steer"}}
    )
    assert norm.terminal and fed.receipts[-1][:2] == ("m2", "queued")
    fed = norm.held_input()  # at rest again: the late steer starts the next turn
    assert fed is not None
    assert json.loads(fed.writes[-1])["params"]["clientUserMessageId"] == "m2"  # fmt: skip


# Gemini


def test_gemini_accumulates_deltas_and_flushes_at_tool_use() -> None:
    norm = get_backend("gemini").normalizer()
    out = feed_all(
        norm,
        [
            {"type": "init", "model": "gemini-x"},
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": "Let me ", "delta": True},
            {"type": "message", "role": "assistant", "content": "check.", "delta": True},
            {
                "type": "tool_use",
                "tool_name": "run_shell_command",
                "tool_id": "c1",
                "parameters": {"command": "ls"},
            },
        ],
    )
    assert types(out) == ["assistant_text", "tool_call"]
    assert out[0]["text"] == "Let me check." and out[0]["stopReason"] == "toolUse"
    assert not norm.terminal
    out = feed_all(
        norm,
        [
            {
                "type": "tool_result",
                "tool_id": "c1",
                "status": "error",
                "error": {"type": "X", "message": "no such dir"},
            },
            {"type": "message", "role": "assistant", "content": "All ", "delta": True},
            {"type": "message", "role": "assistant", "content": "good.", "delta": True},
        ],
    )
    assert (
        out[0]["toolName"] == "run_shell_command"
        and out[0]["isError"]
        and out[0]["text"] == "no such dir"
    )
    assert not norm.terminal
    norm.feed(
        {
            "type": "result",
            "status": "success",
            "stats": {
                "total_tokens": 12,
                "input_tokens": 10,
                "output_tokens": 2,
                "cached": 4,
                "input": 6,
            },
        }
    )
    assert norm.terminal and not norm.failed
    assert (norm.final_text, norm.stop_reason, norm.model) == ("All good.", "stop", "gemini-x")
    assert norm.usage == {
        "input": 6,
        "output": 2,
        "cacheRead": 4,
        "cacheWrite": 0,
        "totalTokens": 12,
        "cost": None,
    }


def test_gemini_warning_is_not_the_end_and_truncation_is_length() -> None:
    norm = get_backend("gemini").normalizer()
    out = norm.feed(
        {"type": "error", "severity": "warning", "message": "Agent execution blocked: hook"}
    )
    assert out == [{"type": "notice", "level": "warn", "message": "Agent execution blocked: hook"}]
    assert not norm.terminal and not norm.failed
    feed_all(
        norm,
        [
            {"type": "message", "role": "assistant", "content": "Partial answ", "delta": True},
            {
                "type": "error",
                "severity": "error",
                "message": "Model response was truncated because it exceeded the token limit.",
            },
            {"type": "result", "status": "success", "stats": {}},
        ],
    )
    assert norm.terminal and not norm.failed
    assert (norm.stop_reason, norm.final_text) == ("length", "Partial answ")


def test_gemini_error_result_takes_the_message_of_the_error_line() -> None:
    norm = get_backend("gemini").normalizer()
    feed_all(
        norm,
        [
            {
                "type": "error",
                "severity": "error",
                "message": "The model response was blocked due to safety settings.",
            },
            {"type": "result", "status": "error", "stats": {}},
        ],
    )
    assert norm.terminal and norm.failed
    assert norm.error_message == "The model response was blocked due to safety settings."


# OpenCode


def oc_step_finish(reason: str, inp: int, out: int, cost: float = 0.01) -> dict[str, Any]:
    return {
        "type": "step_finish",
        "part": {
            "type": "step-finish",
            "reason": reason,
            "tokens": {
                "total": inp + out + 3,
                "input": inp,
                "output": out,
                "reasoning": 1,
                "cache": {"read": 2, "write": 0},
            },
            "cost": cost,
        },
    }


def test_opencode_tool_calls_step_then_stop_step() -> None:
    norm = get_backend("opencode").normalizer()
    tool = {
        "type": "tool_use",
        "part": {
            "type": "tool",
            "tool": "bash",
            "callID": "c1",
            "state": {"status": "completed", "input": {"command": "ls"}, "output": "a\n"},
        },
    }
    out = feed_all(
        norm, [{"type": "step_start", "part": {}}, tool, oc_step_finish("tool-calls", 10, 5)]
    )
    assert types(out) == ["tool_call", "tool_result", "usage"]
    assert norm.stop_reason == "toolUse" and not norm.terminal
    out = feed_all(
        norm,
        [
            {"type": "step_start", "part": {}},
            {"type": "text", "part": {"type": "text", "text": "Done."}},
            oc_step_finish("stop", 20, 7),
        ],
    )
    assert norm.terminal and not norm.failed
    assert (norm.final_text, norm.stop_reason, norm.raw_stop_reason) == ("Done.", "stop", "stop")
    assert norm.usage == {
        "input": 30,
        "output": 14,
        "cacheRead": 4,
        "cacheWrite": 0,
        "totalTokens": 48,
        "cost": pytest.approx(0.02),
    }
    assert norm.tool_calls == 1
    norm.feed({"type": "step_start", "part": {}})
    assert not norm.terminal  # another step after all: not the end


def test_opencode_error_event_fails_with_its_message() -> None:
    norm = get_backend("opencode").normalizer()
    norm.feed(
        {"type": "error", "error": {"name": "ProviderAuthError", "data": {"message": "bad key"}}}
    )
    assert norm.terminal and norm.failed
    assert norm.error_message == "ProviderAuthError: bad key"


def test_opencode_failed_tool_and_unfinished_step_text() -> None:
    norm = get_backend("opencode").normalizer()
    out = norm.feed(
        {
            "type": "tool_use",
            "part": {
                "tool": "read",
                "callID": "c2",
                "state": {"status": "error", "input": {"filePath": "x"}, "error": "not found"},
            },
        }
    )
    assert out[1]["isError"] and out[1]["text"] == "not found"
    norm.feed({"type": "text", "part": {"text": "half an answer"}})
    out = norm.finish()
    assert (
        types(out) == ["assistant_text"]
        and norm.final_text == "half an answer"
        and not norm.terminal
    )


def test_fixture_streams_normalize_directly() -> None:
    """The normalizers alone (no supervisor) on the captured streams."""
    norm, _ = normalize_stream("codex", LIVE / "codex.app-server.ls.stdout.jsonl")
    assert norm.model is None and norm.usage["cost"] is None
    norm, _ = normalize_stream("gemini", STREAMS / "gemini.error400.jsonl")
    assert (
        norm.failed
        and norm.model == "mock-bad"
        and norm.error_message == f"API error: {MOCK_ERROR}"
    )


# --------------------------------------------------------------------------- command lines


def req(task: str = "fix the bug", **kw: Any) -> CommandRequest:
    return CommandRequest(task=task, cwd="/work/repo", **kw)


def test_registry_knows_the_builtins() -> None:
    assert {"pi", "claude", "codex", "gemini", "opencode"} <= set(known_backends())
    assert isinstance(get_backend("claude"), ClaudeBackend)
    assert isinstance(get_backend("codex"), CodexBackend)
    assert isinstance(get_backend("gemini"), GeminiBackend)
    assert isinstance(get_backend("opencode"), OpenCodeBackend)


def test_claude_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    b = ClaudeBackend()
    monkeypatch.setattr(b, "_is_root", lambda: False)
    argv = b.build_argv(
        "/bin/claude",
        req(
            "-rf everything",
            model="claude-sonnet-4-5",
            tools=["Bash", "Read"],
            system_prompt="Be brief.",
        ),
    )
    assert argv == [
        "/bin/claude", "-p", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "bypassPermissions",
        "--model=claude-sonnet-4-5", "--tools=Bash,Read", "--append-system-prompt=Be brief.",
        "--", "-rf everything",
    ]  # fmt: skip
    assert b.build_argv("claude", req("hi", tools=[]))[-3] == "--tools="  # no tools at all


def test_claude_argv_as_root_uses_an_allow_list(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """claude refuses bypassPermissions for root; root gets allowed tools instead of prompts."""
    b = ClaudeBackend()
    monkeypatch.setattr(b, "_is_root", lambda: True)
    argv = b.build_argv("claude", req(tools=["Read"]))
    assert argv[5:9] == ["--permission-mode", "acceptEdits", "--allowedTools=Read", "--tools=Read"]
    assert "bypassPermissions" not in argv
    prompt = tmp_path / "sp.md"
    prompt.write_text("-From a file.")
    argv = b.build_argv("claude", req(system_prompt_file=str(prompt)))
    assert argv[7] == "--allowedTools=" + ",".join(ROOT_ALLOWED_TOOLS)
    assert "--append-system-prompt=-From a file." in argv
    assert argv[-2:] == ["--", "fix the bug"]


def test_codex_argv() -> None:
    """codex app-server: everything else goes over its protocol (see the test above)."""
    assert CodexBackend().build_argv("codex", req("-h", model="gpt-5")) == ["codex", "app-server"]
    extra = req("x", extra_args=["-c", "model_reasoning_effort=low"])
    assert CodexBackend().build_argv("codex", extra) == ["codex", "app-server", "-c", "model_reasoning_effort=low"]  # fmt: skip


def test_resume_argv_per_backend() -> None:
    """Continuing a run: each CLI's own way of resuming the earlier conversation."""
    from subagents.backends.claude import ClaudeBackend
    from subagents.backends.pi import PiBackend

    cont = req("go on", session_dir="/runs/new/session", resume="/runs/old/session/s.jsonl")
    pi_argv = PiBackend().build_argv("pi", cont)
    assert "--no-session" not in pi_argv
    i = pi_argv.index("--session-dir")
    assert pi_argv[i : i + 4] == [
        "--session-dir", "/runs/new/session", "--fork", "/runs/old/session/s.jsonl",
    ]  # fmt: skip
    assert "--no-session" in PiBackend().build_argv("pi", req("x"))  # nowhere to keep one
    claude_argv = ClaudeBackend().build_argv("claude", req("go on", resume="abc-123"))
    assert claude_argv[-4:] == ["--resume=abc-123", "--fork-session", "--", "go on"]
    codex = get_backend("codex").normalizer()
    fed = codex.begin(req("go on", resume="th-1"))  # thread/resume over the protocol
    resume = json.loads(fed.writes[-1])
    assert resume["method"] == "thread/resume" and resume["params"]["threadId"] == "th-1"
    oc_argv = OpenCodeBackend().build_argv("opencode", req("go on", resume="ses_1"))
    assert oc_argv[oc_argv.index("--session=ses_1") + 1] == "--fork"
    assert "--session=ses_1" not in OpenCodeBackend().build_argv("opencode", req("x"))
    gem_argv = GeminiBackend().build_argv("gemini", req("go on", resume="d9e9-uuid"))
    assert "--resume=d9e9-uuid" in gem_argv


def test_gemini_argv() -> None:
    argv = GeminiBackend().build_argv("gemini", req("--yolo please", model="gemini-2.5-flash"))
    assert argv == [
        "gemini", "--prompt=--yolo please", "--output-format", "stream-json", "--model=gemini-2.5-flash",
        "--approval-mode", "yolo", "--skip-trust",
    ]  # fmt: skip
    # A leading "/" would run a slash command (e.g. /init writes GEMINI.md).
    assert (
        GeminiBackend().build_argv("gemini", req("/init the repo"))[1] == "--prompt= /init the repo"
    )


def test_opencode_argv() -> None:
    argv = OpenCodeBackend().build_argv(
        "opencode", req("-x fix  42", model="anthropic/claude-sonnet-4-5")
    )
    assert argv == [
        "opencode", "run", "--format", "json", "--model=anthropic/claude-sonnet-4-5", "--auto",
        "--message=-x", "--message=fix", "--message=", "--message=42",
    ]  # fmt: skip
    # opencode strips one pair of outer quotes from an option value: quoted words get one more.
    argv = OpenCodeBackend().build_argv("opencode", req('say "hi" \'x\' "'))
    assert argv[-4:] == ["--message=say", '--message=""hi""', "--message=''x''", '--message="']


@pytest.mark.parametrize(
    ("backend", "tools", "system_prompt", "thinking"),
    [
        ("pi", True, True, True),
        ("claude", True, True, False),
        ("codex", False, True, False),
        ("gemini", False, False, False),
        ("opencode", False, False, False),
    ],
)
def test_capabilities(backend: str, tools: bool, system_prompt: bool, thinking: bool) -> None:
    b = get_backend(backend)
    assert (b.supports_tools, b.supports_system_prompt, b.supports_thinking) == (
        tools,
        system_prompt,
        thinking,
    )
    for wanted, supported in (
        (RunRequest(task="t", tools=["read"]), tools),
        (RunRequest(task="t", system_prompt="p"), system_prompt),
        (RunRequest(task="t", thinking="high"), thinking),
    ):
        if supported:
            check_capabilities(b, wanted)
        else:
            with pytest.raises(UsageError):
                check_capabilities(b, wanted)


def test_agent_tools_are_spelled_for_the_backend() -> None:
    from subagents.backends.claude import ClaudeBackend
    from subagents.backends.pi import PiBackend
    from subagents.backends.tools import tools_for

    # The built-in scout's pi names on claude (which has no LS: Glob lists too).
    assert tools_for("claude", ["read", "grep", "find", "ls"]) == ["Read", "Grep", "Glob"]
    # A Claude Code agent file on pi; an unknown (extension) tool passes through.
    assert tools_for("pi", ["Read", "Grep", "Glob", "LS", "MultiEdit", "my_ext_tool"]) == [
        "read",
        "grep",
        "find",
        "ls",
        "edit",
        "my_ext_tool",
    ]
    pi_argv = PiBackend().build_argv(
        "pi", CommandRequest(task="t", cwd="/w", tools=["Read", "Bash"])
    )
    assert pi_argv[pi_argv.index("--tools") + 1] == "read,bash"
    claude_argv = ClaudeBackend().build_argv(
        "claude", CommandRequest(task="t", cwd="/w", tools=["read", "bash"])
    )
    assert "--tools=Read,Bash" in claude_argv
