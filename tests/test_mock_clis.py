"""The mock model's Anthropic, Responses and Gemini APIs, and the real agent CLIs
(claude, codex, gemini, opencode) run against it.

The CLI tests are skipped, each with its reason, when that CLI's binary is not on PATH;
install them with::

    npm install -g @anthropic-ai/claude-code@2.1.330 @openai/codex@0.169.0 \\
        @google/gemini-cli@0.61.0 opencode-ai@1.18.33
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.clistream import (
    FINAL,
    FINAL_TEXT,
    Ran,
    check_server_error,
    check_success,
    parse_stream,
)
from support.livechild import Child, Codex, notified, text_input

from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script

# --------------------------------------------------------------------------- HTTP helpers


def post(url: str, body: Any, *, raw: bool = False) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def sse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name or None, parsed data) for each SSE block."""
    out: list[tuple[str | None, Any]] = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = ""
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data += line[len("data: ") :]
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


ANTHROPIC_TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]
ANTHROPIC_USER = {"role": "user", "content": [{"type": "text", "text": "list files"}]}
ANTHROPIC_AFTER_TOOL = [
    ANTHROPIC_USER,
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": "a.txt\nb.py\n\n<system-reminder>\nnote\n</system-reminder>",
            }
        ],
    },
]


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_streaming_tool_use_then_text() -> None:
    with MockModelServer(Script(final_text=FINAL, text_chunks=3)) as srv:
        url = srv.url + "/v1/messages?beta=true"
        body = {"model": "claude-x", "messages": [ANTHROPIC_USER], "tools": ANTHROPIC_TOOLS}
        status, headers, raw = post(url, {**body, "stream": True})
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
        events = sse_events(raw)
        names = [n for n, _ in events]
        assert names == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        assert all(d["type"] == n for n, d in events)
        start = events[0][1]["message"]
        assert start["model"] == "claude-x" and start["role"] == "assistant"
        assert start["content"] == [] and start["usage"]["input_tokens"] == 10
        block = events[1][1]["content_block"]
        assert block == {"type": "tool_use", "id": "toolu_mock_1", "name": "Bash", "input": {}}
        deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
        assert {d["type"] for d in deltas} == {"input_json_delta"}
        args = json.loads("".join(d["partial_json"] for d in deltas))
        assert args == {"command": "ls", "description": "Run a shell command"}
        msg_delta = events[5][1]
        assert msg_delta["delta"]["stop_reason"] == "tool_use"
        assert msg_delta["usage"]["output_tokens"] == 5

        _, _, raw = post(url, {**body, "messages": ANTHROPIC_AFTER_TOOL, "stream": True})
        events = sse_events(raw)
        assert events[1][1]["content_block"] == {"type": "text", "text": ""}
        text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
        assert text == FINAL_TEXT  # the system reminder is not part of the output
        delta = next(d for n, d in events if n == "message_delta")
        assert delta["delta"]["stop_reason"] == "end_turn"
        assert len(srv.requests) == 2
        assert srv.http_log == ["POST /v1/messages?beta=true"] * 2


def test_anthropic_non_streaming_count_tokens_and_models() -> None:
    with MockModelServer() as srv:
        _, _, raw = post(srv.url + "/v1/messages", {"messages": [ANTHROPIC_USER]})
        msg = json.loads(raw)
        assert msg["type"] == "message" and msg["stop_reason"] == "tool_use"
        assert msg["content"][0]["type"] == "tool_use" and msg["content"][0]["name"] == "Bash"
        assert msg["usage"] == {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        status, _, raw = post(srv.url + "/v1/messages/count_tokens", {"messages": [ANTHROPIC_USER]})
        assert status == 200 and json.loads(raw)["input_tokens"] > 0
        with urllib.request.urlopen(srv.url + "/v1/models", timeout=10) as resp:
            models = json.loads(resp.read())
        assert models["data"][0]["id"] == mm.MODEL_ID and models["data"][0]["type"] == "model"
        assert models["has_more"] is False
        assert len(srv.requests) == 1  # token counts and model lists are not model requests
        assert srv.http_log[1:] == ["POST /v1/messages/count_tokens", "GET /v1/models"]


def test_request_without_the_tool_gets_text() -> None:
    # e.g. a side request (a title) that offers no tools, or other tools only
    with MockModelServer(Script(final_text="hi")) as srv:
        for tools in ([], [{"name": "Read", "input_schema": {}}]):
            body = {"messages": [ANTHROPIC_USER], "tools": tools}
            msg = json.loads(post(srv.url + "/v1/messages", body)[2])
            assert msg["stop_reason"] == "end_turn"
            assert msg["content"] == [{"type": "text", "text": "hi"}]


# --------------------------------------------------------------------------- Responses


def responses_tools(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "name": n, "parameters": {}} for n in names] + [
        {"type": "web_search"}
    ]


