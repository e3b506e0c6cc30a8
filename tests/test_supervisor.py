"""The supervisor's completion semantics, through real processes and signals.

Each test starts a real supervisor (via the process runner) whose child is the
scriptable fake agent playing a pi stream.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.fake import Fake

from subagents.core.files import read_events
from subagents.runs import RunHandle
from subagents.supervisor.lines import READ_SIZE

pytestmark = pytest.mark.process


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _events(result: dict) -> list[dict]:
    return read_events(Path(result["paths"]["events"]))


def child_pid(handle: RunHandle) -> int:
    """The child's pid, from its run_started event."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for e in handle.monitor.new_events():
            if e["type"] == "run_started":
                return int(e["pid"])
        time.sleep(0.05)
    raise AssertionError("the run never started")


def test_normal_end(fake: Fake) -> None:
    result = fake.run(pi.answer("All done."))
    assert result["status"] == "completed"
    assert result["finalText"] == "All done."
    assert result["stopReason"] == "stop"
    assert result["exitCode"] == 0 and result["signal"] is None
    assert result["toolCalls"] == 1
    assert result["usage"]["input"] == 20 and result["usage"]["output"] == 10
    assert result["usage"]["cost"] == pytest.approx(0.002)
    assert result["diagnostics"] is None
    run_dir = Path(result["paths"]["events"]).parent
    for name in (
        "meta.json",
        "raw.jsonl",
        "events.jsonl",
        "transcript.md",
        "stderr.log",
        "result.json",
    ):
        assert (run_dir / name).exists(), name
        assert (run_dir / name).stat().st_mode & 0o777 == 0o600, name
    assert run_dir.stat().st_mode & 0o777 == 0o700
    types = [e["type"] for e in _events(result)]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert [e["seq"] for e in _events(result)] == list(range(1, len(types) + 1))
    assert "All done." in (run_dir / "transcript.md").read_text()


def test_lingering_child_is_cleaned_up_and_still_completed(fake: Fake) -> None:
    result = fake.run([*pi.start(), pi.text_end("Final answer."), *pi.end(), {"hang": True}])
    assert result["status"] == "completed"
    assert result["finalText"] == "Final answer."
    assert result["forcedCleanup"] is True
    assert result["signal"] == "SIGTERM"
    final_event = next(e for e in _events(result) if e["type"] == "assistant_text")
    assert _ts(result["completedAt"]) - final_event["ts"] < 1.0


def test_tool_use_then_slow_tool_is_not_killed(fake: Fake) -> None:
    steps = [
        *pi.start(),
        *pi.tool_use(),
        {"sleep": 1.5},  # six grace windows
        *pi.tool_end(),
        pi.text_end("The later answer."),
        *pi.end(),
    ]
    result = fake.run(steps)
    assert result["status"] == "completed"
    assert result["finalText"] == "The later answer."
    assert result["forcedCleanup"] is False
    assert result["exitCode"] == 0


def test_tool_use_turn_with_text_is_not_the_end(fake: Fake) -> None:
    # Text plus a tool call in one message, then silence: toolUse never arms completion.
    call = {"type": "toolCall", "id": "c9", "name": "bash", "arguments": {"command": "sleep 2"}}
    msg = pi.assistant([{"type": "text", "text": "Let me check."}, call], "toolUse")
    steps = [
        *pi.start(),
        {"emit": {"type": "message_end", "message": msg}},
        {"sleep": 1.5},  # six grace windows
        pi.text_end("Checked."),
        *pi.end(),
    ]
    result = fake.run(steps)
    assert result["status"] == "completed" and result["finalText"] == "Checked."
    assert result["forcedCleanup"] is False


def test_child_ignoring_sigterm_is_killed(fake: Fake) -> None:
    steps = [
        {"ignore_sigterm": True},
        *pi.start(),
        pi.text_end("Done anyway."),
        *pi.end(),
        {"hang": True},
    ]
    result = fake.run(steps)
    assert result["status"] == "completed"
    assert result["finalText"] == "Done anyway."
    assert result["forcedCleanup"] is True
    assert result["signal"] == "SIGKILL"


def test_death_by_sigkill_mid_run_is_a_named_failure(fake: Fake) -> None:
    result = fake.run([*pi.start(), *pi.tool_use(), {"kill": "SIGKILL"}])
    assert result["status"] == "failed"
    assert result["signal"] == "SIGKILL"
    assert "SIGKILL" in result["errorMessage"]
    assert result["finalText"] == ""
    assert "SIGKILL" in result["diagnostics"]


