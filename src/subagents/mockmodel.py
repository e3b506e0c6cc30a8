"""A loopback mock model server speaking the OpenAI Chat Completions API.

Used to run real agent CLIs (pi first of all) end to end without a real model::

    with MockModelServer(Script(tool_args={"command": "ls"})) as srv:
        env = {**os.environ, **write_pi_config(tmp / "pi-agent", srv.url)}
        subprocess.run(["pi", "--mode", "json", "-p", "--no-session",
                        "--provider", "mock", "--model", "mock-model", "list files"],
                       stdin=subprocess.DEVNULL, env=env, timeout=60)

Endpoints: ``POST /v1/chat/completions`` (streaming SSE and non-streaming) and
``GET /v1/models``.  The answer is decided *statelessly* from the request's messages
(see :class:`Script`), so concurrent runs against one server do not interfere; only
the error budget (``error_times``) is a server-wide counter.

Run ``python -m subagents.mockmodel --help`` for a foreground server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "MODEL_ID",
    "PROVIDER",
    "MockModelServer",
    "Script",
    "pi_argv",
    "write_pi_config",
]

PROVIDER = "mock"
MODEL_ID = "mock-model"
_RESPONSE_ID = "chatcmpl-mock"
_TOOL_CALL_ID = "call_mock_1"


@dataclass
class Script:
    """What the mock model answers.

    Default policy, per request:

    * the conversation holds no tool result (no ``role: "tool"`` message) and
      ``use_tool`` is true -> one tool call ``tool_name(tool_args)``
      (``finish_reason: "tool_calls"``);
    * otherwise -> a final text answer (``finish_reason: "stop"``).

    ``final_text`` is the text of that answer; ``{tool_output}`` in it is replaced by
    the first lines of the last tool result joined with ", ".  ``None`` means
    "I ran <tool_name> and it printed: <those lines>" after a tool result, and
    "Hello from the mock model." when there is none.

    ``error_status`` (e.g. 500) makes the first ``error_times`` chat requests (counted
    over the server's lifetime; ``-1`` = every request) fail with that HTTP status and
    an OpenAI-style error body carrying ``error_message``.

    ``delay_s`` is slept before answering (errors too); ``chunk_delay_s`` between SSE
    chunks; the final text is streamed as ``text_chunks`` deltas.  ``usage`` is
    (prompt_tokens, completion_tokens) reported for every answer.
    """

    use_tool: bool = True
    tool_name: str = "bash"
    tool_args: dict[str, Any] = field(default_factory=lambda: {"command": "ls"})
    final_text: str | None = None
    error_status: int | None = None
    error_times: int = 0
    error_message: str = "mock server error"
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    text_chunks: int = 1
    usage: tuple[int, int] = (10, 5)


# --------------------------------------------------------------------------- policy


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _last_tool_output(messages: list[Any]) -> str | None:
    """Text of the last ``role: "tool"`` message, or None when there is none."""
    for msg in reversed(messages):
        if isinstance(msg, dict) and msg.get("role") == "tool":
            return _content_text(msg.get("content"))
    return None


def _summarize(output: str, max_lines: int = 5) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    summary = ", ".join(lines[:max_lines])
    if len(lines) > max_lines:
        summary += ", ..."
    return summary or "(no output)"


@dataclass(frozen=True)
class _Answer:
    text: str | None
    tool: tuple[str, dict[str, Any]] | None

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool else "stop"


def _decide(script: Script, body: dict[str, Any]) -> _Answer:
    messages = body.get("messages")
    tool_output = _last_tool_output(messages if isinstance(messages, list) else [])
    if tool_output is None and script.use_tool:
        return _Answer(None, (script.tool_name, dict(script.tool_args)))
    summary = _summarize(tool_output) if tool_output is not None else ""
    if script.final_text is not None:
        text = script.final_text.replace("{tool_output}", summary)
    elif tool_output is not None:
        text = f"I ran {script.tool_name} and it printed: {summary}"
    else:
        text = "Hello from the mock model."
    return _Answer(text, None)


def _split(text: str, n: int) -> list[str]:
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    parts: list[str] = []
    pos = 0
    for i in range(n):
        end = pos + size + (1 if i < extra else 0)
        parts.append(text[pos:end])
        pos = end
    return [p for p in parts if p] or [text]


# --------------------------------------------------------------------------- wire format


def _usage(script: Script) -> dict[str, int]:
    prompt, completion = script.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chunk(
    model: str, created: int, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": _RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _stream_chunks(
    script: Script, answer: _Answer, model: str, include_usage: bool
) -> Iterator[dict[str, Any]]:
    created = int(time.time())
    yield _chunk(model, created, {"role": "assistant", "content": ""})
    if answer.text is not None:
        for piece in _split(answer.text, script.text_chunks):
            yield _chunk(model, created, {"content": piece})
    if answer.tool is not None:
        name, args = answer.tool
        args_json = json.dumps(args)
        half = len(args_json) // 2
        yield _chunk(
            model,
            created,
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": _TOOL_CALL_ID,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            },
        )
        for part in (args_json[:half], args_json[half:]):
            if part:
                yield _chunk(
                    model, created, {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}
                )
    yield _chunk(model, created, {}, answer.finish_reason)
    if include_usage:
        yield {
            "id": _RESPONSE_ID,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(script),
        }


def _completion(script: Script, answer: _Answer, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.tool is not None:
        name, args = answer.tool
        message["tool_calls"] = [
            {
                "id": _TOOL_CALL_ID,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
    return {
        "id": _RESPONSE_ID,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason}],
        "usage": _usage(script),
    }


# --------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # streaming bodies end when the connection closes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": PROVIDER}
                    ],
                },
            )
        else:
            self._send_json(
                404, {"error": {"message": f"not found: {self.path}", "type": "not_found"}}
            )

    def do_POST(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._post()  # a client going away mid-answer is not an error

    def _post(self) -> None:
        if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(
                404, {"error": {"message": f"not found: {self.path}", "type": "not_found"}}
            )
            return
        try:
            body = json.loads(self._read_body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(
                400,
                {
                    "error": {
                        "message": "body is not a JSON object",
                        "type": "invalid_request_error",
                    }
                },
            )
            return
        srv = self.server
        script = srv.owner.script
        srv.owner._record(body)
        if script.delay_s > 0:
            time.sleep(script.delay_s)
        if srv.owner._take_error(script):
            status = script.error_status or 500
            kind = "server_error" if status >= 500 else "invalid_request_error"
            self._send_json(
                status, {"error": {"message": script.error_message, "type": kind, "code": None}}
            )
            return
        answer = _decide(script, body)
        model = str(body.get("model") or MODEL_ID)
        if not body.get("stream"):
            self._send_json(200, _completion(script, answer, model))
            return
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for i, chunk in enumerate(_stream_chunks(script, answer, model, include_usage)):
            if i and script.chunk_delay_s > 0:
                time.sleep(script.chunk_delay_s)
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], owner: MockModelServer) -> None:
        self.owner = owner
        super().__init__(addr, _Handler)


class MockModelServer:
    """The mock model on ``host:port`` (port 0 = a free one), served in a daemon thread.

    Starts at construction; use as a context manager or call :meth:`close`.
    ``script`` may be replaced at any time; ``requests`` lists the JSON bodies of all
    chat-completion requests received (error-answered ones included), in arrival order.
    """

    def __init__(
        self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.script = script if script is not None else Script()
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._errors_sent = 0
        self._httpd = _Server((host, port), self)
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="mockmodel",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot copy of the chat-completion request bodies received so far."""
        with self._lock:
            return list(self._requests)

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(body)

    def _take_error(self, script: Script) -> bool:
        if script.error_status is None:
            return False
        with self._lock:
            if script.error_times < 0 or self._errors_sent < script.error_times:
                self._errors_sent += 1
                return True
        return False

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MockModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- pi


def write_pi_config(
    agent_dir: Path, base_url: str, *, retry: dict[str, Any] | None = None
) -> dict[str, str]:
    """Point a pi child at the mock; return the env vars it needs.

    Writes ``agent_dir/models.json`` (provider ``mock``, model ``mock-model``, api
    ``openai-completions``, baseUrl ``<base_url>/v1``) and, when ``retry`` is given,
    ``agent_dir/settings.json`` with ``{"retry": retry}``.  pi's retry shape is
    ``{"enabled": bool, "maxRetries": int, "baseDelayMs": int,
    "provider": {"maxRetries": int, "timeoutMs": int, "maxRetryDelayMs": int}}``: the
    top-level keys drive pi's own ``auto_retry_start`` loop (defaults true/3/2000);
    ``provider.maxRetries`` is the OpenAI SDK's silent in-request retry count
    (default 2) -- set it to 0 to make every HTTP error visible to pi at once.

    The returned env: ``PI_CODING_AGENT_DIR``; ``PI_OFFLINE=1``,
    ``PI_SKIP_VERSION_CHECK=1`` and ``PI_TELEMETRY=0`` (no startup network); and
    ``HOME=agent_dir/home`` (pi also reads ``~/.agents/skills`` from the real home).
    """
    agent_dir = Path(agent_dir)
    agent_dir.mkdir(parents=True, exist_ok=True)
    home = agent_dir / "home"
    home.mkdir(exist_ok=True)
    models = {
        "providers": {
            PROVIDER: {
                "baseUrl": base_url.rstrip("/") + "/v1",
                "api": "openai-completions",
                "apiKey": "x",
                "models": [
                    {
                        "id": MODEL_ID,
                        "name": "Mock Model",
                        "reasoning": False,
                        "input": ["text"],
                        "contextWindow": 128000,
                        "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    }
                ],
            }
        }
    }
    (agent_dir / "models.json").write_text(json.dumps(models, indent=2) + "\n")
    if retry is not None:
        (agent_dir / "settings.json").write_text(json.dumps({"retry": retry}, indent=2) + "\n")
    return {
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "HOME": str(home),
    }


def pi_argv(task: str, *, tools: str | None = None, pi: str = "pi") -> list[str]:
    """The pi command line for a run against the mock (spawn it with stdin=/dev/null)."""
    argv = [pi, "--mode", "json", "-p", "--no-session", "--provider", PROVIDER, "--model", MODEL_ID]
    if tools:
        argv += ["--tools", tools]
    return [*argv, task]


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m subagents.mockmodel",
        description=__doc__.split("\n")[0] if __doc__ else None,
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    p.add_argument(
        "--final", dest="final_text", help="final answer text ({tool_output} is substituted)"
    )
    p.add_argument("--tool", dest="tool_name", default="bash")
    p.add_argument("--tool-args", default='{"command": "ls"}', help="tool arguments as JSON")
    p.add_argument("--no-tool", action="store_true", help="answer text at once, no tool call")
    p.add_argument("--error-status", type=int)
    p.add_argument("--error-times", type=int, default=-1, help="with --error-status; -1 = always")
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between SSE chunks")
    p.add_argument("--text-chunks", type=int, default=1)
    p.add_argument("--pi-config", type=Path, metavar="DIR", help="also write a pi agent dir there")
    a = p.parse_args(argv)
    tool_args = json.loads(a.tool_args)
    if not isinstance(tool_args, dict):
        p.error("--tool-args must be a JSON object")
    script = Script(
        use_tool=not a.no_tool,
        tool_name=a.tool_name,
        tool_args=tool_args,
        final_text=a.final_text,
        error_status=a.error_status,
        error_times=a.error_times if a.error_status is not None else 0,
        delay_s=a.delay,
        chunk_delay_s=a.chunk_delay,
        text_chunks=a.text_chunks,
    )
    with MockModelServer(script, host=a.host, port=a.port) as srv:
        print(srv.url, flush=True)
        if a.pi_config is not None:
            env = write_pi_config(a.pi_config, srv.url)
            print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
            print(" ".join(pi_argv("TASK")), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
