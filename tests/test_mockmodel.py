"""The loopback mock model server, and the real pi CLI run against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.livechild import Child

import subagents.demo.mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script, pi_argv, write_pi_config

needs_pi = pytest.mark.skipif(shutil.which("pi") is None, reason="the pi CLI is not installed")

USER = {"role": "user", "content": "list files"}
TOOL_RESULT = [
    USER,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_mock_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_mock_1", "content": "a.txt\nb.py\n"},
]


def post(url: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()


def sse(raw: bytes) -> list[Any]:
    """The data payloads of an SSE body; the `[DONE]` sentinel is kept as a string."""
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


# --------------------------------------------------------------------------- HTTP shape


def test_models_endpoint() -> None:
    with MockModelServer() as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(srv.url + "/v1/models", timeout=10) as resp:
            body = json.loads(resp.read())
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["mock-model"]


def test_non_streaming_tool_call_then_final_text() -> None:
    with MockModelServer() as srv:
        status, ctype, raw = post(srv.url, {"model": "mock-model", "messages": [USER]})
        assert status == 200 and ctype.startswith("application/json")
        first = json.loads(raw)
        assert first["object"] == "chat.completion"
        choice = first["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["type"] == "function"
        assert call["function"]["name"] == "bash"
        assert json.loads(call["function"]["arguments"]) == {"command": "ls"}
        assert first["usage"]["total_tokens"] == 15

        _, _, raw = post(srv.url, {"model": "mock-model", "messages": TOOL_RESULT})
        second = json.loads(raw)
        choice = second["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert "tool_calls" not in choice["message"]
        assert choice["message"]["content"] == "I ran bash and it printed: a.txt, b.py"
        assert len(srv.requests) == 2
        assert srv.requests[1]["messages"][-1]["role"] == "tool"


def test_streaming_tool_call_deltas() -> None:
    body = {
        "model": "mock-model",
        "messages": [USER],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with MockModelServer(Script(tool_name="read", tool_args={"path": "a.txt"})) as srv:
        status, ctype, raw = post(srv.url, body)
    assert status == 200 and ctype.startswith("text/event-stream")
    events = sse(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    calls = [
        tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert calls[0]["id"] == "call_mock_1" and calls[0]["function"]["name"] == "read"
    assert {tc["index"] for tc in calls} == {0}
    args = "".join(tc["function"].get("arguments", "") for tc in calls)
    assert json.loads(args) == {"path": "a.txt"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 10


def test_streaming_text_in_chunks_and_usage_only_on_request() -> None:
    script = Script(final_text="Files: {tool_output}.", text_chunks=4)
    body = {"model": "m", "messages": TOOL_RESULT, "stream": True}
    with MockModelServer(script) as srv:
        _, _, raw = post(srv.url, body)
    chunks = sse(raw)[:-1]
    texts = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    pieces = [t for t in texts if t]
    assert len(pieces) == 4
    assert "".join(pieces) == "Files: a.txt, b.py."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert not any("usage" in c for c in chunks)  # no stream_options.include_usage
    assert chunks[0]["model"] == "m"


def test_text_only_script() -> None:
    with MockModelServer(Script(use_tool=False, final_text="hi")) as srv:
        _, _, raw = post(srv.url, {"messages": [USER]})
    choice = json.loads(raw)["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == "hi"


def test_error_times_then_normal() -> None:
    with MockModelServer(Script(error_status=503, error_times=2, error_message="busy")) as srv:
        for _ in range(2):
            with pytest.raises(urllib.error.HTTPError) as info:
                post(srv.url, {"messages": [USER]})
            assert info.value.code == 503
            assert json.loads(info.value.read())["error"]["message"] == "busy"
        status, _, _ = post(srv.url, {"messages": [USER]})
        assert status == 200
        assert len(srv.requests) == 3


def test_concurrent_requests_are_stateless() -> None:
    results: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        messages = TOOL_RESULT if i % 2 else [USER]
        _, _, raw = post(srv.url, {"messages": messages, "stream": True})
        finish = [c for c in sse(raw)[:-1] if c["choices"]][-1]["choices"][0]["finish_reason"]
        with lock:
            results.append(f"{i % 2}:{finish}")

    with MockModelServer(Script(chunk_delay_s=0.01, text_chunks=3)) as srv:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(srv.requests) == 10
    assert sorted(results) == ["0:tool_calls"] * 5 + ["1:stop"] * 5


def test_close_is_idempotent_and_frees_port() -> None:
    srv = MockModelServer()
    url = srv.url
    srv.close()
    srv.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/v1/models", timeout=5)


def test_write_pi_config(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    env = write_pi_config(agent, "http://127.0.0.1:9/", retry={"enabled": False})
    models = json.loads((agent / "models.json").read_text())
    provider = models["providers"]["mock"]
    assert provider["baseUrl"] == "http://127.0.0.1:9/v1"
    assert provider["api"] == "openai-completions"
    assert provider["models"][0]["id"] == "mock-model"
    assert json.loads((agent / "settings.json").read_text()) == {"retry": {"enabled": False}}
    assert env["PI_CODING_AGENT_DIR"] == str(agent)
    assert env["PI_OFFLINE"] == "1"
    assert Path(env["HOME"]).is_dir()
    write_pi_config(tmp_path / "b", "http://x")
    assert not (tmp_path / "b" / "settings.json").exists()


@pytest.mark.process
def test_cli_serves_in_foreground() -> None:
    src = str(Path(mm.__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "subagents.demo.mockmodel", "--port", "0", "--final", "bye"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        _, _, raw = post(url, {"messages": TOOL_RESULT})
        assert json.loads(raw)["choices"][0]["message"]["content"] == "bye"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


# --------------------------------------------------------------------------- the real pi


def run_pi(
    tmp_path: Path, srv: MockModelServer, retry: dict[str, Any] | None = None
) -> tuple[int, list[dict[str, Any]], str]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    env = {**os.environ, **write_pi_config(tmp_path / "pi-agent", srv.url, retry=retry)}
    proc = subprocess.run(
        pi_argv("list files", tools="bash,read"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )
    events = [json.loads(line) for line in proc.stdout.split("\n") if line.strip()]
    return proc.returncode, events, proc.stderr


def assistant_ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["message"]
        for e in events
        if e["type"] == "message_end" and e["message"].get("role") == "assistant"
    ]


@pytest.mark.e2e
@needs_pi
def test_real_pi_tool_call_then_final_text(tmp_path: Path) -> None:
    final = "I listed the files: {tool_output}."
    with MockModelServer(Script(final_text=final)) as srv:
        rc, events, stderr = run_pi(tmp_path, srv)
        n_requests = len(srv.requests)
    assert rc == 0, stderr
    types = [e["type"] for e in events]
    ends = assistant_ends(events)
    assert [m["stopReason"] for m in ends] == ["toolUse", "stop"]
    (call,) = [c for c in ends[0]["content"] if c["type"] == "toolCall"]
    assert call["name"] == "bash" and call["arguments"] == {"command": "ls"}
    assert ends[1]["content"] == [{"type": "text", "text": "I listed the files: a.txt, b.py."}]
    assert ends[1]["usage"]["totalTokens"] == 15
    ends_at = [
        i
        for i, e in enumerate(events)
        if e["type"] == "message_end" and e["message"].get("role") == "assistant"
    ]
    assert ends_at[0] < types.index("tool_execution_end") < ends_at[1]
    tool_end = next(e for e in events if e["type"] == "tool_execution_end")
    assert tool_end["isError"] is False
    assert "a.txt" in tool_end["result"]["content"][0]["text"]
    # pi 0.73 ends with agent_end; pi 0.87 adds agent_settled after it.
    assert types[-1] == "agent_end" or types[-2:] == ["agent_end", "agent_settled"]
    assert n_requests == 2


@pytest.mark.e2e
@needs_pi
def test_real_pi_server_error_with_retries(tmp_path: Path) -> None:
    # provider.maxRetries 0: no silent OpenAI-SDK retries, so each pi attempt is one request.
    retry = {"enabled": True, "maxRetries": 1, "baseDelayMs": 50, "provider": {"maxRetries": 0}}
    with MockModelServer(Script(error_status=500, error_times=-1)) as srv:
        rc, events, stderr = run_pi(tmp_path, srv, retry=retry)
        n_requests = len(srv.requests)
    types = [e["type"] for e in events]
    ends = assistant_ends(events)
    assert ends and all(m["stopReason"] == "error" for m in ends)
    # pi 0.73: "500 mock server error"; pi 0.87: '500: {"message":"mock server error",...}'.
    assert (
        ends[-1]["errorMessage"].startswith("500")
        and "mock server error" in ends[-1]["errorMessage"]
    )
    starts = [e for e in events if e["type"] == "auto_retry_start"]
    assert [e["attempt"] for e in starts] == [1]
    assert "mock server error" in starts[0]["errorMessage"]
    assert types.count("agent_start") == 2  # the retry starts a new agent run
    retry_end = next(e for e in events if e["type"] == "auto_retry_end")
    assert retry_end["success"] is False
    assert n_requests == 2
    # pi 0.73 in --mode json exits 0 even when the run ended in error (text mode exits 1).
    assert rc == 0, stderr


# --------------------------------------------------------------------------- the loop (live control)


def call_round(n: int) -> list[dict[str, Any]]:
    """The chat messages of one tool call and its result (the loop's ``n``-th)."""
    call_id = "call_mock_1" if n == 1 else f"call_mock_1-{n}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "sleep 1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": ""},
    ]