def test_exit_zero_without_an_answer_fails(fake: Fake) -> None:
    result = fake.run([*pi.start(), {"exit": 0}])
    assert result["status"] == "failed"
    assert result["exitCode"] == 0
    assert "without a final answer" in result["errorMessage"]


def test_nonzero_exit_names_the_code_and_stderr(fake: Fake) -> None:
    result = fake.run([{"stderr": "boom: provider unreachable\n"}, {"exit": 3}])
    assert result["status"] == "failed"
    assert result["exitCode"] == 3
    assert "code 3" in result["errorMessage"]
    assert "boom: provider unreachable" in result["errorMessage"]
    assert "boom: provider unreachable" in result["diagnostics"]


def test_model_error_fails_even_with_exit_zero(fake: Fake) -> None:
    # pi's json mode exits 0 when the model errored: the stream decides.
    steps = [
        *pi.start(),
        pi.text_end("", stop="error", errorMessage="500 upstream exploded"),
        *pi.end(),
    ]
    result = fake.run(steps)
    assert result["status"] == "failed"
    assert result["exitCode"] == 0
    assert result["errorMessage"] == "500 upstream exploded"


def test_auto_retry_reopens_the_run(fake: Fake) -> None:
    steps = [
        *pi.start(),
        pi.text_end("", stop="error", errorMessage="503 overloaded"),
        *pi.end(),
        {
            "emit": {
                "type": "auto_retry_start",
                "attempt": 1,
                "maxAttempts": 3,
                "delayMs": 1500,
                "errorMessage": "503 overloaded",
            }
        },
        {"sleep": 1.5},  # longer than the grace window: disarmed by the retry notice
        *pi.start(),
        pi.text_end("Recovered."),
        *pi.end(),
    ]
    result = fake.run(steps)
    assert result["status"] == "completed"
    assert result["finalText"] == "Recovered."
    assert result["forcedCleanup"] is False
    notices = [e for e in _events(result) if e["type"] == "notice"]
    assert any("retrying" in e["message"] for e in notices)


def test_pi087_will_retry_keeps_the_run_through_a_slow_retry_start(fake: Fake) -> None:
    # pi 0.87 says "willRetry" at the end of agent_end (a line read unparsed); the retry
    # notice may come later than the grace window: the run must not be ended meanwhile.
    steps = [
        *pi.start(),
        pi.text_end("", stop="error", errorMessage="503 overloaded"),
        {"emit": {"type": "agent_end", "messages": [{"role": "user"}], "willRetry": True}},
        {"sleep": 1.5},  # six grace windows
        {"emit": {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 0}},
        *pi.start(),
        pi.text_end("Recovered."),
        *pi.end(),
    ]
    result = fake.run(steps)
    assert result["status"] == "completed", result
    assert result["finalText"] == "Recovered."
    assert result["forcedCleanup"] is False


def test_retries_exhausted_is_a_failure(fake: Fake) -> None:
    steps = [
        *pi.start(),
        pi.text_end("", stop="error", errorMessage="500 nope"),
        *pi.end(),
        {
            "emit": {
                "type": "auto_retry_start",
                "attempt": 1,
                "maxAttempts": 1,
                "delayMs": 10,
                "errorMessage": "500 nope",
            }
        },
        *pi.start(),
        pi.text_end("", stop="error", errorMessage="500 nope"),
        *pi.end(),
        {
            "emit": {
                "type": "auto_retry_end",
                "success": False,
                "attempt": 1,
                "finalError": "500 nope",
            }
        },
    ]
    result = fake.run(steps)
    assert result["status"] == "failed"
    assert result["errorMessage"] == "500 nope"


def test_noise_and_a_5mb_line_are_recorded_not_fatal(fake: Fake) -> None:
    steps = [
        *pi.start(),
        {"emit": "this is not json"},
        {"big_line": 5_000_000},
        {"emit": "[1, 2]"},
        pi.text_end("Still fine."),
        *pi.end(),
    ]
    result = fake.run(steps)
    assert result["status"] == "completed"
    assert result["finalText"] == "Still fine."
    raw = Path(result["paths"]["raw"])
    assert raw.stat().st_size > 5_000_000
    lines = raw.read_bytes().split(b"\n")
    assert b"this is not json" in lines
    assert max(len(x) for x in lines) == 5_000_000
    notices = [e["message"] for e in _events(result) if e["type"] == "notice"]
    assert any("non-JSON" in m and "5000000 bytes" in m for m in notices)


