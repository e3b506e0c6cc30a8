"""The ACP backend without a real agent: its protocol (the normalizer fed ACP messages), the
client side (files and permissions, against a scripted agent that asks for what no real
agent asks on demand), and bad input: an unknown preset, a command that is no ACP agent,
one that never answers initialize, one of another protocol version."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.checks import eventually
from support.cli import invoke

import subagents
from subagents.backends import get_backend
from subagents.backends.acpnorm import STEER_HELD, AcpNormalizer
from subagents.backends.base import CommandRequest
from subagents.config import AcpPreset, Settings
from subagents.errors import UsageError
from subagents.runs import RunRequest, start

AGENT = Path(__file__).parent / "support" / "acpagent.py"


def agent_command(*args: str) -> str:
    return shlex.join([sys.executable, str(AGENT), *args])


def run_fake(
    tmp_path: Path, *args: str, settings: Settings | None = None, **kw: Any
) -> dict[str, Any]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    req = RunRequest(
        task="say hi", backend="acp", cwd=str(work), acp_command=agent_command(*args), **kw
    )
    handle = start(req, settings or Settings(grace=0.25, kill_grace=1.0))
    result = handle.wait(timeout=60)
    assert result is not None, "the run did not end"
    return dict(result)


def events(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(result["paths"]["events"]).read_text().splitlines()]


def child_gone(result: dict[str, Any]) -> bool:
    started = next(e for e in events(result) if e["type"] == "run_started")
    try:  # (it may be reaped between the two looks)
        proc = psutil.Process(started["pid"])
        return proc.create_time() != started["createTime"] or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# ---- the protocol ---------------------------------------------------------------------


def started(norm: AcpNormalizer, tmp_path: Path, **acp: Any) -> list[dict[str, Any]]:
    """The normalizer through initialize and session/new: the requests it wrote."""
    record = {"command": ["agent"], "permissions": "allow", "initTimeout": 5.0, **acp}
    begun = norm.begin(CommandRequest(task="the task", cwd=str(tmp_path), acp=record))  # type: ignore[arg-type]
    initialized = norm.feed({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})
    ready = norm.feed({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s"}})
    assert ready.terminal is False  # the task's turn runs
    return [json.loads(x) for fed in (begun, initialized, ready) for x in fed.writes]


def update(what: str, **fields: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": what, **fields}},
    }


def test_handshake_then_the_task_as_a_prompt(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    sent = started(norm, tmp_path)
    assert [m["method"] for m in sent] == ["initialize", "session/new", "session/prompt"]
    assert sent[0]["params"]["protocolVersion"] == 1
    assert sent[0]["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": False,
    }
    assert sent[1]["params"] == {"cwd": str(tmp_path), "mcpServers": []}
    assert sent[2]["params"] == {"sessionId": "s", "prompt": [{"type": "text", "text": "the task"}]}
    assert not norm.handshaking and norm.session_id is None and norm.turns == 1  # not loadable
    assert norm.handshake_overdue() is None  # answered: the deadline passes by


def test_an_unanswered_handshake_fails_the_run(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    record = {"command": ["/bin/agent"], "permissions": "allow", "initTimeout": 2.5}
    norm.begin(CommandRequest(task="t", cwd=str(tmp_path), acp=record))  # type: ignore[arg-type]
    assert norm.handshake_timeout == 2.5
    overdue = norm.handshake_overdue()
    assert overdue is not None and overdue.terminal is True and norm.failed
    assert [e["type"] for e in overdue] == ["error"]
    assert (
        norm.error_message == "agent did not answer initialize within 2.5 s (is it an ACP agent?)"
    )


def test_a_turn_with_a_tool_call_as_canonical_events(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    started(norm, tmp_path)
    out = norm.feed(update("agent_thought_chunk", content={"type": "text", "text": "hmm"}))
    out += norm.feed(update("agent_message_chunk", content={"type": "text", "text": "Let me "}))
    out += norm.feed(update("agent_message_chunk", content={"type": "text", "text": "look."}))
    call = norm.feed(
        update("tool_call", toolCallId="t1", title="ls", kind="execute", rawInput={"command": "ls"})
    )
    assert call.terminal is False and not call.writes
    out += call
    out += norm.feed(
        update(
            "tool_call_update",
            toolCallId="t1",
            status="completed",
            content=[{"type": "content", "content": {"type": "text", "text": "a.txt"}}],
        )
    )
    out += norm.feed(update("plan", entries=[{"content": "list", "status": "completed"}]))
    out += norm.feed(update("agent_message_chunk", content={"type": "text", "text": "Done."}))
    out += norm.feed(
        update("usage_update", used=5, size=100, cost={"amount": 0.5, "currency": "USD"})
    )
    usage = {"inputTokens": 30, "outputTokens": 7, "cachedReadTokens": 10, "totalTokens": 37}
    end = norm.feed(
        {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn", "usage": usage}}
    )
    assert end.terminal is True
    out += end
    kinds = [e["type"] for e in out]
    assert kinds == [
        "thinking",
        "assistant_text",
        "tool_call",
        "tool_result",
        "notice",
        "usage",
        "usage",
        "assistant_text",
    ]
    first = out[1]
    assert first["type"] == "assistant_text" and first["text"] == "Let me look."
    assert first["stopReason"] == "toolUse"
    assert out[2] == {
        "type": "tool_call",
        "toolCallId": "t1",
        "toolName": "execute",
        "args": {"command": "ls"},
    }
    assert out[3]["type"] == "tool_result" and out[3]["text"] == "a.txt" and not out[3]["isError"]
    assert out[4]["type"] == "notice" and out[4]["message"] == "plan: [x] list"
    assert norm.terminal and not norm.failed
    assert (norm.stop_reason, norm.raw_stop_reason, norm.final_text) == (
        "stop",
        "end_turn",
        "Done.",
    )
    assert norm.usage == {
        "input": 20,
        "output": 7,
        "cacheRead": 10,
        "cacheWrite": 0,
        "totalTokens": 37,
        "cost": 0.5,
    }
    assert norm.tool_calls == 1 and norm.turns == 2


@pytest.mark.parametrize(
    ("raw", "stop", "failed"),
    [
        ("end_turn", "stop", False),
        ("max_tokens", "length", False),
        ("max_turn_requests", "error", True),
        ("refusal", "error", True),
        ("cancelled", "aborted", True),
    ],
)
def test_stop_reasons(tmp_path: Path, raw: str, stop: str, failed: bool) -> None:
    norm = AcpNormalizer()
    started(norm, tmp_path)
    norm.feed(update("agent_message_chunk", content={"type": "text", "text": "x"}))
    norm.feed({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": raw}})
    assert norm.terminal
    assert (norm.stop_reason, norm.raw_stop_reason, norm.failed) == (stop, raw, failed)


def test_a_steer_cancels_the_turn_and_prompts_with_it(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    started(norm, tmp_path)
    steered = norm.steer("m1", "change course")
    assert [json.loads(x)["method"] for x in steered.writes] == ["session/cancel"]
    assert steered.receipts == (("m1", "queued", STEER_HELD),)
    cancelled = norm.feed({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}})
    assert cancelled.terminal is False and not norm.failed
    (line,) = cancelled.writes
    prompt = json.loads(line)
    assert prompt["method"] == "session/prompt"
    assert prompt["params"]["prompt"][0]["text"] == "change course"
    assert cancelled.receipts == (("m1", "delivered", None),)
    ended = norm.feed({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}})
    assert ended.terminal is True and norm.stop_reason == "stop"
    assert norm.held_input() is None


def test_a_steer_that_comes_as_the_turn_ends_is_the_next_turn(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    started(norm, tmp_path)
    norm.feed({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    steered = norm.steer("m1", "one more thing")  # at rest: no turn to cancel
    assert steered.writes == () and steered.receipts == (("m1", "queued", None),)
    held = norm.held_input()
    assert held is not None and held.terminal is False and not norm.terminal
    assert json.loads(held.writes[0])["params"]["prompt"][0]["text"] == "one more thing"
    assert held.receipts == (("m1", "delivered", None),)


def test_an_abort_is_a_cancel_and_the_turn_ends_aborted(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    started(norm, tmp_path)
    aborting = norm.abort()
    assert json.loads(aborting.writes[-1]) == {
        "method": "session/cancel",
        "params": {"sessionId": "s"},
        "jsonrpc": "2.0",
    }
    norm.feed({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}})
    assert norm.terminal and norm.failed and norm.stop_reason == "aborted"


def test_continue_loads_the_session_and_skips_its_replay(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    record = {"command": ["a"], "permissions": "allow", "initTimeout": 5.0}
    norm.begin(CommandRequest(task="more", cwd=str(tmp_path), resume="old", acp=record))  # type: ignore[arg-type]
    caps = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    loading = norm.feed({"jsonrpc": "2.0", "id": 1, "result": caps})
    assert json.loads(loading.writes[-1])["method"] == "session/load"
    replay = norm.feed(
        update("agent_message_chunk", content={"type": "text", "text": "old answer"})
    )
    assert replay == []
    loaded = norm.feed({"jsonrpc": "2.0", "id": 2, "result": None})
    assert norm.session_id == "old" and json.loads(loaded.writes[-1])["method"] == "session/prompt"
    norm.feed({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    assert norm.final_text == ""  # the replayed answer is not this run's


def test_continue_is_refused_where_the_agent_cannot_load(tmp_path: Path) -> None:
    norm = AcpNormalizer()
    record = {"command": ["a"], "permissions": "allow", "initTimeout": 5.0}
    norm.begin(CommandRequest(task="more", cwd=str(tmp_path), resume="old", acp=record))  # type: ignore[arg-type]
    norm.feed({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})
    assert norm.failed and norm.terminal
    assert (
        norm.error_message
        == "the agent does not advertise loadSession: its runs cannot be continued"
    )


# ---- the client side, through a real supervisor ----------------------------------------


@pytest.mark.process
def test_files_and_permissions_inside_the_tree_only(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    inside, outside = work / "new.txt", tmp_path / "outside.txt"
    result = run_fake(tmp_path, "client", str(inside), str(outside))
    assert result["status"] == "completed", result["errorMessage"]
    got = json.loads(result["finalText"])
    assert got["write_inside"] is None and inside.read_text() == "x\n"
    assert got["read_inside"] == {"content": "x\n"}
    assert got["permission_inside"] == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    # Outside the tree: refused with an error the agent sees, and nothing written.
    assert not outside.exists()
    for key in ("write_outside", "read_outside"):
        assert "outside the run's working directory" in got[key]["error"]["message"]
    assert got["permission_outside"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert got["terminal"]["error"]["code"] == -32601  # terminals are not served
    notices = [e["message"] for e in events(result) if e["type"] == "notice"]
    assert any("write refused" in n and str(outside) in n for n in notices)
    assert any(n.startswith("permission allowed: edit") for n in notices)
    assert any(n.startswith("permission denied: edit") and "outside" in n for n in notices)


@pytest.mark.process
def test_a_symlink_out_of_the_tree_is_outside(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret").mkdir()
    (work / "link").symlink_to(tmp_path / "secret")
    result = run_fake(tmp_path, "client", str(work / "in.txt"), str(work / "link" / "x.txt"))
    got = json.loads(result["finalText"])
    assert "error" in got["write_outside"] and not (tmp_path / "secret" / "x.txt").exists()


@pytest.mark.process
def test_policy_deny_denies_every_permission(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    result = run_fake(
        tmp_path, "client", str(work / "a.txt"), str(tmp_path / "b.txt"), permissions="deny"
    )
    got = json.loads(result["finalText"])
    assert got["permission_inside"]["outcome"]["optionId"] == "no"
    assert got["permission_outside"]["outcome"]["optionId"] == "no"


@pytest.mark.process
@pytest.mark.parametrize("flag", [{"permissions": "ask"}, {"approvals": "ask"}])
def test_ask_hands_each_permission_request_to_the_inbox(
    tmp_path: Path, flag: dict[str, str]
) -> None:
    """--permissions ask (or --approvals ask): each request waits in the inbox with the
    options the agent offered; the decision selects the option of its kind ("always" where
    the agent offers no allow_always: its allow_once), or cancels when none is offered."""
    work = tmp_path / "work"
    work.mkdir()
    inside, outside = work / "a.txt", tmp_path / "b.txt"
    req = RunRequest(
        task="say hi",
        backend="acp",
        cwd=str(work),
        acp_command=agent_command("client", str(inside), str(outside)),
        **flag,  # type: ignore[arg-type]
    )
    handle = start(req, Settings(grace=0.25, kill_grace=1.0))
    decided = []
    for choice in ("deny", "always"):
        assert eventually(lambda: subagents.inbox(), timeout=60)
        (item,) = subagents.inbox()
        assert item["tool"] == "Edit" and item["backend"] == "acp"
        kinds = [o["kind"] for o in item["input"]["options"]]
        assert kinds == ["allow_once", "reject_once"]
        decided.append((item["input"]["file_path"], subagents.decide(item["id"], choice)))
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed", result
    got = json.loads(result["finalText"])
    assert got["permission_inside"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    # (the person decides, not the tree: a path outside it may be allowed)
    assert got["permission_outside"] == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    assert [path for path, _ in decided] == [str(inside), str(outside)]
    assert [r["choice"] for r in result["approvals"]] == ["deny", "always"]


@pytest.mark.process
def test_a_users_preset_from_config(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    preset = AcpPreset(command=[sys.executable, str(AGENT), "normal"], env={"X_PRESET": "1"})
    settings = Settings(acp={"mine": preset})
    handle = start(RunRequest(task="hello there", backend="acp:mine", cwd=str(work)), settings)
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    assert result["finalText"] == "hello there" and result["backend"] == "acp:mine"


# ---- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "acp:nope"], "unknown ACP preset 'nope' (known: acp:claude, acp:codex"),
        (["--backend", "acp"], "--backend acp needs --acp-command"),
        (["--backend", "acp", "--acp-command", "'unclosed"], "--acp-command: No closing quotation"),
        (
            ["--backend", "acp:gemini", "--permissions", "deny", "--approvals", "ask"],
            "--permissions: --approvals decides the permissions: give one of them",
        ),
        (["--backend", "pi", "--permissions", "deny"], "--permissions: only for ACP agents"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], needle: str, isolated_state: Path
) -> None:
    p = invoke(["run", *args, "x"], {"SUBAGENTS_ACP_GEMINI_BIN": sys.executable})
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert p.stdout == ""
    assert not (isolated_state / "runs").exists() or not any((isolated_state / "runs").iterdir())


@pytest.mark.process
def test_a_command_that_is_no_acp_agent(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for command, needle in (
        ("echo hello", "echo is not an ACP agent, or it ended before answering initialize"),
        (
            shlex.join([sys.executable, "-c", "print('usage: tool [options]'); exit(3)"]),
            "exited with code 3",
        ),
    ):
        req = RunRequest(task="x", backend="acp", cwd=str(work), acp_command=command)
        result = start(req, Settings(grace=0.25, kill_grace=1.0)).wait(timeout=60)
        assert result is not None and result["status"] == "failed"
        assert needle in (result["errorMessage"] or ""), result["errorMessage"]
        assert "not an ACP agent" in (result["errorMessage"] or "")
        assert result["diagnostics"] and child_gone(dict(result))


@pytest.mark.process
def test_an_agent_that_never_answers_initialize(tmp_path: Path) -> None:
    settings = Settings(acp_init_timeout=1.0, grace=0.25, kill_grace=1.0)
    result = run_fake(tmp_path, "silent", settings=settings)
    assert result["status"] == "failed"
    program = Path(sys.executable).name
    assert result["errorMessage"] == (
        f"{program} did not answer initialize within 1 s (is it an ACP agent?)"
    )
    assert result["diagnostics"] and child_gone(result)


@pytest.mark.process
def test_another_protocol_version(tmp_path: Path) -> None:
    result = run_fake(tmp_path, "version2")
    assert result["status"] == "failed"
    assert result["errorMessage"] == (
        "the agent speaks ACP protocol version 2; subagents speaks version 1"
    )
    assert child_gone(result)


def test_the_backend_names_its_presets() -> None:
    backend = get_backend("acp:qwen")
    assert backend.name == "acp:qwen" and backend.default_binary == "qwen"
    assert backend.binary_env_var() == "SUBAGENTS_ACP_QWEN_BIN"
    with pytest.raises(UsageError, match="unknown ACP preset"):
        from subagents.runs.acpcheck import acp_record

        acp_record(get_backend("acp:zzz"), RunRequest(task="x"), Settings())


def test_presets_in_config_from_the_user_only(tmp_path: Path) -> None:
    from subagents.config import load_settings
    from subagents.errors import ConfigError

    user = tmp_path / "config"
    user.mkdir(exist_ok=True)
    (user / "config.toml").write_text(
        '[acp.mine]\ncommand = ["my-agent", "--acp"]\nenv = { MY_KEY = "1" }\n'
    )
    project = tmp_path / "repo"
    (project / ".subagents").mkdir(parents=True)
    env = {"SUBAGENTS_CONFIG_DIR": str(user), "HOME": str(tmp_path)}
    settings = load_settings(tmp_path, env)
    assert settings.acp["mine"] == AcpPreset(command=["my-agent", "--acp"], env={"MY_KEY": "1"})
    (project / ".subagents" / "config.toml").write_text('[acp.evil]\ncommand = ["sh"]\n')
    with pytest.raises(ConfigError, match="acp"):
        load_settings(project, env)


@pytest.mark.process
def test_doctor_lists_each_preset_with_what_it_advertises(tmp_path: Path) -> None:
    from subagents.cli.doctor import check_backend, check_backends

    presets = {
        "mine": AcpPreset(command=[sys.executable, str(AGENT), "normal"]),
        "mute": AcpPreset(command=[sys.executable, str(AGENT), "silent"]),
    }
    settings = Settings(acp=presets, acp_init_timeout=2.0)
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    # The one that answers has as long as an interpreter may take to start on a loaded
    # machine; the mute one's bound is the one waited out.
    patient = Settings(acp=presets, acp_init_timeout=30.0)
    mine = check_backend("acp:mine", env, patient)
    assert mine.usable and mine.reason == "advertises protocol 1"
    assert mine.acp == {"protocolVersion": 1, "agentCapabilities": {}}
    mute = check_backend("acp:mute", env, settings)
    assert not mute.usable and mute.reason == "no answer to initialize within 2 s"
    names = [c.name for c in check_backends(env, settings)]
    assert "acp" not in names
    assert {"acp:gemini", "acp:qwen", "acp:claude", "acp:codex", "acp:mine"} <= set(names)