def chat(url: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(post(url, {"model": "m", "messages": messages})[2])
    return body


def test_loop_calls_the_tool_every_turn_up_to_its_limit() -> None:
    script = Script(loop=True, command="sleep 1", loop_limit=3, final_text="gave up")
    with MockModelServer(script) as srv:
        messages: list[dict[str, Any]] = [USER]
        ids = []
        for n in range(1, 4):
            answer = chat(srv.url, messages)
            (call,) = answer["choices"][0]["message"]["tool_calls"]
            assert json.loads(call["function"]["arguments"]) == {"command": "sleep 1"}
            ids.append((answer["id"], call["id"]))
            messages += call_round(n)
        last = chat(srv.url, messages)["choices"][0]
        served = srv.served
    # every answer has ids of its own (claude takes two answers with one id for one)
    assert ids == [
        ("chatcmpl-mock", "call_mock_1"),
        ("chatcmpl-mock-2", "call_mock_1-2"),
        ("chatcmpl-mock-3", "call_mock_1-3"),
    ]
    assert last["finish_reason"] == "stop" and last["message"]["content"] == "gave up"
    assert [s.tool for s in served] == ["bash", "bash", "bash", None]
    assert served[-1].text == "gave up"


def test_loop_answers_a_message_that_came_after_the_task() -> None:
    with MockModelServer(Script(loop=True)) as srv:
        steered = [USER, *call_round(1), {"role": "user", "content": "stop and say banana"}]
        answer = chat(srv.url, steered)["choices"][0]
        # a follow-up after that answer is answered too, the newest message quoted
        follow = [
            *steered,
            {"role": "assistant", "content": answer["message"]["content"]},
            {"role": "user", "content": [{"type": "text", "text": "now say cherry"}]},
        ]
        again = chat(srv.url, follow)["choices"][0]
    assert answer["finish_reason"] == "stop"
    assert answer["message"]["content"] == 'You said: "stop and say banana"'
    assert again["message"]["content"] == 'You said: "now say cherry"'


def test_a_stubborn_loop_ignores_messages_until_its_limit() -> None:
    script = Script(loop=True, heed_messages=False, loop_limit=2)
    with MockModelServer(script) as srv:
        wrap_up = {"role": "user", "content": "stop here and give your final answer now"}
        first = chat(srv.url, [USER, *call_round(1), wrap_up])["choices"][0]
        second = chat(srv.url, [USER, *call_round(1), wrap_up, *call_round(2)])["choices"][0]
    assert first["finish_reason"] == "tool_calls"
    assert second["finish_reason"] == "stop"
    assert second["message"]["content"].startswith("I ran bash")


def test_without_loop_a_follow_up_gets_the_old_final_text() -> None:
    # the mock's behaviour before the loop existed: one tool call, then the final text
    with MockModelServer(Script(final_text="done")) as srv:
        follow = [
            *TOOL_RESULT,
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "and more"},
        ]
        answer = chat(srv.url, follow)
    assert answer["id"] == "chatcmpl-mock"
    assert answer["choices"][0]["message"]["content"] == "done"


