"""`subagents run` as a user runs it: a real process, real exit codes, stdout kept clean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually, live_descendants, needs_pi, pid_alive
from support.cli import CLI, cli, invoke
from support.fake import Fake, fake_env

from subagents.demo.mockmodel import MockModelServer, Script, write_pi_config


@pytest.mark.process
def test_answer_on_stdout_progress_on_stderr(fake: Fake) -> None:
    p = cli(["run", "do the thing"], fake_env(fake, pi.answer("The answer.")))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "The answer.\n"
    assert "run " in p.stderr  # the run id, so the run directory can be found
    assert "$ ls" in p.stderr


@pytest.mark.process
def test_json_prints_result_json_only(fake: Fake) -> None:
    p = cli(["run", "--json", "x"], fake_env(fake, pi.answer("Yes.")))
    assert p.returncode == 0
    result = json.loads(p.stdout)
    assert result["status"] == "completed" and result["finalText"] == "Yes."
    on_disk = json.loads(Path(result["paths"]["events"]).with_name("result.json").read_text())
    assert on_disk == result


@pytest.mark.process
def test_exit_codes_follow_status(fake: Fake) -> None:
    failed = cli(["run", "x"], fake_env(fake, [{"exit": 3}]))
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert "exited with code 3" in failed.stderr
    timed_out = cli(["run", "--timeout", "0.5", "x"], fake_env(fake, [*pi.start(), {"sleep": 30}]))
    assert timed_out.returncode == 124
    assert "timed out" in timed_out.stderr


def _one_line_exit_2(p: subprocess.CompletedProcess[str], needle: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    assert needle in lines[0]


def test_bad_input_is_one_line_and_exit_2(fake: Fake, tmp_path: Path, isolated_state: Path) -> None:
    _one_line_exit_2(invoke(["run", "--backend", "nope", "x"]), "unknown backend 'nope'")
    _one_line_exit_2(
        invoke(["run", "x"], {"SUBAGENTS_PI_BIN": str(tmp_path / "missing-pi")}), "not found"
    )
    _one_line_exit_2(
        invoke(["run", "x"], {"PATH": str(tmp_path), "SUBAGENTS_PI_BIN": ""}), "not found on PATH"
    )
    _one_line_exit_2(
        invoke(["run", "--cwd", str(tmp_path / "nowhere"), "x"], fake_env(fake, [])),
        "does not exist",
    )
    _one_line_exit_2(invoke(["run", "   "], fake_env(fake, [])), "task is empty")
    _one_line_exit_2(
        invoke(["run", "x"], {**fake_env(fake, []), "SUBAGENTS_DEPTH": "2"}), "nesting depth 3"
    )
    # None of these created a run directory.
    assert not (isolated_state / "runs").exists() or not any((isolated_state / "runs").iterdir())


@pytest.mark.process
def test_ctrl_c_aborts_cleanly(fake: Fake, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    env = {**os.environ, **fake_env(fake, [{"pidfile": str(pidfile)}, *pi.start(), {"sleep": 60}])}
    proc = subprocess.Popen(
        [*CLI, "run", "x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert eventually(pidfile.exists)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "aborted" in err
    assert out == ""
    child = int(pidfile.read_text())
    assert eventually(lambda: not pid_alive(child), 5)


@pytest.mark.e2e
@needs_pi
def test_real_pi_against_the_mock_model(tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "hello.txt").write_text("hi\n")
    script = Script(final_text="Found: {tool_output}")
    with MockModelServer(script) as server:
        env = write_pi_config(tmp_path / "pi-agent", server.url)
        p = cli(
            [
                "run",
                "--json",
                "--model",
                "mock/mock-model",
                "--tools",
                "bash,read",
                "--cwd",
                str(work),
                "List the files.",
            ],
            env,
        )
        assert len(server.requests) == 2
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "completed"
    assert result["finalText"] == "Found: hello.txt"
    assert result["toolCalls"] == 1
    assert result["model"] == "mock-model"
    assert result["usage"]["totalTokens"] == 30
    events = [json.loads(x) for x in Path(result["paths"]["events"]).read_text().splitlines()]
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["toolName"] == "bash" and call["args"] == {"command": "ls"}
    tool_result = next(e for e in events if e["type"] == "tool_result")
    assert "hello.txt" in tool_result["text"]
    # No process of the run is left behind.
    assert not [name for _, name, _ in live_descendants() if name in ("pi", "node")]


@pytest.mark.e2e
@needs_pi
def test_real_pi_provider_error_is_a_failure_with_the_message(tmp_path: Path) -> None:
    with MockModelServer(Script(error_status=500, error_times=-1)) as server:
        env = write_pi_config(
            tmp_path / "pi-agent",
            server.url,
            retry={
                "enabled": True,
                "maxRetries": 1,
                "baseDelayMs": 50,
                "provider": {"maxRetries": 0},
            },
        )
        p = cli(["run", "--json", "--model", "mock/mock-model", "--cwd", str(tmp_path), "hi"], env)
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "failed"
    assert "500" in result["errorMessage"] and "mock server error" in result["errorMessage"]
    assert result["exitCode"] == 0  # pi exits 0 here: the stream told us it failed
    assert "## Error" in result["diagnostics"]


@pytest.mark.process
def test_doctor_names_missing_backends_with_install_commands(tmp_path: Path) -> None:
    env = {
        "PATH": str(tmp_path),
        **{
            f"SUBAGENTS_{b.upper()}_BIN": ""
            for b in ("pi", "claude", "codex", "gemini", "opencode")
        },
    }
    p = cli(["doctor"], env)
    assert p.returncode == 1, p.stderr  # nothing here could run a task
    assert "no backend is usable" in p.stderr
    assert "npm install -g @earendil-works/pi-coding-agent" in p.stdout
    as_json = cli(["doctor", "--json"], env)
    assert as_json.returncode == 1
    rows = [json.loads(x) for x in as_json.stdout.splitlines()]
    native = {"pi", "claude", "codex", "gemini", "opencode"}
    acp = {"acp:claude", "acp:codex", "acp:copilot", "acp:gemini", "acp:kilo", "acp:opencode"}
    assert {r["name"] for r in rows} == native | acp | {"acp:qwen"}
    assert all(r["binary"] is None and r["usable"] is False for r in rows)