def test_grandchild_holding_stdout_does_not_keep_the_run_alive(fake: Fake, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    steps = [
        *pi.start(),
        {"grandchild": 60, "pidfile": str(pidfile)},
        pi.text_end("Bye."),
        *pi.end(),
        {"exit": 0},
    ]
    t0 = time.monotonic()
    result = fake.run(steps)
    elapsed = time.monotonic() - t0
    assert result["status"] == "completed" and result["finalText"] == "Bye."
    assert elapsed < 30  # not the grandchild's 60 s
    grandchild = int(pidfile.read_text())
    assert eventually(lambda: not pid_alive(grandchild), 5)


def test_wall_clock_timeout(fake: Fake) -> None:
    result = fake.run([*pi.start(), *pi.tool_use(), {"sleep": 60}], timeout=1.0)
    assert result["status"] == "timeout"
    assert "timed out after 1s" in result["errorMessage"]
    # The calls made before the timeout are counted (a loaded machine may start the child
    # too slowly for it to make its one call within the second).
    calls = [e for e in _events(result) if e["type"] == "tool_call"]
    assert result["toolCalls"] == len(calls) <= 1


def test_answer_before_timeout_wins(fake: Fake) -> None:
    # The final answer is captured, then the child lingers past the timeout: still completed.
    # The answer must come before the timeout: a run with no answer in it (a child slower
    # to start than 2 s, on a loaded machine) shows nothing, and runs again with 10 s.
    fake.grace = 60.0
    steps = [*pi.start(), pi.text_end("In time."), *pi.end(), {"hang": True}]
    result = fake.run(steps, timeout=2.0)
    if not result["finalText"]:
        result = fake.run(steps, timeout=10.0)
    assert result["status"] == "completed"
    assert result["finalText"] == "In time."


def test_sigterm_to_supervisor_aborts_and_kills_the_child(fake: Fake) -> None:
    handle = fake.start([*pi.start(), *pi.tool_use(), {"sleep": 60}])
    child = child_pid(handle)
    os.kill(handle.launched.pid, signal.SIGTERM)
    result = handle.wait(timeout=30)
    assert result is not None
    assert result["status"] == "aborted"
    assert "SIGTERM" in result["errorMessage"]
    assert not pid_alive(child)


def test_stop_handle_aborts(fake: Fake) -> None:
    handle = fake.start([*pi.start(), {"sleep": 60}])
    time.sleep(0.3)
    result = handle.stop()
    assert result["status"] == "aborted"


def test_supervisor_killed_by_sigkill_gives_a_failed_result(fake: Fake) -> None:
    handle = fake.start([*pi.start(), *pi.tool_use(), {"sleep": 60}])
    child = child_pid(handle)
    os.kill(handle.launched.pid, signal.SIGKILL)
    t0 = time.monotonic()
    result = handle.wait(timeout=30)
    assert result is not None, "the monitor waited on a dead supervisor"
    assert time.monotonic() - t0 < 10
    assert result["status"] == "failed"
    assert "supervisor died" in result["errorMessage"]
    assert eventually(lambda: not pid_alive(child), 5), "the orphaned child was left running"
    on_disk = json.loads((handle.run_dir / "result.json").read_text())
    assert on_disk["status"] == "failed"


def test_spawn_failure_still_writes_a_failed_result(fake: Fake) -> None:
    handle_env = fake.env([])
    from subagents.config import Settings
    from subagents.launchers import Placement
    from subagents.runs import RunRequest, prepare, start_prepared

    spec, run_dir = prepare(
        RunRequest(task="x", backend="pi", cwd=str(fake.dir), env=handle_env),
        Settings(),
        env={**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)},
    )
    fake.launcher.unlink()  # gone between validation and spawn
    result = start_prepared(spec, run_dir, Placement()).wait(timeout=30)
    assert result is not None
    assert result["status"] == "failed"
    assert "could not start" in result["errorMessage"]
    assert str(fake.launcher) in result["errorMessage"]