RESPONSES_USER = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "x"}],
}


def test_responses_streaming_function_call_then_text() -> None:
    with MockModelServer(Script(final_text=FINAL, text_chunks=2)) as srv:
        url = srv.url + "/v1/responses"
        body = {
            "model": "m",
            "stream": True,
            "input": [RESPONSES_USER],
            "tools": responses_tools("exec_command", "write_stdin"),
        }
        status, headers, raw = post(url, body)
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
        events = sse_events(raw)
        assert all(d["type"] == n for n, d in events)
        assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
        names = [n for n, _ in events]
        assert names[0] == "response.created" and names[-1] == "response.completed"
        added = next(d for n, d in events if n == "response.output_item.added")["item"]
        assert added["type"] == "function_call" and added["name"] == "exec_command"
        done = next(d for n, d in events if n == "response.output_item.done")["item"]
        assert done["call_id"] == "call_mock_1"
        assert json.loads(done["arguments"]) == {"cmd": "ls", "login": False}
        deltas = "".join(
            d["delta"] for n, d in events if n == "response.function_call_arguments.delta"
        )
        assert deltas == done["arguments"]
        completed = events[-1][1]["response"]
        assert completed["status"] == "completed" and completed["id"]
        assert completed["usage"]["input_tokens"] == 10
        assert completed["usage"]["total_tokens"] == 15
        assert completed["output"] == [done]

        output = (
            "Chunk ID: ab12\nWall time: 0.01 seconds\nProcess exited with code 0\n"
            "Original token count: 3\nOutput:\na.txt\nb.py\n"
        )
        call = {"type": "function_call", "call_id": "call_mock_1", "name": "exec_command"}
        result = {"type": "function_call_output", "call_id": "call_mock_1", "output": output}
        _, _, raw = post(url, {**body, "input": [RESPONSES_USER, call, result]})
        events = sse_events(raw)
        added = next(d for n, d in events if n == "response.output_item.added")["item"]
        assert added["type"] == "message" and added["role"] == "assistant"
        text = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
        assert text == FINAL_TEXT  # the exec_command header lines are not output
        done = next(d for n, d in events if n == "response.output_item.done")["item"]
        assert done["content"] == [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]


@pytest.mark.parametrize(
    ("offered", "name", "args"),
    [
        (("shell_command",), "shell_command", {"command": "ls"}),
        (("shell",), "shell", {"command": ["bash", "-lc", "ls"]}),
    ],
)
def test_responses_picks_the_offered_shell(
    offered: tuple[str, ...], name: str, args: dict[str, Any]
) -> None:
    with MockModelServer() as srv:
        body = {"input": [RESPONSES_USER], "tools": responses_tools(*offered)}
        obj = json.loads(post(srv.url + "/v1/responses", body)[2])
    assert obj["object"] == "response" and obj["status"] == "completed"
    (item,) = obj["output"]
    assert item["name"] == name and json.loads(item["arguments"]) == args


# --------------------------------------------------------------------------- Gemini


GEMINI_TOOLS = [{"functionDeclarations": [{"name": "run_shell_command", "parameters": {}}]}]
GEMINI_USER = {"role": "user", "parts": [{"text": "list files"}]}


