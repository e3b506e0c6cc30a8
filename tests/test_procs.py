"""The one way anything is stopped: terminate, a bounded grace, kill (core.procs), against
real process groups; a group we may not signal is not ours."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support.checks import pid_alive
from support.fake import Fake

from subagents.core import procs
from subagents.launchers.base import write_record
from subagents.launchers.local import LocalSupervisor


def _group(script: str, groups: list[int]) -> subprocess.Popen[bytes]:
    """``sh -c script`` leading a process group of its own, once it has said ``ready``."""
    proc = subprocess.Popen(
        ["sh", "-c", script],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    groups.append(proc.pid)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    return proc


@pytest.mark.process
def test_a_group_that_ends_on_sigterm_ends_within_the_grace(reap_group: list[int]) -> None:
    proc = _group("echo ready; exec sleep 60", reap_group)
    assert procs.stop_group(proc.pid, 60, reap=proc.poll) is True
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert not procs.group_alive(proc.pid)


@pytest.mark.process
def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(reap_group: list[int]) -> None:
    proc = _group("trap '' TERM; echo ready; exec sleep 60", reap_group)
    t0 = time.monotonic()
    assert procs.stop_group(proc.pid, 0.3, reap=proc.poll) is False
    assert time.monotonic() - t0 >= 0.3  # it had its grace
    assert proc.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.process
def test_a_grandchild_ignoring_sigterm_goes_with_its_group(reap_group: list[int]) -> None:
    # The leader ends on SIGTERM; what it left in the group does not: the group is not over.
    proc = _group("(trap '' TERM; echo ready; exec sleep 60) & wait", reap_group)
    assert procs.stop_group(proc.pid, 0.3, reap=proc.poll) is False
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert procs.wait_group(proc.pid, 30)  # the grandchild got the SIGKILL


def test_escalate_sends_sigkill_only_when_the_end_does_not_come() -> None:
    sent: list[int] = []
    assert procs.escalate(sent.append, lambda grace: True, 5.0) is True
    assert sent == [signal.SIGTERM]
    sent.clear()
    waited: list[float] = []
    assert (
        procs.escalate(sent.append, lambda g: bool(waited.append(g)), 2.5, signal.SIGINT) is False
    )
    assert sent == [signal.SIGINT, signal.SIGKILL] and waited == [2.5]


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to ask as another user")
def test_a_group_we_may_not_signal_is_not_ours(reap_group: list[int]) -> None:
    """As another user (nobody), root's group is neither alive, signalled nor waited for: no
    stop blocks for its grace on a group id that someone else now holds."""
    proc = _group("echo ready; exec sleep 60", reap_group)
    probe = (
        "import sys\n"
        "from subagents.core import procs\n"
        "pg = int(sys.argv[1])\n"
        "print(procs.group_alive(pg), procs.killpg(pg, 15), procs.stop_group(pg, 600))\n"
    )
    # The system's interpreter: this one may live where that user may not look (/root).
    python = shutil.which(
        f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin"
    )
    if python is None:
        pytest.skip("no system python of this version for another user to run")
    src = Path(procs.__file__).resolve().parents[2]
    out = subprocess.run(
        [python, "-c", probe, str(proc.pid)],
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        user=65534,
        group=65534,
        extra_groups=[],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,  # far below the 600 s grace: it did not wait
    )
    assert out.stdout.split() == ["False", "False", "True"], out.stderr
    assert proc.poll() is None  # never signalled
    assert procs.stop_group(proc.pid, 30, reap=proc.poll) is True  # ours, as root


@pytest.mark.process
def test_stopping_a_run_whose_supervisor_ignores_sigterm_kills_it_and_ends_the_run(
    fake: Fake, tmp_path: Path, reap_group: list[int]
) -> None:
    """A job's stop gives each run's supervisor the grace, then SIGKILL, and ends the run
    itself: nothing is left running and the run has its result."""
    from subagents.config import Settings
    from subagents.runs import RunRequest, prepare, stop_run

    env = {**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)}
    spec, run_dir = prepare(RunRequest(task="t", backend="pi", cwd=str(tmp_path)), Settings(), env)
    stubborn = _group("trap '' TERM; echo ready; exec sleep 60", reap_group)
    create_time = psutil.Process(stubborn.pid).create_time()
    write_record(run_dir, LocalSupervisor("process", stubborn.pid, create_time))
    stop_run(run_dir, grace=0.5)
    assert stubborn.wait(timeout=30) == -signal.SIGKILL
    assert not pid_alive(stubborn.pid)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "aborted" and result["runId"] == spec.runId


def test_which_finds_what_shutil_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """procs.which is shutil.which's POSIX rule (without importing shutil on a run's path)."""
    first, second, empty = tmp_path / "a", tmp_path / "b", tmp_path / "e"
    for d in (first, second, empty):
        d.mkdir()
    for d, name, mode in (
        (first, "tool", 0o644),  # not executable: passed over
        (second, "tool", 0o755),
        (first, "both", 0o755),
        (second, "both", 0o755),
        (first, "dir", 0o755),
    ):
        if name == "dir":
            (d / name).mkdir()
            continue
        (d / name).write_text("#!/bin/sh\n")
        (d / name).chmod(mode)
    path = os.pathsep.join([str(empty), str(first), str(first), str(second)])
    cases = ["tool", "both", "dir", "missing", str(second / "tool"), str(first / "tool"), "a/tool"]
    for name in cases:
        for p in (path, "", None, str(second)):
            assert procs.which(name, p) == shutil.which(name, path=p), (name, p)
    monkeypatch.chdir(tmp_path)
    assert procs.which("a/tool") == shutil.which("a/tool")
    monkeypatch.setenv("PATH", str(second))
    assert procs.which("both") == shutil.which("both") == str(second / "both")
    monkeypatch.delenv("PATH")
    assert procs.which("sh") == shutil.which("sh")
