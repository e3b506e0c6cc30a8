"""The Claude Code plugin (integrations/claude-code), loaded by the real Claude Code CLI.

Claude runs against the loopback mock model with ``--plugin-dir``; the plugin starts
``subagents mcp --claude-session``; the mock has Claude start a background job through the
plugin's MCP tool; that job runs the real pi CLI against the same mock. Once the job has
ended, the next prompt's request carries the plugin's hook notice (the mock sees it), and
the prompt after that does not carry it again. Only the model is fake.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest
from support.checks import eventually
from support.claude import PLUGIN_SERVER_ENV, block_text, blocks, last_user_text, strings

from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.jobs import JobStore

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "integrations" / "claude-code"
SERVER = "plugin:subagents:subagents"
TOOL = "mcp__plugin_subagents_subagents__subagent"
PI_ANSWER = "pi listed: a.txt, b.py"

needs_claude = pytest.mark.skipif(shutil.which("claude") is None, reason="needs the claude CLI")
needs_pi = pytest.mark.skipif(shutil.which("pi") is None, reason="needs the pi CLI")


def subagents_on_path() -> str:
    """PATH with this environment's ``subagents`` first: the plugin runs it by name."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def test_marketplace_at_the_repo_root_installs_the_plugin(tmp_path: Path) -> None:
    if shutil.which("claude") is None:
        pytest.skip("needs the claude CLI")
    env = {**os.environ, "HOME": str(tmp_path), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}

    def claude(*args: str) -> str:
        proc = subprocess.run(
            ["claude", "plugin", *args],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout

    claude("validate", str(PLUGIN))
    claude("validate", str(REPO))  # the marketplace manifest
    claude("marketplace", "add", str(REPO))
    claude("install", "subagents@subagents")
    (plugin,) = [
        p for p in json.loads(claude("list", "--json")) if p["id"] == "subagents@subagents"
    ]
    assert plugin["enabled"] is True
    assert plugin["mcpServers"]["subagents"] == {
        "command": "subagents",
        "args": ["mcp", "--claude-session"],
    }


class Claude:
    """One ``claude -p`` taking prompts as stream-json lines on stdin."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        self.lines: list[dict[str, Any]] = []

    def ask(self, text: str, timeout: float = 180) -> list[dict[str, Any]]:
        """Send one prompt; the stream lines up to its ``result``."""
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        message = {"type": "user", "message": {"role": "user", "content": text}}
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()
        deadline = time.monotonic() + timeout
        out: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            line = stdout.readline()  # claude answers every prompt with a result line
            if not line:
                break
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                out.append(obj)
                if obj.get("type") == "result":
                    break
        self.lines += out
        return out

    def close(self) -> str:
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        return self.proc.stderr.read() if self.proc.stderr else ""


def request_for(requests: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """The Anthropic requests whose last user message is *prompt*'s."""
    out = []
    for req in requests:
        users = [m for m in req.get("messages") or [] if m.get("role") == "user"]
        if users and prompt in block_text(users[-1].get("content")):
            out.append(req)
    return out


@needs_claude
@needs_pi
def test_plugin_delegates_and_tells_the_next_prompt_once_a_background_job_ended(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    home = Path(os.environ["SUBAGENTS_HOME"])
    task = {
        "task": "list the files",
        "backend": "pi",
        "model": mm.OPENCODE_MODEL,
        "cwd": str(work),
        "timeout": 120,
        "background": True,
    }
    script = Script(
        final_text="pi listed: {tool_output}",
        per_api={mm.ANTHROPIC: Script(tool_name=TOOL, tool_args=task, final_text="Started it.")},
    )
    with MockModelServer(script) as srv:
        env = {
            **os.environ,
            **mm.write_pi_config(tmp_path / "pi", srv.url),
            **mm.write_claude_config(tmp_path / "claude", srv.url, max_retries=0),
            "PATH": subagents_on_path(),
            **PLUGIN_SERVER_ENV,
        }
        argv = [
            "claude",
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--plugin-dir",
            str(PLUGIN),
            "--model",
            mm.CLAUDE_MODEL,
            "--permission-mode",
            "acceptEdits",
            f"--allowedTools={TOOL}",
        ]
        claude = Claude(argv, env, work)
        try:
            first = claude.ask("Start a background pi job to list the files.")
            diag = lambda: f"stream: {json.dumps(claude.lines)[-6000:]}"  # noqa: E731
            init = next(e for e in first if e.get("subtype") == "init")
            # The init message lists the plugin, its MCP server (connected) and its tool.
            assert any(p.get("name") == "subagents" for p in init.get("plugins") or []), init
            servers = {s["name"]: s for s in init.get("mcp_servers") or []}
            assert servers.get(SERVER, {}).get("status") == "connected", init
            assert TOOL in init["tools"], init
            assert any("subagents" in c for c in init.get("slash_commands") or []), init

            # The model called the tool; the job started in the background.
            (use,) = [b for b in blocks(first, "tool_use") if b.get("name") == TOOL]
            assert use["input"]["background"] is True
            (res,) = [r for r in blocks(first, "tool_result") if r["tool_use_id"] == use["id"]]
            assert not res.get("is_error"), diag()
            job_id = json.loads(block_text(res["content"]))["jobId"]

            # Its jobs go to the Claude session's lifecycle log; wait for the job's end.
            log = home / "sessions" / f"claude-{init['session_id']}.jsonl"

            job_file = home / "jobs" / job_id / "job.json"

            def ended() -> bool:  # the end entry is written first, then the job result
                return "runs" in json.loads(job_file.read_text())

            assert eventually(ended, timeout=150), diag()
            assert '"subagent:complete"' in log.read_text()
            job = JobStore(home).load(job_id)  # job.json keeps the answer in runs only
            assert job["status"] == "completed" and job["finalText"] == PI_ANSWER, job

            # The next prompt carries the notice: job id, task, status, cost, the answer.
            claude.ask("Any news?")
            (req,) = request_for(srv.requests, "Any news?")
            told = last_user_text(req)
            assert "UserPromptSubmit hook additional context" in told, told
            notice = next(line for line in told.splitlines() if f"job {job_id}" in line)
            # (its task's first words after the id, then the whole answer for the model)
            assert f"✓ job {job_id} (" in notice and ") · pi · " in notice, notice
            assert " tokens · $" in notice, notice
            assert notice.endswith(f"answer: {json.dumps(PI_ANSWER)}"), notice

            # Once: the prompt after that adds no second notice (the first one stays in the
            # conversation's history).
            claude.ask("And now?")
            (again,) = request_for(srv.requests, "And now?")
            told_in = lambda r: "\n".join(strings(r["messages"])).count(f"job {job_id} ")  # noqa: E731
            assert told_in(req) == 1, told
            assert told_in(again) == 1, last_user_text(again)
        finally:
            stderr = claude.close()
    assert claude.proc.returncode == 0, stderr[-3000:]
