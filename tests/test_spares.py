"""Supervisors started ahead of their run (runners/spare.py): a spare never handed a run
exits, a handed-over one behaves like one started for its run, a spare from another
environment is never used, and nothing waits forever. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from support.checks import eventually, pid_alive
from support.warmchild import (
    child,
    child_env,
    fd_target,
    left_by_a_dead_starter,
    parallel_job,
    start_run,
)

from subagents.config import Settings
from subagents.core.files import read_json
from subagents.launchers.spares import SPARES, Spare, start_supervisor
from subagents.runs import RunRequest, start

pytestmark = pytest.mark.process


def ready_spares(warm_owner: object, count: int) -> list[Spare]:
    SPARES.want(warm_owner, count)
    assert eventually(
        lambda: len(SPARES.waiting()) == count and all(s.ready.is_set() for s in SPARES.waiting())
    ), "spares did not come up within 30 s"
    return SPARES.waiting()


def waiting(proc: psutil.Process) -> bool:
    """A live supervisor still waiting for its run (a reaped or dying one is not)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE and "--spare" in proc.cmdline()
    except psutil.Error:
        return False


def test_spares_never_handed_a_run_exit_when_no_longer_wanted(warm_owner: object) -> None:
    spares = ready_spares(warm_owner, 2)
    pids = [s.pid for s in spares]
    for pid in pids:
        assert "--spare" in psutil.Process(pid).cmdline()
        assert os.getsid(pid) == pid  # its own session, as every supervisor
    SPARES.want(warm_owner, 0)
    # want(0) returns once they are gone and reaped: nothing is left behind.
    assert SPARES.pids() == []
    assert not any(psutil.pid_exists(pid) and pid_alive(pid) for pid in pids)


def test_a_handed_over_supervisor_is_like_one_started_for_its_run(
    warm_owner: object, tmp_path: Path
) -> None:
    (spare,) = ready_spares(warm_owner, 1)
    gate = tmp_path / "gate"
    handle = start_run(tmp_path, "warm", gate)
    assert handle.launched.pid == spare.pid  # the spare took the run
    warm_env = child_env(tmp_path, "warm")
    pid = handle.launched.pid
    # Detached as ever: own session; stdin /dev/null, output to the run's supervisor.log.
    assert os.getsid(pid) == pid
    assert fd_target(pid, 0) == os.devnull
    log = str(handle.run_dir / "supervisor.log")
    assert fd_target(pid, 1) == fd_target(pid, 2) == log
    ident = read_json(handle.run_dir / "supervisor.json")
    assert ident == {
        "pid": pid,
        "createTime": psutil.Process(pid).create_time(),
        "runner": "process",
    }
    SPARES.want(warm_owner, 0)

    # The same run from a supervisor started for it (no spare left): the same child env.
    cold = start_run(tmp_path, "cold", gate)
    assert cold.launched.pid != pid
    cold_env = child_env(tmp_path, "cold")
    # Each child carries its own run's id (core.procs.RUN_ENV); nothing else differs.
    assert warm_env.pop("SUBAGENTS_RUN_ID") == handle.run_dir.name
    assert cold_env.pop("SUBAGENTS_RUN_ID") == cold.run_dir.name
    assert warm_env == cold_env
    assert warm_env["SUBAGENTS_CHILD"] == "1" and warm_env["PWD"] == str(tmp_path)

    gate.touch()
    for h, name in ((handle, "warm"), (cold, "cold")):
        result = h.wait(timeout=60)
        assert result is not None
        assert result["status"] == "completed"
        assert result["finalText"] == f"done {name}"
    assert eventually(lambda: not pid_alive(pid))