CLAUDE_MID_TURN = (
    "(Bash completed with no output)\n\n<system-reminder>\n"
    "The user sent a new message while you were working:\nstop and say banana\n\n"
    "This is how Claude Code surfaces messages the user sends mid-turn.\n</system-reminder>"
)


@pytest.mark.parametrize(
    ("api", "body", "message"),
    [
        (
            mm.ANTHROPIC,
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "<system-reminder>\nnote\n</system-reminder>"},
                            {"type": "text", "text": "the task"},
                        ],
                    },
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t1", "content": CLAUDE_MID_TURN}
                        ],
                    },
                ]
            },
            "stop and say banana",
        ),
        (
            mm.RESPONSES,
            {
                "input": [
                    {"type": "message", "role": "developer", "content": "rules"},
                    {
                        "type": "message",
                        "role": "user",
                        "content": [
                            {
                                "type": "input_text",
                                "text": "<environment_context>x</environment_context>",
                            }
                        ],
                    },
                    {"type": "message", "role": "user", "content": "the task"},
                    # codex re-sends a request that a steer overtook: no answer between
                    {"type": "message", "role": "user", "content": "stop and say banana"},
                ]
            },
            "stop and say banana",
        ),
        (
            mm.GEMINI,
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [
                            {"text": "<session_context>c</session_context>"},
                            {"text": "the task"},
                        ],
                    },
                    {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command"}}]},
                    {
                        "role": "user",
                        "parts": [
                            {"functionResponse": {"name": "run_shell_command", "response": {}}},
                            {"text": "stop and say banana"},
                        ],
                    },
                ]
            },
            "stop and say banana",
        ),
        (mm.CHAT, {"messages": [USER]}, None),
        (mm.RESPONSES, {"input": [{"role": "user", "content": "<env>x</env>"}, USER]}, None),
        (
            mm.ANTHROPIC,
            {
                "messages": [
                    USER,
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "<system-reminder>only a note</system-reminder>"},
                ]
            },
            None,
        ),
    ],
)
def test_later_user_message_per_api(api: str, body: dict[str, Any], message: str | None) -> None:
    assert mm.later_user_message(api, body) == message