def test_gemini_sse_function_call_then_text() -> None:
    with MockModelServer(Script(final_text=FINAL, text_chunks=2, command="echo hi")) as srv:
        url = srv.url + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        body = {"contents": [GEMINI_USER], "tools": GEMINI_TOOLS}
        status, headers, raw = post(url, body)
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
        (event,) = sse_events(raw)
        assert event[0] is None
        chunk = event[1]
        cand = chunk["candidates"][0]
        assert cand["content"]["role"] == "model" and cand["finishReason"] == "STOP"
        assert cand["content"]["parts"] == [
            {
                "functionCall": {
                    "name": "run_shell_command",
                    "args": {"command": "echo hi", "description": "Run a shell command"},
                }
            }
        ]
        assert chunk["usageMetadata"] == {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "totalTokenCount": 15,
        }
        assert chunk["modelVersion"] == "gemini-2.5-flash"

        reply = {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "run_shell_command",
                        "response": {"output": "a.txt\nb.py"},
                    }
                }
            ],
        }
        call = {"role": "model", "parts": cand["content"]["parts"]}
        _, _, raw = post(url, {**body, "contents": [GEMINI_USER, call, reply]})
        chunks = [d for _, d in sse_events(raw)]
        assert len(chunks) == 2
        text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
        assert text == FINAL_TEXT
        assert "finishReason" not in chunks[0]["candidates"][0]
        assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        assert "usageMetadata" in chunks[-1]


def test_gemini_generate_content_count_tokens_and_json_stream() -> None:
    with MockModelServer(Script(use_tool=False, final_text="hi")) as srv:
        base = srv.url + "/v1beta/models/m1"
        whole = json.loads(post(base + ":generateContent", {"contents": [GEMINI_USER]})[2])
        assert whole["candidates"][0]["content"]["parts"] == [{"text": "hi"}]
        count = json.loads(post(base + ":countTokens", {"contents": [GEMINI_USER]})[2])
        assert count["totalTokens"] > 0
        arr = json.loads(post(base + ":streamGenerateContent", {"contents": [GEMINI_USER]})[2])
        assert isinstance(arr, list) and arr[-1]["candidates"][0]["finishReason"] == "STOP"
        assert len(srv.requests) == 2


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("path", "expect"),
    [
        ("/v1/messages", {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
        (
            "/v1/responses",
            {"error": {"message": "boom", "type": "server_error", "code": None}},
        ),
        (
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}},
        ),
    ],
)
def test_error_bodies_per_api(path: str, expect: dict[str, Any]) -> None:
    script = Script(error_status=500, error_times=1, error_message="boom", retry_after_ms=0)
    with MockModelServer(script) as srv:
        status, headers, raw = post(srv.url + path, {"messages": [], "input": [], "contents": []})
        assert status == 500 and json.loads(raw) == expect
        assert headers["retry-after-ms"] == "0" and headers["retry-after"] == "0"
        status, _, _ = post(srv.url + path, {"messages": [], "input": [], "contents": []})
        assert status == 200  # the error budget is spent
        assert len(srv.requests) == 2


def test_unknown_endpoint_is_404() -> None:
    with MockModelServer() as srv:
        status, _, raw = post(srv.url + "/v1/nope", {})
        assert status == 404 and "not found" in json.loads(raw)["error"]["message"]
        assert srv.requests == []


# --------------------------------------------------------------------------- config writers


