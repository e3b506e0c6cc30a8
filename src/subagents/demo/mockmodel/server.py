"""The HTTP server: routes each API's endpoints to the script and its encoder."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from subagents.demo.mockmodel.apis import (
    GEMINI_PATH,
    anthropic_events,
    anthropic_message,
    completion,
    count_tokens,
    error_body,
    gemini_chunks,
    gemini_whole,
    responses_events,
    responses_object,
    stream_chunks,
)
from subagents.demo.mockmodel.script import (
    ANTHROPIC,
    CHAT,
    GEMINI,
    GEMINI_MODEL,
    HOLD_AT_MOST,
    MODEL_ID,
    PROVIDER,
    RESPONSES,
    Script,
    decide,
)

if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue

# --------------------------------------------------------------------------- server

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_MESSAGES_PATHS = ("/v1/messages", "/messages")
_RESPONSES_PATHS = ("/v1/responses", "/responses")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # streaming bodies end when the connection closes

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send_json(
        self, status: int, obj: JsonObject | list[JsonObject], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self, api: str = CHAT) -> None:
        self._send_json(404, error_body(api, 404, f"not found: {self.command} {self.path}"))

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

    def do_HEAD(self) -> None:
        self.server.owner._log(f"HEAD {self.path}")
        self.send_response(200 if urlsplit(self.path).path in ("", "/") else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.server.owner._log(f"GET {self.path}")
        path = urlsplit(self.path).path.rstrip("/")
        if path in ("/v1/models", "/models"):
            # one list that reads as OpenAI's and as Anthropic's
            model: JsonObject = {
                "id": MODEL_ID,
                "object": "model",
                "created": 0,
                "owned_by": PROVIDER,
                "type": "model",
                "display_name": "Mock Model",
                "created_at": "2025-01-01T00:00:00Z",
            }
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [model],
                    "has_more": False,
                    "first_id": MODEL_ID,
                    "last_id": MODEL_ID,
                },
            )
        elif path in ("/v1beta/models", "/v1alpha/models"):
            model = {
                "name": f"models/{GEMINI_MODEL}",
                "displayName": "Mock Model",
                "supportedGenerationMethods": ["generateContent", "countTokens"],
                "inputTokenLimit": 1048576,
                "outputTokenLimit": 65536,
            }
            self._send_json(200, {"models": [model]})
        elif path == "":
            self._send_json(200, {"ok": True})
        else:
            self._not_found()

    def do_POST(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._post()  # a client going away mid-answer is not an error

    def _post(self) -> None:
        owner = self.server.owner
        owner._log(f"POST {self.path}")
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        sse = True
        gemini = GEMINI_PATH.match(path)
        if path in _CHAT_PATHS:
            api = CHAT
        elif path in _MESSAGES_PATHS:
            api = ANTHROPIC
        elif path in _RESPONSES_PATHS:
            api = RESPONSES
        elif path.endswith("/messages/count_tokens"):
            body = self._json_body(ANTHROPIC)
            if body is not None:
                self._send_json(200, {"input_tokens": count_tokens(body.get("messages"))})
            return
        elif gemini and gemini.group(2) in ("generateContent", "streamGenerateContent"):
            api = GEMINI
            sse = "sse" in parse_qs(url.query).get("alt", [])
        elif gemini and gemini.group(2) == "countTokens":
            body = self._json_body(GEMINI)
            if body is not None:
                self._send_json(200, {"totalTokens": count_tokens(body.get("contents", body))})
            return
        else:
            self._not_found()
            return
        body = self._json_body(api)
        if body is None:
            return
        script = owner.script.for_api(api)
        owner._record(body, {k.lower(): v for k, v in self.headers.items()})
        if script.hold is not None:
            script.hold.wait(HOLD_AT_MOST)
        if script.delay_s > 0:
            time.sleep(script.delay_s)
        if owner._take_error(script):
            status = script.error_status or 500
            headers = {}
            if script.retry_after_ms is not None:
                ms = max(0, script.retry_after_ms)
                headers = {"retry-after-ms": str(ms), "retry-after": str(-(-ms // 1000))}
            self._send_json(status, error_body(api, status, script.error_message), headers)
            return
        answer = decide(script, body, api)
        owner._serve(
            Served(api, answer.tool[0] if answer.tool else None, answer.text, script.usage)
        )
        if api == GEMINI and gemini is not None:
            model = gemini.group(1)
            if gemini.group(2) == "generateContent":
                self._send_json(200, gemini_whole(script, answer, model))
            elif sse:
                self._stream(script, ((None, c) for c in gemini_chunks(script, answer, model)))
            else:
                self._send_json(200, gemini_chunks(script, answer, model))
            return
        model = str(body.get("model") or MODEL_ID)
        stream = bool(body.get("stream"))
        if api == ANTHROPIC:
            if stream:
                self._stream(script, anthropic_events(script, answer, model))
            else:
                self._send_json(200, anthropic_message(script, answer, model))
        elif api == RESPONSES:
            if stream:
                self._stream(script, responses_events(script, answer, model))
            else:
                self._send_json(200, responses_object(script, answer, model))
        elif not stream:
            self._send_json(200, completion(script, answer, model))
        else:
            opts = body.get("stream_options")
            include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
            chunks = stream_chunks(script, answer, model, include_usage)
            self._stream(script, ((None, c) for c in chunks), done=True)

    def _json_body(self, api: str) -> JsonObject | None:
        """The request's JSON object body; answers 400 and returns None when it is not one."""
        body: JsonValue
        try:
            body = json.loads(self._read_body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, error_body(api, 400, "body is not a JSON object"))
            return None
        return body

    def _stream(
        self,
        script: Script,
        events: Iterator[tuple[str | None, JsonObject]],
        done: bool = False,
    ) -> None:
        """Send ``events`` as SSE (``event:`` lines where named); ``done`` adds ``[DONE]``."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for i, (name, data) in enumerate(events):
            if i and script.chunk_delay_s > 0:
                time.sleep(script.chunk_delay_s)
            head = f"event: {name}\n".encode() if name else b""
            self.wfile.write(head + b"data: " + json.dumps(data).encode() + b"\n\n")
            self.wfile.flush()
        if done:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()


@dataclass(frozen=True)
class Served:
    """One answer the mock gave (an error answer is none): to count a child's turns and
    the usage it was told, e.g. against a budget."""

    api: str
    tool: str | None
    """The tool called, or None for a text answer."""
    text: str | None
    usage: tuple[int, int]
    """(input tokens, output tokens) reported with it."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], owner: MockModelServer) -> None:
        self.owner = owner
        super().__init__(addr, _Handler)


