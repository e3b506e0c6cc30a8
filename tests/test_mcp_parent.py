"""End to end with a real agent CLI as the parent: the test runs Claude Code against the
loopback mock model; the mock has Claude call our MCP server's ``subagent`` tool;
``subagents mcp`` (stdio, started by Claude from an MCP config) runs the real pi CLI
against the same mock; pi's answer comes back through the tool result into Claude's
final answer.  Only the model is fake.

Skipped, with the reason, when ``claude`` or ``pi`` is not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.claude import block_text, blocks

from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script

needs_clis = pytest.mark.skipif(
    shutil.which("claude") is None or shutil.which("pi") is None,
    reason="needs the claude and pi CLIs (npm install -g @anthropic-ai/claude-code ...)",
)

TOOL = "mcp__subagents__subagent"
PI_ANSWER = "pi listed: a.txt, b.py"
CLAUDE_PREFIX = "Claude relayed:"


def stream_events(stdout: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError:
                continue  # a non-JSON line is noise
            if isinstance(obj, dict):
                out.append(obj)
    return out


def ours(home: str) -> list[psutil.Process]:
    """Live processes carrying this test's SUBAGENTS_HOME: the MCP server and its runs."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("SUBAGENTS_HOME") == home:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        out: dict[str, Any] = json.loads(resp.read())
    return out


def test_per_api_script_answers_each_api_its_own_way() -> None:
    script = Script(
        final_text="chat: {tool_output}",
        per_api={mm.ANTHROPIC: Script(tool_name=TOOL, tool_args={"task": "t"}, final_text="A")},
    )
    with MockModelServer(script) as srv:
        msg = post(srv.url + "/v1/messages", {"messages": [{"role": "user", "content": "x"}]})
        assert msg["content"] == [
            {"type": "tool_use", "id": "toolu_mock_1", "name": TOOL, "input": {"task": "t"}}
        ]
        chat = post(
            srv.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}
        )
        call = chat["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "bash" and json.loads(call["arguments"]) == {"command": "ls"}
        # A request that offers no tools gets that API's own final text.
        body = {"messages": [{"role": "user", "content": "x"}], "tools": []}
        assert post(srv.url + "/v1/messages", body)["content"][0]["text"] == "A"
        assert len(srv.requests) == 3


@pytest.mark.e2e
@needs_clis
def test_claude_calls_subagent_tool_which_runs_pi(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    home = os.environ["SUBAGENTS_HOME"]  # the test's isolated one (conftest)

    # The subagent call Claude makes (pi models are provider/id; a bounded run).
    task = {
        "task": "list the files",
        "backend": "pi",
        "model": mm.OPENCODE_MODEL,
        "cwd": str(work),
        "timeout": 120,
    }
    script = Script(
        final_text="pi listed: {tool_output}",  # pi: bash `ls`, then this
        per_api={
            mm.ANTHROPIC: Script(
                tool_name=TOOL, tool_args=task, final_text=f"{CLAUDE_PREFIX} {{tool_output}}"
            )
        },
    )
    procs_left: list[psutil.Process] = []
    with MockModelServer(script) as srv:
        pi_env = mm.write_pi_config(tmp_path / "pi", srv.url)
        claude_env = mm.write_claude_config(tmp_path / "claude", srv.url, max_retries=0)
        server_env = {
            **pi_env,
            "SUBAGENTS_HOME": home,
            "SUBAGENTS_CONFIG_DIR": os.environ["SUBAGENTS_CONFIG_DIR"],
            "PATH": os.environ.get("PATH", ""),
        }
        mcp_config = tmp_path / "mcp.json"
        mcp_config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "subagents": {
                            "type": "stdio",
                            "command": sys.executable,
                            "args": ["-m", "subagents.cli", "mcp"],
                            "env": server_env,
                        }
                    }
                }
            )
        )
        argv = [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--mcp-config",
            str(mcp_config),
            "--strict-mcp-config",
            "--model",
            mm.CLAUDE_MODEL,
            # As root claude refuses bypassPermissions; this lets the one tool run.
            "--permission-mode",
            "acceptEdits",
            f"--allowedTools={TOOL}",
            "--",
            "Ask a pi subagent to list the files here.",
        ]
        env = {
            **os.environ,
            **claude_env,
            # Claude 2.1 defers MCP tools behind its ToolSearch tool, so a first request
            # would not offer mcp__subagents__subagent: a scripted model cannot search.
            "ENABLE_TOOL_SEARCH": "false",
            "MCP_TOOL_TIMEOUT": "150000",  # ms; below the subprocess timeout
        }
        env.pop("SUBAGENTS_HOME", None)  # claude itself needs none: only its MCP server
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=180,
        )
        http_log = srv.http_log
        deadline = time.monotonic() + 15  # claude may still be closing its MCP server
        while (procs_left := ours(home)) and time.monotonic() < deadline:
            time.sleep(0.2)
    leftover = []
    for p in procs_left:
        with contextlib.suppress(psutil.Error):
            leftover.append((p.pid, p.cmdline()))
            p.kill()
    diag = f"rc={proc.returncode}\nstderr: {proc.stderr[-2000:]}\nstdout: {proc.stdout[-4000:]}"
    assert proc.returncode == 0, diag
    events = stream_events(proc.stdout)

    # Claude called the tool, and its result carries pi's answer.
    uses = [b for b in blocks(events, "tool_use") if b.get("name") == TOOL]
    assert len(uses) == 1, diag
    assert uses[0]["input"]["backend"] == "pi"
    results = [r for r in blocks(events, "tool_result") if r.get("tool_use_id") == uses[0]["id"]]
    assert len(results) == 1, diag
    assert not results[0].get("is_error"), diag
    assert PI_ANSWER in block_text(results[0].get("content")), diag

    # Claude's final answer relays it.  (Claude Code hands the model the tool's
    # structuredContent as JSON, not its text content: the answer is inside that.)
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "success", diag
    assert result["is_error"] is False, diag
    assert result["result"].startswith(CLAUDE_PREFIX) and PI_ANSWER in result["result"], diag

    # Our side: one job, one pi run that completed after a tool call.
    jobs = list(Path(home, "jobs").glob("*/job.json"))
    assert len(jobs) == 1, jobs
    job = json.loads(jobs[0].read_text())
    assert job["status"] == "completed"
    (run,) = job["runs"]
    assert run["backend"] == "pi" and run["status"] == "completed", run
    assert run["toolCalls"] >= 1
    assert run["finalText"] == PI_ANSWER

    # The one mock served both CLIs.
    assert any(line.startswith("POST /v1/messages") for line in http_log), http_log
    assert any(line.startswith("POST /v1/chat/completions") for line in http_log), http_log

    # Nothing of ours outlives claude: not the MCP server, not a pi.
    assert not leftover, leftover