def test_a_killed_handed_over_supervisor_is_found_dead(warm_owner: object, tmp_path: Path) -> None:
    (spare,) = ready_spares(warm_owner, 1)
    handle = start_run(tmp_path, "killed", tmp_path / "never")
    assert handle.launched.pid == spare.pid
    child_env(tmp_path, "killed")  # the child runs
    events = handle.run_dir / "events.jsonl"
    assert eventually(lambda: b'"run_started"' in events.read_bytes())
    child_pid = next(
        json.loads(line)["pid"]
        for line in events.read_text().splitlines()
        if json.loads(line)["type"] == "run_started"
    )
    os.kill(spare.pid, signal.SIGKILL)
    result = handle.wait(timeout=60)
    assert result is not None
    assert result["status"] == "failed"
    assert "the supervisor died without writing a result" in result["errorMessage"]
    assert eventually(lambda: not pid_alive(child_pid))  # its child's group went with it


def test_a_stop_signal_right_after_the_handover_aborts_the_run(
    warm_owner: object, tmp_path: Path
) -> None:
    (spare,) = ready_spares(warm_owner, 1)
    handle = start_run(tmp_path, "stopped", tmp_path / "never")
    assert handle.launched.pid == spare.pid
    os.kill(spare.pid, signal.SIGTERM)  # as `subagents stop` would, once supervisor.json is out
    result = handle.wait(timeout=60)
    assert result is not None
    assert result["status"] == "aborted"  # written by the supervisor, as a fresh one does
    assert "SIGTERM" in (result["errorMessage"] or "")


def test_a_run_directory_whose_path_holds_a_newline(warm_owner: object, tmp_path: Path) -> None:
    (spare,) = ready_spares(warm_owner, 1)
    gate = tmp_path / "gate"
    gate.touch()
    req = RunRequest(
        task="odd", backend="pi", cwd=str(tmp_path), env={"ENV_DUMP": os.devnull, "GATE": str(gate)}
    )
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(child(tmp_path))}
    handle = start(req, Settings(), env=env, home=tmp_path / "a\nhome")
    assert handle.launched.pid == spare.pid
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    assert result["finalText"] == "done odd"


def test_a_spare_from_another_environment_is_not_used(
    warm_owner: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (spare,) = ready_spares(warm_owner, 1)
    monkeypatch.setenv("SUBAGENTS_TEST_SPARE", "changed")
    gate = tmp_path / "gate"
    gate.touch()
    handle = start_run(tmp_path, "fresh", gate)
    assert handle.launched.pid != spare.pid
    assert child_env(tmp_path, "fresh")["SUBAGENTS_TEST_SPARE"] == "changed"
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    SPARES.want(warm_owner, 0)
    assert not pid_alive(spare.pid)


def test_a_job_leaves_no_spare_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job of one slot through the API (more get a template: test_templates.py): its
    slot's spares are handed runs or go at its end."""
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(child(tmp_path)))
    parallel_job(tmp_path, 5, 1)
    assert SPARES.pids() == []
    # The last runs' supervisors are reaped in the background; a spare left waiting would
    # stay for its whole bound (600 s).
    assert eventually(
        lambda: not [p for p in psutil.Process().children(recursive=True) if waiting(p)]
    )


def test_a_waiting_spare_exits_quietly_on_eof(tmp_path: Path) -> None:
    spare = start_supervisor()
    spare.wait_ready(30)
    assert spare.popen.poll() is None
    spare.dismiss()  # what the pool does, and what its starter's death does to the pipe
    assert spare.popen.wait(30) == 0


def test_a_spare_whose_starter_dies_exits() -> None:
    pid = left_by_a_dead_starter(
        "from subagents.launchers.spares import start_supervisor; w = start_supervisor()"
    )
    assert eventually(lambda: not pid_alive(pid)), "an orphaned spare kept waiting"


def test_a_spare_exits_on_a_stop_signal_while_waiting() -> None:
    spare = start_supervisor()
    spare.wait_ready(30)
    os.kill(spare.pid, signal.SIGTERM)
    assert spare.popen.wait(30) == 0
    spare.dismiss()


def test_a_spare_waits_a_bounded_time() -> None:
    code = "import sys, subagents.supervisor.handover as s; sys.exit(0 if s.await_run([], 0.3) is None else 1)"
    with subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE) as p:
        # stdin stays open and silent: only the bound ends the wait.
        assert p.wait(30) == 0
        assert p.stdin is not None
        p.stdin.close()
