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