class MockModelServer:
    """The mock model on ``host:port`` (port 0 = a free one), served in a daemon thread.

    Starts at construction; use as a context manager or call :meth:`close`.
    ``script`` may be replaced at any time.  ``requests`` lists the JSON bodies of all
    model requests received, whatever the API (chat completions, messages, responses,
    generateContent; error-answered ones included), in arrival order; ``http_log``
    lists every HTTP request as ``"METHOD /path?query"`` (token counts and model lists
    too); ``request_headers`` the headers of each model request (names lower-cased), in
    the same order as ``requests``; ``served`` each answer given (:class:`Served`: the
    turns a child took and the usage it was told).
    """

    def __init__(
        self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.script = script if script is not None else Script()
        self._lock = threading.Lock()
        self._requests: list[JsonObject] = []
        self._headers: list[dict[str, str]] = []
        self._http_log: list[str] = []
        self._served: list[Served] = []
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
    def requests(self) -> list[JsonObject]:
        """A snapshot copy of the model request bodies received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """A snapshot copy of each model request's headers (lower-case names), as ``requests``."""
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def http_log(self) -> list[str]:
        """A snapshot copy of every HTTP request line received so far (``"POST /v1/..."``)."""
        with self._lock:
            return list(self._http_log)

    @property
    def served(self) -> list[Served]:
        """A snapshot copy of the answers given so far (error answers are not), in order."""
        with self._lock:
            return list(self._served)

    def _serve(self, served: Served) -> None:
        with self._lock:
            self._served.append(served)

    def _record(self, body: JsonObject, headers: dict[str, str]) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)

    def _log(self, line: str) -> None:
        with self._lock:
            self._http_log.append(line)

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
