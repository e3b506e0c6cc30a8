"""Issue 13, input side: no input crashes the tool, no child bytes poison a run. Each case
runs the CLI with a scripted fake child: in this process (``invoke``, the same code), except
where what a terminal or a program reading the CLI's streams gets is the subject."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake

CLI = [sys.executable, "-m", "subagents.cli"]


def cli(
    args: list[str | bytes], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def fake_env(fake: Fake, steps: list[dict[str, Any]]) -> dict[str, str]:
    return {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}


def one_line_exit_2(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def no_jobs(home: Path) -> None:
    jobs = home / "jobs"
    assert not jobs.exists() or not any(p.is_dir() for p in jobs.iterdir()), "half-created job"


def raw(data: bytes) -> dict[str, str]:
    return {"raw": base64.b64encode(data).decode()}


# ---- 1. input validated at the edge -------------------------------------------------


def test_task_not_utf8_is_refused_and_nothing_created(fake: Fake, isolated_state: Path) -> None:
    p = invoke(["run", os.fsdecode(b"fix \xff this")], fake_env(fake, pi.answer("x")))
    one_line_exit_2(p, "task", "not valid UTF-8", "0xff")
    no_jobs(isolated_state)


def test_nul_in_a_plan_task_is_refused(fake: Fake, tmp_path: Path, isolated_state: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"mode": "single", "tasks": [{"task": "a\x00b"}]}))
    one_line_exit_2(
        invoke(["run", "--plan", str(plan)], fake_env(fake, pi.answer("x"))), "tasks.0.task", "NUL"
    )
    no_jobs(isolated_state)


def test_concurrency_zero_is_one_line(fake: Fake) -> None:
    env = fake_env(fake, pi.answer("x"))
    one_line_exit_2(invoke(["run", "-j", "0", "--parallel", "a", "b"], env), "--concurrency")
    one_line_exit_2(invoke(["run", "-j", "0", "a"], env), "--concurrency")


def test_timeouts_out_of_range_are_one_line(fake: Fake, tmp_path: Path) -> None:
    env = fake_env(fake, pi.answer("x"))
    for value in ("1e12", "inf", "-1", "nan", "0"):
        one_line_exit_2(invoke(["run", "--timeout", value, "x"], env), "--timeout")
    # An option given with a plan file is checked as the plan's own fields are.
    plan = tmp_path / "plan.yaml"
    plan.write_text("mode: single\ntasks: [{task: x}]\n")
    one_line_exit_2(invoke(["run", "--plan", str(plan), "--timeout", "inf"], env), "timeout")
    one_line_exit_2(invoke(["run", "x"], {**env, "SUBAGENTS_TIMEOUT": "1e20"}), "SUBAGENTS_TIMEOUT")
    one_line_exit_2(invoke(["run", "x"], {**env, "SUBAGENTS_KILL_GRACE": "inf"}), "KILL_GRACE")


def test_bad_environment_values_are_one_line(fake: Fake) -> None:
    env = fake_env(fake, pi.answer("x"))
    one_line_exit_2(invoke(["run", "x"], {**env, "SUBAGENTS_DEPTH": "two"}), "SUBAGENTS_DEPTH")
    bad_home = os.fsdecode(b"/tmp/\xffhome")
    one_line_exit_2(invoke(["run", "x"], {**env, "SUBAGENTS_HOME": bad_home}), "SUBAGENTS_HOME")


def test_agents_with_a_refused_project_config_is_one_line(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / ".subagents").mkdir(parents=True)
    (project / ".subagents" / "config.toml").write_text('bins = { pi = "/bin/sh" }\n')
    one_line_exit_2(invoke(["agents"], cwd=project), "bins", "not allowed in a project config")


# ---- 2. child output never crashes or poisons a run ----------------------------------


def answer_line(text_json: bytes) -> bytes:
    """A pi message_end line whose answer is the JSON string literal ``text_json``."""
    return (
        b'{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":'
        + text_json
        + b'}],"stopReason":"stop","usage":{}}}\n'
    )


@pytest.mark.process
def test_invalid_utf8_in_the_answer_keeps_the_answer(fake: Fake) -> None:
    steps = [*pi.start(), raw(answer_line(b'"caf\xc3 ok \xff done"'))]
    p = invoke(["run", "--json", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["finalText"] == "caf\ufffd ok \ufffd done"
    raw_stream = Path(result["paths"]["events"]).with_name("raw.jsonl").read_bytes()
    assert b'"caf\xc3 ok \xff done"' in raw_stream  # raw.jsonl stays verbatim


@pytest.mark.process
def test_lone_surrogate_escape_does_not_kill_the_run(fake: Fake) -> None:
    steps = [*pi.start(), raw(answer_line(b'"half an emoji: \\ud83d end"')), *pi.end()]
    p = invoke(["run", "--json", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "completed"
    assert result["finalText"] == "half an emoji: \ufffd end"


ESCAPES = "\x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x07"


@pytest.mark.process
def test_escape_sequences_never_reach_the_terminal_or_transcript(fake: Fake) -> None:
    steps = [
        *pi.start(),
        {
            "emit": {
                "type": "tool_execution_start",
                "toolCallId": "c",
                "toolName": "bash",
                "args": {"command": f"ls {ESCAPES}"},
            }
        },
        pi.text_end(f"answer {ESCAPES}done"),
    ]
    p = cli(["run", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr
    assert "answer done" in p.stderr  # the progress line keeps the text around them
    assert p.stdout == f"answer {ESCAPES}done\n"  # a program reading the answer gets it whole
    run_dir = next((Path(os.environ["SUBAGENTS_HOME"]) / "runs").iterdir())
    transcript = (run_dir / "transcript.md").read_text()
    assert "\x1b" not in transcript and "answer done" in transcript
    job = next((Path(os.environ["SUBAGENTS_HOME"]) / "jobs").iterdir()).name
    for args in (["logs", job], ["show", job]):
        shown = invoke(args)
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout and "answer" in shown.stdout


# ---- 4. big inputs -----------------------------------------------------------------------


@pytest.mark.process
def test_a_task_over_the_argv_limit_reaches_the_child_on_stdin(fake: Fake, tmp_path: Path) -> None:
    task = "start " + "y" * (3 * 1024 * 1024) + " end"
    task_file = tmp_path / "task.txt"
    task_file.write_text(task)
    seen = tmp_path / "seen"
    steps = [{"copy_stdin": str(seen)}, *pi.answer("read it")]
    p = invoke(["run", "-"], fake_env(fake, steps), input=task_file.read_bytes())
    assert p.returncode == 0, p.stderr[-2000:]
    assert seen.read_text() == task


@pytest.mark.process
def test_a_task_over_10_mib_is_refused_up_front(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    task_file = tmp_path / "task.txt"
    task_file.write_text("z" * (10 * 1024 * 1024 + 1))
    p = invoke(["run", "-"], fake_env(fake, pi.answer("x")), input=task_file.read_bytes())
    one_line_exit_2(p, "10485760 bytes")
    no_jobs(isolated_state)


@pytest.mark.process
def test_stderr_log_keeps_head_and_tail(fake: Fake) -> None:
    steps = [
        {"stderr": "HEAD\n"},
        {"stderr": "x" * 1000, "times": 4000},
        {"stderr": "\nTAIL\n"},
        *pi.answer("ok"),
    ]
    p = invoke(["run", "--json", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    log = Path(json.loads(p.stdout)["paths"]["events"]).with_name("stderr.log").read_bytes()
    assert log.startswith(b"HEAD\n") and log.endswith(b"\nTAIL\n")
    assert len(log) < 2 * 1024 * 1024 + 200
    assert b"bytes of stderr dropped here" in log