def test_write_configs(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/"
    env = mm.write_claude_config(tmp_path / "claude", url, max_retries=0)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["HOME"] == str(tmp_path / "claude") and env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    settings = json.loads((tmp_path / "claude/.claude/settings.json").read_text())
    assert settings["permissions"]["allow"] == ["Bash"]

    env = mm.write_codex_config(tmp_path / "codex", url)
    toml = (tmp_path / "codex/config.toml").read_text()
    assert 'model_provider = "mock"' in toml and 'wire_api = "responses"' in toml
    assert 'base_url = "http://127.0.0.1:9/v1"' in toml and "request_max_retries = 0" in toml
    assert env["CODEX_HOME"] == str(tmp_path / "codex") and env["MOCK_API_KEY"] == "x"

    env = mm.write_gemini_config(tmp_path / "gemini", url, max_attempts=1)
    settings = json.loads((tmp_path / "gemini/.gemini/settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["general"]["maxAttempts"] == 1
    assert (tmp_path / "gemini/.gemini/policies/mock.toml").is_file()
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9" and env["GEMINI_API_KEY"]

    env = mm.write_opencode_config(tmp_path / "oc", url)
    config = json.loads(Path(env["OPENCODE_CONFIG"]).read_text())
    provider = config["provider"]["mock"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:9/v1"
    assert mm.MODEL_ID in provider["models"]
    assert json.loads(Path(env["OPENCODE_MODELS_PATH"]).read_text()) == {}  # no catalogue
    assert mm.OPENCODE_MODEL == "mock/mock-model"


# --------------------------------------------------------------------------- the real CLIs


@dataclass(frozen=True)
class Cli:
    name: str
    argv: Callable[[list[str]], list[str]]
    config: Callable[[Path, str], dict[str, str]]
    extra: dict[str, list[str]] = field(default_factory=dict)
    """Flag sets to also try; "" (none) always runs. The README's fixture commands
    carry these; the config writers make them unnecessary."""


TASK = "list files"

CLIS = {
    "claude": Cli(
        "claude",
        lambda flags: [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            mm.CLAUDE_MODEL,
            *flags,
            "--",
            TASK,
        ],
        lambda d, url: mm.write_claude_config(d, url, max_retries=0),
        {"allowed": ["--allowedTools", "Bash"]},
    ),
    "codex": Cli(
        "codex",
        lambda flags: [
            "codex",
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-m",
            mm.CODEX_MODEL,
            *flags,
            TASK,
        ],
        lambda d, url: mm.write_codex_config(d, url),
        {"bypass": ["--ephemeral", "--dangerously-bypass-approvals-and-sandbox"]},
    ),
    "gemini": Cli(
        "gemini",
        lambda flags: [
            "gemini",
            "-p",
            TASK,
            "--output-format",
            "stream-json",
            "-m",
            mm.GEMINI_MODEL,
            *flags,
        ],
        lambda d, url: mm.write_gemini_config(d, url, max_attempts=1),
    ),
    "opencode": Cli(
        "opencode",
        lambda flags: [
            "opencode",
            "run",
            "--format",
            "json",
            "-m",
            mm.OPENCODE_MODEL,
            *flags,
            TASK,
        ],
        lambda d, url: mm.write_opencode_config(d, url),
    ),
}


def needs(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        shutil.which(name) is None, reason=f"the {name} CLI is not installed (npm install -g ...)"
    )


def cli_params() -> list[Any]:
    """The runs test_e2e_backends' supervised runs do not already make on the same script
    and command line (their stream, raw.jsonl, is checked there the same way): gemini with
    `--approval-mode yolo --skip-trust` and opencode (`--auto` there, which grants nothing
    the config does not) run there only."""
    out = []
    for name, cli in CLIS.items():
        if name == "opencode":
            continue
        for variant in ["", *cli.extra]:
            out.append(
                pytest.param(
                    name, variant, id=f"{name}-{variant}" if variant else name, marks=needs(name)
                )
            )
    return out


def run_cli(tmp_path: Path, name: str, script: Script, variant: str = "") -> Ran:
    cli = CLIS[name]
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    with MockModelServer(script) as srv:
        env = {**os.environ, **cli.config(tmp_path / f"{name}-config", srv.url)}
        # opencode takes its directory from $PWD, not from its real cwd: keep them equal.
        env["PWD"] = str(work)
        proc = subprocess.run(
            cli.argv(cli.extra.get(variant, [])),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=90,
        )
        n = len(srv.requests)
    return Ran(proc.returncode, parse_stream(proc.stdout), proc.stderr, n)


@pytest.mark.e2e
@pytest.mark.parametrize(("name", "variant"), cli_params())
def test_real_cli_runs_the_shell_tool_then_answers(tmp_path: Path, name: str, variant: str) -> None:
    check_success(name, run_cli(tmp_path, name, Script(final_text=FINAL), variant))


@pytest.mark.e2e
@needs("codex")
def test_real_codex_exec_server_error(tmp_path: Path) -> None:
    # codex's backend runs `codex app-server`: `codex exec` is checked here alone. The other
    # CLIs' server errors are test_e2e_backends' (their stream checked there).
    script = Script(error_status=500, error_times=-1, retry_after_ms=0)
    check_server_error("codex", run_cli(tmp_path, "codex", script), "mock server error")


@pytest.mark.e2e
@pytest.mark.parametrize("name", [pytest.param(n, marks=needs(n)) for n in ("codex", "opencode")])
def test_real_cli_client_error_shows_the_message(tmp_path: Path, name: str) -> None:
    # codex replaces a 5xx body with a generic "high demand" text; a 4xx keeps it.
    # opencode does not retry a 4xx whose text names no server error.
    script = Script(error_status=400, error_times=-1, error_message="mock invalid request")
    ran = run_cli(tmp_path, name, script)
    assert ran.rc == 1
    if name == "codex":
        assert "mock invalid request" in ran.events[-1]["error"]["message"]
        assert ran.events[-1]["type"] == "turn.failed"
    else:
        (err,) = [e for e in ran.events if e["type"] == "error"]
        assert err["error"]["data"]["isRetryable"] is False
        assert err["error"]["data"]["message"] == "mock invalid request"


# --------------------------------------------------------------------------- live input (issue 22)


def live_env(tmp_path: Path, name: str, url: str) -> tuple[dict[str, str], Path]:
    work = tmp_path / "work"
    work.mkdir()
    return {**os.environ, **CLIS[name].config(tmp_path / f"{name}-config", url)}, work


@pytest.mark.e2e
@needs("claude")
def test_real_claude_stream_json_takes_a_message_mid_turn_and_a_follow_up(tmp_path: Path) -> None:
    """claude -p --input-format stream-json: a message sent while a tool runs reaches the
    model with the next tool result; a message after the result starts a new turn."""
    argv = ["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    argv += ["--verbose", "--model", mm.CLAUDE_MODEL]

    def user(text: str) -> dict[str, Any]:
        return {"type": "user", "message": {"role": "user", "content": text}}

    def is_result(o: dict[str, Any]) -> bool:
        return o.get("type") == "result"

    with MockModelServer(Script(loop=True, command="sleep 1")) as srv:
        env, work = live_env(tmp_path, "claude", srv.url)
        child = Child(argv, env, work)
        try:
            child.send(user("loop until told otherwise"))
            child.wait_for(lambda o: o.get("type") == "assistant")
            child.send(user("stop and say banana"))
            first = child.get(is_result)
            child.send(user("now say cherry"))
            second = child.get(is_result, start=child.wait_for(is_result) + 1)
        finally:
            rc = child.close()
    assert first["subtype"] == "success" and first["is_error"] is False
    assert first["result"] == 'You said: "stop and say banana"'
    assert second["result"] == 'You said: "now say cherry"'
    # total_cost_usd runs over the whole session; usage is the turn's own
    assert second["total_cost_usd"] > first["total_cost_usd"] > 0
    assert second["usage"]["input_tokens"] == 10  # one request in the second turn
    assert rc == 0


@pytest.mark.e2e
@needs("codex")
def test_real_codex_app_server_steers_a_turn(tmp_path: Path) -> None:
    """codex app-server: turn/steer with the active turn's id lands in that turn; a wrong
    expectedTurnId is refused; after turn/completed there is no turn to steer."""
    with MockModelServer(Script(loop=True, command="sleep 1")) as srv:
        env, work = live_env(tmp_path, "codex", srv.url)
        child = Child(["codex", "app-server"], env, work)
        try:
            codex = Codex(child, work)
            turn = codex.turn("loop until told otherwise")
            child.wait_for(notified("item/started", type="commandExecution"))
            steer = {
                "threadId": codex.thread,
                "expectedTurnId": turn,
                "input": [text_input("stop and say banana")],
            }
            accepted = codex.call("turn/steer", steer)
            wrong = codex.call("turn/steer", {**steer, "expectedTurnId": "not-it"})
            done = child.get(notified("turn/completed"))
            late = codex.call("turn/steer", steer)
        finally:
            rc = child.close()
    assert accepted["result"] == {"turnId": turn}
    assert "expected active turn id `not-it`" in wrong["error"]["message"]
    assert late["error"]["message"] == "no active turn to steer"
    items = done["params"]["turn"]["items"]
    assert done["params"]["turn"]["status"] == "completed"
    texts = [i["text"] for i in items if i["type"] == "agentMessage"]
    assert texts[-1] == 'You said: "stop and say banana"'
    assert rc == 0