def test_loop_answers_on_every_api(tmp_path: Path) -> None:
    """The reply reaches each API's wire format; ids differ from the first answer's."""
    script = Script(loop=True, reply_text="ok: {message}")
    anthropic = {
        "stream": True,
        "messages": [
            USER,
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
            {"role": "user", "content": [{"type": "tool_result", "content": CLAUDE_MID_TURN}]},
        ],
    }
    responses = {
        "stream": True,
        "input": [
            {"role": "user", "content": "the task"},
            {"type": "function_call", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": ""},
            {"role": "user", "content": [{"type": "input_text", "text": "stop and say banana"}]},
        ],
    }
    with MockModelServer(script) as srv:
        raw = post_to(srv.url + "/v1/messages", anthropic)
        events = [json.loads(b.split("data: ", 1)[1]) for b in raw.split("\n\n") if b.strip()]
        assert events[0]["message"]["id"] == "msg_mock-2"
        text = "".join(
            e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta"
        )
        assert text == "ok: stop and say banana"
        raw = post_to(srv.url + "/v1/responses", responses)
        events = [json.loads(b.split("data: ", 1)[1]) for b in raw.split("\n\n") if b.strip()]
        ids = {e["response"]["id"] for e in events if "response" in e}
        assert ids == {"resp_mock-2"}  # created and completed name one response
        done = events[-1]["response"]["output"][0]
        assert done["id"] == "msg_mock_1-2"
        assert done["content"][0]["text"] == "ok: stop and say banana"
        gemini = {
            "contents": [
                {"role": "user", "parts": [{"text": "the task"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command"}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {}}}]},
            ]
        }
        raw = post_to(srv.url + "/v1beta/models/g:generateContent", gemini)
        part = json.loads(raw)["candidates"][0]["content"]["parts"][0]
        assert part["functionCall"]["name"] == "run_shell_command"  # no message: loop on
    assert [s.api for s in srv.served] == [mm.ANTHROPIC, mm.RESPONSES, mm.GEMINI]


def post_to(url: str, body: dict[str, Any]) -> str:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.read().decode())


def test_served_counts_answers_with_their_usage() -> None:
    script = Script(loop=True, usage=(1000, 200), error_status=503, error_times=1)
    with MockModelServer(script) as srv:
        with pytest.raises(urllib.error.HTTPError):
            chat(srv.url, [USER])  # an error answer is not a turn
        answer = chat(srv.url, [USER])
        chat(srv.url, [USER, *call_round(1)])
        served = srv.served
    assert answer["usage"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
    }
    assert [(s.api, s.tool, s.usage) for s in served] == [
        (mm.CHAT, "bash", (1000, 200)),
        (mm.CHAT, "bash", (1000, 200)),
    ]
    assert sum(s.usage[0] + s.usage[1] for s in served) == 2400


def test_config_writers_take_a_price(tmp_path: Path) -> None:
    write_pi_config(tmp_path / "pi", "http://x", price=(3.0, 15.0))
    model = json.loads((tmp_path / "pi" / "models.json").read_text())["providers"]["mock"]
    assert model["models"][0]["cost"] == {
        "input": 3.0,
        "output": 15.0,
        "cacheRead": 0,
        "cacheWrite": 0,
    }
    env = mm.write_opencode_config(tmp_path / "oc", "http://x", price=(1.0, 2.0))
    config = json.loads(Path(env["OPENCODE_CONFIG"]).read_text())
    assert config["provider"]["mock"]["models"][mm.MODEL_ID]["cost"] == {
        "input": 1.0,
        "output": 2.0,
    }
    env = mm.write_opencode_config(tmp_path / "oc2", "http://x")
    config = json.loads(Path(env["OPENCODE_CONFIG"]).read_text())
    assert "cost" not in config["provider"]["mock"]["models"][mm.MODEL_ID]


@pytest.mark.process
def test_cli_serves_a_loop() -> None:
    src = str(Path(mm.__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "subagents.demo.mockmodel", "--loop", "--loop-limit", "1"]
    argv += ["--usage", "7", "3", "--reply", "heard: {message}"]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        looped = chat(url, [USER])
        heard = chat(url, [USER, *call_round(1), {"role": "user", "content": "hi"}])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert looped["choices"][0]["finish_reason"] == "tool_calls"
    assert looped["usage"]["total_tokens"] == 10
    assert heard["choices"][0]["message"]["content"] == "heard: hi"


@pytest.mark.e2e
@needs_pi
def test_real_pi_rpc_steer_reaches_the_looping_model(tmp_path: Path) -> None:
    """pi --mode rpc: a steer sent while a tool runs is the next user message, the loop
    answers it, the run settles, and closing stdin ends pi (exit 0)."""
    work = tmp_path / "work"
    work.mkdir()
    with MockModelServer(Script(loop=True, command="sleep 1")) as srv:
        env = {**os.environ, **write_pi_config(tmp_path / "pi", srv.url, price=(1000.0, 2000.0))}
        argv = ["pi", "--mode", "rpc", "--no-session", "--provider", "mock"]
        child = Child([*argv, "--model", "mock-model", "--tools", "bash"], env, work)
        try:
            child.send({"id": "p1", "type": "prompt", "message": "loop until told otherwise"})
            child.wait_for(lambda o: o.get("type") == "tool_execution_start")
            child.send({"id": "s1", "type": "steer", "message": "stop and say banana"})
            end = child.wait_for(lambda o: o.get("type") == "agent_settled")
        finally:
            rc = child.close()
        served = srv.served
    objs = child.objs()[: end + 1]
    # (pi 1.6 adds the steer's disposition to its response: the keys before it are the same)
    steered = {"id": "s1", "type": "response", "command": "steer", "success": True}
    assert any(steered.items() <= o.items() for o in objs), objs
    users = [
        o["message"]["content"][0]["text"]
        for o in objs
        if o.get("type") == "message_end" and o["message"]["role"] == "user"
    ]
    assert users == ["loop until told otherwise", "stop and say banana"]
    ends = assistant_ends(objs)
    assert ends[-1]["content"] == [{"type": "text", "text": 'You said: "stop and say banana"'}]
    assert ends[-1]["stopReason"] == "stop"
    assert all(m["stopReason"] == "toolUse" for m in ends[:-1])
    # pi prices each answer's usage (10 in, 5 out) with the model's price per million
    assert [m["usage"]["cost"]["total"] for m in ends] == [pytest.approx(0.02)] * len(ends)
    assert [s.tool for s in served] == ["bash"] * len(ends[:-1]) + [None]
    assert rc == 0
