"""End to end through our own run path: ``runs.start`` -> supervisor -> the real agent
CLI -> the loopback mock model, for every backend but pi (its own tests cover it).

Each test is skipped, with its reason, when that CLI is not installed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.clistream import (
    FINAL,
    FINAL_TEXT,
    Ran,
    check_server_error,
    check_success,
    parse_stream,
)

from subagents.config import Settings
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.runs import RunRequest, start

pytestmark = pytest.mark.e2e

# name -> (model to pass, config writer with the fewest retries)
BACKENDS: dict[str, tuple[str, Callable[[Path, str], dict[str, str]]]] = {
    "claude": (mm.CLAUDE_MODEL, lambda d, url: mm.write_claude_config(d, url, max_retries=0)),
    "codex": (mm.CODEX_MODEL, lambda d, url: mm.write_codex_config(d, url)),
    "gemini": (mm.GEMINI_MODEL, lambda d, url: mm.write_gemini_config(d, url, max_attempts=1)),
    "opencode": (mm.OPENCODE_MODEL, lambda d, url: mm.write_opencode_config(d, url)),
}

# The canonical tool_call name of the shell command each backend reports.
SHELL_TOOL_EVENT = {
    "claude": "Bash",
    "codex": "command_execution",
    "gemini": "run_shell_command",
    "opencode": "bash",
}

# The error each CLI passes on with the mock's message in it: codex replaces a 5xx
# body with a generic text, so it gets a 400.
ERROR_STATUS = {"claude": 500, "codex": 400, "gemini": 500, "opencode": 500}

# The backends whose command is the CLI's own print mode (codex's is `app-server`): their
# stream, kept verbatim in raw.jsonl, is checked as test_mock_clis checks a CLI it runs
# itself, so these runs are not made there a second time.
RAW_CHECKED = {"claude", "gemini", "opencode"}
EXIT_GRACE = 60.0


def params() -> list[Any]:
    out = []
    for name in BACKENDS:
        marks = [
            pytest.mark.skipif(
                shutil.which(name) is None, reason=f"the {name} CLI is not installed"
            )
        ]
        out.append(pytest.param(name, marks=marks))
    return out


def run(tmp_path: Path, name: str, script: Script) -> tuple[dict[str, Any], int]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    model, writer = BACKENDS[name]
    with MockModelServer(script) as srv:
        env = writer(tmp_path / f"{name}-config", srv.url)
        req = RunRequest(task="list files", backend=name, cwd=str(work), env=env, model=model)
        # A CLI whose exit code is checked (raw_of) gets the time to exit by itself after its
        # last line, not the default quarter second, which a loaded machine may overrun.
        grace = EXIT_GRACE if name in RAW_CHECKED else Settings().grace
        handle = start(req, Settings(default_backend=name, grace=grace))
        result = handle.wait(timeout=120)
        n = len(srv.requests)
    assert result is not None, f"{name} run did not finish"
    return result, n


def raw_of(result: dict[str, Any], n_requests: int) -> Ran:
    """The CLI's own stream and exit code, as the supervisor kept them."""
    paths = result["paths"]
    stream = Path(paths["raw"]).read_text()
    stderr = Path(paths["stderr"]).read_text()
    return Ran(result["exitCode"], parse_stream(stream), stderr, n_requests)


def events_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    lines = Path(result["paths"]["events"]).read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


@pytest.mark.parametrize("name", params())
def test_backend_runs_real_cli_to_completion(tmp_path: Path, name: str) -> None:
    result, n_requests = run(tmp_path, name, Script(final_text=FINAL))
    stderr = Path(result["paths"]["stderr"]).read_text()[-2000:]
    assert result["status"] == "completed", (result.get("errorMessage"), stderr)
    assert result["backend"] == name
    assert result["finalText"] == FINAL_TEXT
    assert result["toolCalls"] >= 1
    assert result["stopReason"] == "stop"
    assert n_requests >= 2
    events = events_of(result)
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["toolName"] == SHELL_TOOL_EVENT[name]
    tool_result = next(e for e in events if e["type"] == "tool_result")
    assert "a.txt" in tool_result["text"] and tool_result["isError"] is False
    assert events[-1]["type"] == "run_finished"
    if name in RAW_CHECKED:
        check_success(name, raw_of(result, n_requests))


@pytest.mark.parametrize("name", params())
def test_backend_server_error_is_a_failure_with_the_message(tmp_path: Path, name: str) -> None:
    script = Script(
        error_status=ERROR_STATUS[name],
        error_times=-1,
        error_message="mock model is down",
        retry_after_ms=0,  # opencode retries 5xx by itself: make that immediate
    )
    result, n_requests = run(tmp_path, name, script)
    assert result["status"] == "failed"
    assert "mock model is down" in (result["errorMessage"] or ""), result
    assert result["diagnostics"]
    assert result["toolCalls"] == 0
    if name in RAW_CHECKED:
        check_server_error(name, raw_of(result, n_requests), "mock model is down")


@pytest.mark.skipif(
    shutil.which("pi") is None or shutil.which("claude") is None,
    reason="needs the pi and claude CLIs",
)
def test_parallel_job_mixing_pi_and_claude(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "b.py").write_text("b = 1\n")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "mode": "parallel",
                "tasks": [
                    {
                        "task": "list files",
                        "backend": "pi",
                        "model": "mock/mock-model",
                        "cwd": str(work),
                    },
                    {
                        "task": "list files",
                        "backend": "claude",
                        "model": mm.CLAUDE_MODEL,
                        "cwd": str(work),
                    },
                ],
            }
        )
    )
    with MockModelServer(Script(final_text=FINAL)) as srv:
        # pi reads its config from PI_CODING_AGENT_DIR; claude from HOME: one env serves both.
        env = {
            **mm.write_pi_config(tmp_path / "pi", srv.url),
            **mm.write_claude_config(tmp_path / "claude", srv.url, max_retries=0),
        }
        # (a foreground run in-process: its runs' processes are what is looked at)
        p = invoke(["run", "--json", "-f", str(plan)], env, bound=180)
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)
    assert job["status"] == "completed"
    assert [r["backend"] for r in job["runs"]] == ["pi", "claude"]
    assert [r["finalText"] for r in job["runs"]] == [FINAL_TEXT, FINAL_TEXT]
    assert all(r["toolCalls"] >= 1 for r in job["runs"])
    # Usage is summed over both runs; claude reports a cost, pi's mock model a zero one.
    assert job["usage"]["totalTokens"] == sum(r["usage"]["totalTokens"] for r in job["runs"])