def test_child_env_marks_depth_and_child(fake: Fake, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    keys = ("SUBAGENTS_CHILD", "SUBAGENTS_DEPTH", "PI_SUBAGENTS_CHILD", "PWD")
    script = f"import json, os; json.dump({{k: os.environ.get(k) for k in {keys!r}}}, open({str(out)!r}, 'w'))"
    launcher = fake.dir / "envdump"
    launcher.write_text(f"#!{os.sys.executable}\n{script}\n")
    launcher.chmod(0o755)
    fake.launcher = launcher
    fake.run([])
    # PWD too: some CLIs (opencode) take their working directory from it.
    assert json.loads(out.read_text()) == {
        "SUBAGENTS_CHILD": "1",
        "SUBAGENTS_DEPTH": "1",
        "PI_SUBAGENTS_CHILD": "1",
        "PWD": str(fake.dir.resolve()),
    }


def test_stdin_is_dev_null(fake: Fake, tmp_path: Path) -> None:
    out = tmp_path / "stdin.txt"
    launcher = fake.dir / "stdincheck"
    launcher.write_text(
        f"#!{os.sys.executable}\nimport os\nopen({str(out)!r}, 'w').write(os.readlink('/proc/self/fd/0'))\n"
    )
    launcher.chmod(0o755)
    fake.launcher = launcher
    fake.run([])
    assert out.read_text() == "/dev/null"


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
def test_child_stdout_is_a_big_pipe_from_its_first_byte(fake: Fake, tmp_path: Path) -> None:
    # The supervisor reads up to 1 MiB at a time: the pipe holds as much, before the child
    # starts (a pipe grown after the spawn would race the child's first writes).
    probe_r, probe_w = os.pipe()
    try:
        fcntl.fcntl(probe_w, fcntl.F_SETPIPE_SZ, READ_SIZE)
    except OSError:
        pytest.skip("this machine refuses a 1 MiB pipe")
    finally:
        os.close(probe_r)
        os.close(probe_w)
    out = tmp_path / "pipe.txt"
    launcher = fake.dir / "pipecheck"
    launcher.write_text(
        f"#!{os.sys.executable}\nimport fcntl\n"
        f"open({str(out)!r}, 'w').write(str(fcntl.fcntl(1, fcntl.F_GETPIPE_SZ)))\n"
    )
    launcher.chmod(0o755)
    fake.launcher = launcher
    fake.run([])
    assert int(out.read_text()) == READ_SIZE


def test_sigkill_after_thirty_tool_calls_diagnostics(fake: Fake) -> None:
    steps = [*pi.start()]
    for i in range(30):
        steps += [*pi.tool_use(f"c{i}", f"cat file{i}.txt"), *pi.tool_end(f"c{i}", f"contents {i}")]
    steps += [{"stderr": "about to die\n"}, {"kill": "SIGKILL"}]
    result = fake.run(steps)
    assert result["status"] == "failed" and result["signal"] == "SIGKILL"
    assert result["toolCalls"] == 30
    diag = result["diagnostics"]
    sections = [line for line in diag.splitlines() if line.startswith("## ")]
    assert sections[:3] == ["## Error", "## Status", "## stderr (tail)"]
    assert any(s.startswith("## Activity") for s in sections) and "## Post-mortem" in sections
    assert "signal=SIGKILL" in diag
    assert "## Activity (30 tool calls, showing the last 20; the older 10 in " in diag
    assert result["paths"]["events"] in diag
    assert "cat file29.txt" in diag and "cat file10.txt" in diag and "cat file9.txt" not in diag
    assert f"jq . < {result['paths']['raw']}" in diag.replace("'", "")


def test_stop_at_any_moment_of_the_start_is_an_abort(fake: Fake, tmp_path: Path) -> None:
    # Stopped while the supervisor is still starting (or just spawned its child): aborted,
    # never "failed", and no child left behind.
    for i in range(5):
        pidfile = tmp_path / f"child{i}.pid"
        handle = fake.start([{"pidfile": str(pidfile)}, *pi.start(), {"sleep": 60}])
        time.sleep(0.02 * i)
        result = handle.stop()
        assert result["status"] == "aborted", (i, result["errorMessage"])
        if pidfile.exists():
            child = int(pidfile.read_text())
            assert eventually(lambda child=child: not pid_alive(child), 10)
