"""The MCP server over streamable HTTP, through the real MCP SDK client: the bearer token,
a client that disconnects mid-call, shutdown on a signal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import pistream as pi
from support.checks import pid_alive
from support.cli import invoke
from support.fake import Fake, fake_env
from support.mcp_client import TIMEOUT, run, server_env

from subagents.jobs.store import JobStore


@dataclass
class HttpServer:
    proc: subprocess.Popen[str]
    url: str
    token: str
    stderr: list[str]


@contextmanager
def http_server(env: dict[str, str]) -> Iterator[HttpServer]:
    """``subagents mcp --http --port 0`` with a generated token; terminated (bounded) at the end."""
    env = server_env(env)
    env.pop("SUBAGENTS_MCP_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "subagents.cli", "mcp", "--http", "--port", "0"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "bearer token" in line:
                ready.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert ready.wait(30), f"the server did not start: {lines}"
        url = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", "".join(lines)).group(1)  # type: ignore[union-attr]
        token = re.search(r"bearer token .*: (\S+)", "".join(lines)).group(1)  # type: ignore[union-attr]
        yield HttpServer(proc, url, token, lines)
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        reader.join(5)


def requires_the_bearer_token(server: HttpServer) -> None:
    """No token or a wrong one: 401; the right one: the tools."""

    async def main() -> None:
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            denied = await http.post(server.url, json=body)
            assert denied.status_code == 401
            wrong = await http.post(server.url, json=body, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as http,
            Client(streamable_http_client(server.url, http_client=http)) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            assert "subagent" in names

    run(main)


# A real MCP client in a process of its own, so the test can make it vanish mid-call (SIGKILL:
# no cancellation, no session DELETE, only the TCP connection closing). It prints each
# progress message of one foreground `subagent` call.
HTTP_CLIENT = """
import sys, anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
url, token, mode = sys.argv[1:4]
async def main():
    async def on_progress(progress, total, message):
        print(message, flush=True)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=None) as http, Client(
        streamable_http_client(url, http_client=http), mode=mode
    ) as client:
        await client.call_tool("subagent", {"task": "sleep"}, progress_callback=on_progress)
anyio.run(main)
"""


@pytest.mark.process
def test_http_requires_the_token_and_a_client_that_disconnects_mid_call_aborts_its_job(
    fake: Fake, tmp_path: Path
) -> None:
    """One server: the bearer token checked, then a client in each mode, one after the
    other (the second client's call is served after the first client vanished)."""
    pidfile = tmp_path / "child.pid"
    steps: list[dict[str, Any]] = [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 120}]
    with http_server(fake_env(fake, steps)) as server:
        requires_the_bearer_token(server)
        for mode in ("legacy", "auto"):
            pidfile.unlink(missing_ok=True)
            vanish_mid_call(server, mode, pidfile)


def vanish_mid_call(server: HttpServer, mode: str, pidfile: Path) -> None:
    """A client in ``mode`` calls ``subagent`` and is SIGKILLed once the job's child runs:
    the child goes, the job is aborted, the server stays up."""
    client = subprocess.Popen(
        [sys.executable, "-c", HTTP_CLIENT, server.url, server.token, mode],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert client.stdout is not None
        first = client.stdout.readline()  # "job <id> started: …", bounded by the fake's start
        match = re.match(r"job (\S+) started", first)
        assert match, (mode, first)
        job_id = match.group(1)
        deadline = time.monotonic() + 30
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pidfile.exists(), f"the child never started ({mode})"
        pid = int(pidfile.read_text())
        assert JobStore().load(job_id)["status"] == "running"
    finally:
        client.kill()  # the client vanishes: its connection closes, nothing else is sent
        client.wait(5)
    store = JobStore()
    deadline = time.monotonic() + 30
    while (
        pid_alive(pid) or store.load(job_id).get("status") != "aborted"
    ) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(pid), f"the child outlived its disconnected client ({mode})"
    assert store.load(job_id)["status"] == "aborted"
    assert server.proc.poll() is None, f"the server went down with the client ({mode})"


@pytest.mark.process
@pytest.mark.parametrize(("sig", "mode"), [("SIGTERM", "legacy"), ("SIGINT", "auto")])
def test_http_server_stops_cleanly_on_a_signal(
    fake: Fake, tmp_path: Path, sig: str, mode: str
) -> None:
    """SIGTERM/SIGINT with a client connected and a foreground call in flight: exit 0, the
    call's job aborted and its child gone, and nothing but the start-up lines on stderr."""
    pidfile = tmp_path / "child.pid"
    steps: list[dict[str, Any]] = [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 120}]
    messages: list[str] = []
    failures: list[Exception] = []
    signalled = threading.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    with http_server(fake_env(fake, steps)) as server:

        async def main() -> None:
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {server.token}"}, timeout=None
                ) as http,
                Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
            ):

                async def call() -> None:
                    try:
                        await client.call_tool(
                            "subagent", {"task": "sleep"}, progress_callback=on_progress
                        )
                    except Exception as exc:  # expected once the server goes away mid-call
                        failures.append(exc)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    while not (pidfile.exists() and messages):
                        assert not failures, f"the call failed before the signal: {failures}"
                        await anyio.sleep(0.05)
                    signalled.set()
                    server.proc.send_signal(getattr(signal, sig))
                    while server.proc.poll() is None:  # bounded by run()
                        await anyio.sleep(0.1)
                    tg.cancel_scope.cancel()

        try:
            run(main)
        except Exception:
            if not signalled.is_set():
                raise
            # else the client's own goodbye to a server now gone: not what this test is about
        assert server.proc.wait(TIMEOUT) == 0, "".join(server.stderr)
    job_id = messages[0].split()[1]
    assert JobStore().load(job_id)["status"] == "aborted"
    assert not pid_alive(int(pidfile.read_text()))
    noise = [line for line in server.stderr if not line.startswith("subagents mcp:")]
    assert not noise, "".join(server.stderr)


def test_http_token_from_config_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from subagents.mcp.transport import http_token

    config_dir = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text('mcp_token = "from-config-0123456"\n')
    monkeypatch.delenv("SUBAGENTS_MCP_TOKEN", raising=False)
    assert http_token() == ("from-config-0123456", False)
    monkeypatch.setenv("SUBAGENTS_MCP_TOKEN", "from-env-0123456789")
    assert http_token() == ("from-env-0123456789", False)
    (config_dir / "config.toml").write_text("")
    monkeypatch.delenv("SUBAGENTS_MCP_TOKEN")
    token, generated = http_token()
    assert generated and len(token) >= 32


@pytest.mark.parametrize("where", ["env", "config"])
def test_http_refuses_a_short_bearer_token(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before the server starts: in this process (support.cli.invoke), as the
    command line gives it."""
    monkeypatch.delenv("SUBAGENTS_MCP_TOKEN", raising=False)
    if where == "env":
        monkeypatch.setenv("SUBAGENTS_MCP_TOKEN", "x" * 15)
    else:
        config_dir = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "config.toml").write_text('mcp_token = "short"\n')
    p = invoke(["mcp", "--http", "--port", "0"])
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "use at least 16" in lines[0], p.stderr
    assert ("$SUBAGENTS_MCP_TOKEN" if where == "env" else "mcp_token in the config") in lines[0]
