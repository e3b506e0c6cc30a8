"""Lifecycle hooks: argv only, entry on stdin, bounded by a timeout, every outcome logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from subagents.config import Hook
from subagents.core import procs
from subagents.lifecycle import hooks, sessionlog


def _entry(event_type: str = "subagent:complete", **kw: Any) -> dict[str, Any]:
    status = {
        "subagent:complete": "completed",
        "subagent:error": "failed",
        "subagent:aborted": "aborted",
    }
    args: dict[str, Any] = {
        "job_id": "job-1",
        "mode": "single",
        "agent_name": "scout",
        "model": "m",
        "pid": os.getpid(),
        "status": status.get(event_type),
        "summary": 'completed: scout — "done"',
    }
    args.update(kw)
    return sessionlog.entry(event_type, **args)


def _group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in process group *pgid*."""
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def _wait_for(predicate: Any, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


@pytest.mark.process
def test_hook_gets_the_entry_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    env_out = tmp_path / "env.txt"
    script = (
        'cat > "$1"; printf "%s %s" "$SUBAGENTS_HOOK_EVENT" "$SUBAGENTS_JOB_ID" > "$2"; echo hi'
    )
    hook = Hook(on=["complete"], command=["sh", "-c", script, "sh", str(out), str(env_out)])
    entry = _entry()
    log = tmp_path / "state" / "hooks.log.jsonl"

    outcomes = hooks.run_hooks(entry, [hook], log)

    assert json.loads(out.read_text()) == entry
    assert env_out.read_text() == "subagent:complete job-1"
    assert [o.outcome for o in outcomes] == ["ok"]
    assert outcomes[0].exit_code == 0 and outcomes[0].stdout_tail == "hi\n"
    records = sessionlog.read(log)
    assert len(records) == 1
    rec = records[0]
    assert rec["type"] == "hook_outcome" and rec["outcome"] == "ok" and rec["exitCode"] == 0
    assert rec["command"][:2] == ["sh", "-c"] and rec["eventType"] == "subagent:complete"
    assert rec["jobId"] == "job-1" and isinstance(rec["durationMs"], int)


@pytest.mark.process
@pytest.mark.parametrize(
    "script",
    [
        "sleep 60",
        # ignores SIGTERM, and so does its child: only the SIGKILL to the group ends them
        'trap "" TERM; sleep 60 & sleep 60',
    ],
)
def test_hanging_hook_is_cut_off_at_its_timeout(tmp_path: Path, script: str) -> None:
    log = tmp_path / "hooks.log.jsonl"
    hook = Hook(on=["complete"], command=["sh", "-c", script], timeout=0.5)
    started = time.monotonic()
    [outcome] = hooks.run_hooks(_entry(), [hook], log)
    took = time.monotonic() - started

    assert outcome.outcome == "timeout"
    assert outcome.exit_code is None and "timed out after 0.5s" in (outcome.error or "")
    assert took < 10, f"run_hooks took {took:.1f}s for a 0.5 s timeout"
    assert outcome.pid is not None
    assert _wait_for(lambda: not _group_members(outcome.pid)), "hook's process group survived"
    [rec] = sessionlog.read(log)
    assert rec["outcome"] == "timeout" and rec["pid"] == outcome.pid


@pytest.mark.process
def test_failing_hook_is_recorded(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log.jsonl"
    hook = Hook(on=["error"], command=["sh", "-c", "echo oops >&2; exit 3"])
    [outcome] = hooks.run_hooks(_entry("subagent:error"), [hook], log)
    assert outcome.outcome == "failed" and outcome.exit_code == 3
    assert outcome.stderr_tail == "oops\n"
    [rec] = sessionlog.read(log)
    assert rec["outcome"] == "failed" and rec["exitCode"] == 3 and rec["stderrTail"] == "oops\n"


@pytest.mark.process
def test_hook_killed_by_a_signal_is_recorded(tmp_path: Path) -> None:
    hook = Hook(on=["error"], command=["sh", "-c", "kill -9 $$"])
    [outcome] = hooks.run_hooks(_entry("subagent:error"), [hook], tmp_path / "h.jsonl")
    assert outcome.outcome == "failed" and outcome.signal == "SIGKILL"


@pytest.mark.process
def test_missing_executable_is_recorded_and_the_next_hook_still_runs(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log.jsonl"
    marker = tmp_path / "ran"
    missing = Hook(on=["complete"], command=[str(tmp_path / "no-such-program"), "x"])
    ok = Hook(on=["complete"], command=["touch", str(marker)])
    outcomes = hooks.run_hooks(_entry(), [missing, ok], log)
    assert [o.outcome for o in outcomes] == ["error", "ok"]
    assert "executable not found" in (outcomes[0].error or "")
    assert marker.exists()
    recs = sessionlog.read(log)
    assert [r["outcome"] for r in recs] == ["error", "ok"]
    assert "no-such-program" in recs[0]["error"]


@pytest.mark.process
def test_big_output_is_bounded_and_a_hook_ignoring_stdin_is_fine(tmp_path: Path) -> None:
    hook = Hook(
        on=["complete"], command=["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' y; exit 0"]
    )
    big = _entry(summary="x" * 150)
    [outcome] = hooks.run_hooks(big, [hook], tmp_path / "h.jsonl")
    assert outcome.outcome == "ok"
    assert 0 < len(outcome.stdout_tail) <= hooks.TAIL_BYTES


@pytest.mark.process
def test_a_grandchild_holding_the_pipes_does_not_hold_up_a_finished_hook(tmp_path: Path) -> None:
    hook = Hook(on=["complete"], command=["sh", "-c", "sleep 30 & echo started"], timeout=20)
    started = time.monotonic()
    [outcome] = hooks.run_hooks(_entry(), [hook], tmp_path / "h.jsonl")
    assert outcome.outcome == "ok"
    assert time.monotonic() - started < 5
    assert outcome.pid is not None
    for proc in _group_members(outcome.pid):  # tidy up the sleep the hook left behind
        proc.kill()


@pytest.mark.process
def test_run_hooks_never_raises(tmp_path: Path) -> None:
    # an unwritable log path: outcomes are still returned
    blocker = tmp_path / "file"
    blocker.write_text("")
    hook = hooks.HookSpec(on=("complete",), command=("true",))
    outcomes = hooks.run_hooks(_entry(), [hook], blocker / "sub" / "hooks.log.jsonl")
    assert [o.outcome for o in outcomes] == ["ok"]


# ---- matching -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on", "event", "expected"),
    [
        (["complete"], "subagent:complete", True),
        (["subagent:complete"], "subagent:complete", True),
        (["complete"], "subagent:error", False),
        (["error", "aborted"], "subagent:aborted", True),
        (["Start"], "subagent:start", True),
        (["*"], "subagent:error", True),
        (["completed"], "subagent:complete", False),
        ([], "subagent:complete", False),
        (["complete"], "bogus", False),
    ],
)
def test_on_matching(on: list[str], event: str, expected: bool) -> None:
    assert hooks.matches(Hook(on=on, command=["true"]), event) is expected


def test_non_matching_hooks_do_not_run_and_log_nothing(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log.jsonl"
    marker = tmp_path / "ran"
    hook = Hook(on=["error"], command=["touch", str(marker)])
    assert hooks.run_hooks(_entry("subagent:complete"), [hook], log) == []
    assert not marker.exists() and not log.exists()


def test_unknown_events() -> None:
    assert hooks.unknown_events(["complete", "subagent:error", "*", "done"]) == ["done"]


# ---- detached -----------------------------------------------------------------------

# A hook that writes its input to $1 once $2 exists (waiting a minute at most).
AFTER_GATE = (
    'i=0; while [ ! -e "$2" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; cat > "$1"'
)


@pytest.mark.process
def test_detached_returns_before_its_hook_runs_and_the_hook_still_runs(tmp_path: Path) -> None:
    out, gate = tmp_path / "got.json", tmp_path / "gate"
    log = tmp_path / "hooks.log.jsonl"
    hook = Hook(on=["complete"], command=["sh", "-c", AFTER_GATE, "sh", str(out), str(gate)])
    entry = _entry()

    # It returns while its hook still waits for the gate (held, it would wait the hook's
    # whole minute): nothing here depends on how fast a loaded machine runs either.
    hooks.run_hooks_detached(entry, [hook], log)
    assert not out.exists()
    gate.touch()
    assert _wait_for(out.exists, 30), "the detached hook never ran"
    assert _wait_for(lambda: len(sessionlog.read(log)) == 1, 10)
    assert json.loads(out.read_text()) == entry
    assert sessionlog.read(log)[0]["outcome"] == "ok"


@pytest.mark.process
def test_detached_hooks_outlive_the_caller(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    log = tmp_path / "hooks.log.jsonl"
    caller = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from subagents.lifecycle import hooks
        from subagents.config import Hook
        out, log = sys.argv[1], Path(sys.argv[2])
        hook = Hook(on=["aborted"], command=["sh", "-c", sys.argv[4], "sh", out, sys.argv[3]])
        hooks.run_hooks_detached({"eventType": "subagent:aborted", "jobId": "j9"}, [hook], log)
        """
    )
    gate = tmp_path / "gate"
    argv = [sys.executable, "-c", caller, str(out), str(log), str(gate), AFTER_GATE]
    proc = subprocess.run(argv, timeout=30)
    assert proc.returncode == 0
    assert not out.exists()  # the caller is gone; the hook still waits for the gate
    gate.touch()
    assert _wait_for(out.exists, 30), "the detached hook died with its caller"
    assert _wait_for(lambda: len(sessionlog.read(log)) == 1, 10)
    assert json.loads(out.read_text()) == {"eventType": "subagent:aborted", "jobId": "j9"}


def test_detached_without_a_matching_hook_spawns_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_spawn(*a: Any, **k: Any) -> Any:
        raise AssertionError("spawned a helper for no hook")

    monkeypatch.setattr(subprocess, "Popen", no_spawn)
    hooks.run_hooks_detached(_entry(), [Hook(on=["error"], command=["true"])], tmp_path / "h.jsonl")
    hooks.run_hooks_detached(_entry(), [], tmp_path / "h.jsonl")


@pytest.mark.process
def test_helper_main_reads_a_file_and_rejects_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    log = tmp_path / "h.jsonl"
    payload = tmp_path / "payload.json"
    payload.write_text(
        json.dumps(
            {
                "entry": _entry(),
                "hooks": [{"on": ["complete"], "command": ["touch", str(marker)], "timeout": 5}],
                "logPath": str(log),
            }
        )
    )
    assert hooks.main([str(payload)]) == 0
    assert marker.exists() and sessionlog.read(log)[0]["outcome"] == "ok"

    payload.write_text(
        '{"entry": {}, "hooks": [{"on": ["complete"], "command": []}], "logPath": "x"}'
    )
    assert hooks.main([str(payload)]) == 2
    assert "bad input" in capsys.readouterr().err
    payload.write_text("not json")
    assert hooks.main([str(payload)]) == 2


# ---- desktop notice -----------------------------------------------------------------


def test_desktop_notice_notify_send(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        procs, "which", lambda name: "/usr/bin/" + name if name == "notify-send" else None
    )
    entry = _entry(summary='failed: worker — "$(rm -rf ~)"')
    assert hooks.desktop_notice_command(entry) == [
        "notify-send",
        "subagents",
        'failed: worker — "$(rm -rf ~)"',
    ]
    spec = hooks.desktop_notice_hook(entry)
    assert (
        spec is not None
        and hooks.matches(spec, "subagent:error")
        and not hooks.matches(spec, "subagent:start")
    )


def test_desktop_notice_osascript_passes_the_text_as_an_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        procs, "which", lambda name: "/usr/bin/osascript" if name == "osascript" else None
    )
    monkeypatch.setattr(sys, "platform", "darwin")
    text = 'done" & do shell script "touch /tmp/pwned'
    cmd = hooks.desktop_notice_command(_entry(summary=text))
    assert cmd is not None and cmd[0] == "osascript"
    assert cmd[-1] == text  # an argv item, never part of the script
    assert all(text not in part for part in cmd[:-1])
    assert "item 1 of argv" in " ".join(cmd)


def test_desktop_notice_none_and_leading_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "which", lambda name: None)
    assert hooks.desktop_notice_command(_entry()) is None
    assert hooks.desktop_notice_hook(_entry()) is None
    monkeypatch.setattr(procs, "which", lambda name: "/x/" + name)
    cmd = hooks.desktop_notice_command(_entry(summary="--help"))
    assert cmd is not None and not cmd[-1].startswith("-")


def test_hooks_log_path(tmp_path: Path) -> None:
    assert hooks.hooks_log_path(tmp_path) == tmp_path / "hooks.log.jsonl"
