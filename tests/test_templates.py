"""Supervisors forked from a template (supervisor/template.py, launchers/template.py): each
is what a supervisor started for its run is (its own session, stdio, records, child
environment), a stop reaches it, a template that dies leaves the next runs to start as
they did without one, and a job leaves no template or zombie behind. Real processes."""

from __future__ import annotations

import contextlib
import os
import signal
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

from subagents.core.files import read_json
from subagents.launchers.spares import SPARES
from subagents.launchers.template import Template
from subagents.runs import stop_run
from subagents.supervisor.handover import template_command

pytestmark = pytest.mark.process


def ready_template(warm_owner: object) -> int:
    SPARES.want(warm_owner, 3, template=True)
    assert eventually(lambda: SPARES.template_pid(ready=True) is not None)
    pid = SPARES.template_pid()
    assert pid is not None
    assert "--template" in psutil.Process(pid).cmdline()
    return pid


def pipes(pid: int) -> set[str]:
    """The pipes process ``pid`` holds open."""
    fds = os.listdir(f"/proc/{pid}/fd")
    targets = set()
    for fd in fds:
        try:
            targets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return {t for t in targets if t.startswith("pipe:")}


def signals(pid: int) -> list[str]:
    """Process ``pid``'s blocked, ignored and caught signals (procfs)."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return [ln for ln in lines if ln.startswith(("SigBlk", "SigIgn", "SigCgt"))]


def test_a_template_serves_several_runs_each_as_a_fresh_supervisor(
    warm_owner: object, tmp_path: Path
) -> None:
    template = ready_template(warm_owner)
    gate = tmp_path / "gate"
    handles = [start_run(tmp_path, f"r{i}", gate) for i in range(3)]
    template_pipes = pipes(template)
    for handle in handles:
        pid = handle.launched.pid
        proc = psutil.Process(pid)
        assert proc.ppid() == template  # forked, not started
        assert os.getsid(pid) == pid  # its own session, as every supervisor
        assert os.getpgid(pid) == pid
        assert fd_target(pid, 0) == os.devnull
        log = str(handle.run_dir / "supervisor.log")
        assert fd_target(pid, 1) == fd_target(pid, 2) == log
        # Nothing of the template's handover: the reply, the last, is closed just after
        # the pid is written on it, so its starter may look in between.
        assert eventually(lambda pid=pid: not pipes(pid) & template_pipes)
        assert read_json(handle.run_dir / "supervisor.json") == {
            "pid": pid,
            "createTime": proc.create_time(),
            "runner": "process",
        }
    assert len({h.launched.pid for h in handles}) == 3
    envs = [child_env(tmp_path, f"r{i}") for i in range(3)]
    SPARES.want(warm_owner, 0)
    assert not pid_alive(template)

    # The same run from a supervisor started for it (no template): the same child env.
    cold = start_run(tmp_path, "cold", gate)
    assert psutil.Process(cold.launched.pid).ppid() == os.getpid()
    cold_env = child_env(tmp_path, "cold")
    assert cold_env.pop("SUBAGENTS_RUN_ID") == cold.run_dir.name
    for handle, env in zip(handles, envs, strict=True):
        assert env.pop("SUBAGENTS_RUN_ID") == handle.run_dir.name
        assert env == cold_env
        # Both waiting for their child: the same signals blocked, ignored and caught.
        assert signals(handle.launched.pid) == signals(cold.launched.pid)

    gate.touch()
    for i, handle in enumerate(handles):
        result = handle.wait(timeout=60)
        assert result is not None and result["status"] == "completed"
        assert result["finalText"] == f"done r{i}"
    result = cold.wait(timeout=60)
    assert result is not None and result["status"] == "completed"


def test_a_stop_reaches_a_forked_supervisor(warm_owner: object, tmp_path: Path) -> None:
    template = ready_template(warm_owner)
    handle = start_run(tmp_path, "stopped", tmp_path / "never")
    assert psutil.Process(handle.launched.pid).ppid() == template
    child_env(tmp_path, "stopped")  # the child runs
    stop_run(handle.run_dir, grace=30.0)  # `subagents stop`: found by its record, signalled
    result = handle.wait(timeout=60)
    assert result is not None
    assert result["status"] == "aborted"  # written by the supervisor itself
    assert "SIGTERM" in (result["errorMessage"] or "")
    assert eventually(lambda: not pid_alive(handle.launched.pid))


def test_a_stop_signal_right_after_the_fork_aborts_the_run(
    warm_owner: object, tmp_path: Path
) -> None:
    ready_template(warm_owner)
    handle = start_run(tmp_path, "early", tmp_path / "never")
    os.kill(handle.launched.pid, signal.SIGTERM)  # before its child may even be spawned
    result = handle.wait(timeout=60)
    assert result is not None
    assert result["status"] == "aborted"
    assert "SIGTERM" in (result["errorMessage"] or "")


def test_a_killed_template_leaves_the_next_runs_to_start_as_before(
    warm_owner: object, tmp_path: Path
) -> None:
    template = ready_template(warm_owner)
    gate = tmp_path / "gate"
    first = start_run(tmp_path, "first", gate)
    assert psutil.Process(first.launched.pid).ppid() == template
    os.kill(template, signal.SIGKILL)
    assert eventually(lambda: not pid_alive(template))
    after = [start_run(tmp_path, f"after{i}", gate) for i in range(2)]
    for handle in after:
        assert psutil.Process(handle.launched.pid).ppid() != template
    gate.touch()
    # The run it had forked goes on without it, as a supervisor does without its starter.
    for handle in (first, *after):
        result = handle.wait(timeout=60)
        assert result is not None and result["status"] == "completed", result


def test_a_template_that_does_not_answer_is_killed_and_the_run_starts_once(
    warm_owner: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("subagents.launchers.template.REPLY_WAIT", 0.5)
    template = ready_template(warm_owner)
    os.kill(template, signal.SIGSTOP)  # it never reads the run handed to it
    gate = tmp_path / "gate"
    gate.touch()
    handle = start_run(tmp_path, "stuck", gate)
    assert psutil.Process(handle.launched.pid).ppid() == os.getpid()  # started, not forked
    assert eventually(lambda: not pid_alive(template))
    result = handle.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    assert SPARES.template_pid() is None


def test_a_template_not_ready_yet_is_not_waited_for_long(
    warm_owner: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("subagents.launchers.spares.READY_WAIT", 0.2)
    SPARES.want(warm_owner, 3, template=True)
    template = SPARES.template_pid()
    assert template is not None
    os.kill(template, signal.SIGSTOP)  # still importing, for as long as it takes
    gate = tmp_path / "gate"
    gate.touch()
    first = start_run(tmp_path, "first", gate)
    assert psutil.Process(first.launched.pid).ppid() == os.getpid()  # started, not forked
    os.kill(template, signal.SIGCONT)
    assert eventually(lambda: SPARES.template_pid(ready=True) == template)  # kept, and ready
    second = start_run(tmp_path, "second", gate)
    assert psutil.Process(second.launched.pid).ppid() == template
    for handle in (first, second):
        result = handle.wait(timeout=60)
        assert result is not None and result["status"] == "completed"


def _below() -> dict[tuple[int, float], psutil.Process]:
    """The processes below this one, zombies included, by pid and start time."""
    out = {}
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            out[proc.pid, proc.create_time()] = proc
    return out


def test_a_job_leaves_no_template_and_no_zombie(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parallel job through the API: its runs' supervisors forked from its template,
    which is gone at its end with every supervisor reaped."""
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(child(tmp_path)))
    # An earlier test's child in this worker, even a zombie, is not this job's.
    earlier = set(_below())
    parallel_job(tmp_path, 6, 3)
    assert SPARES.template_pid() is None
    assert SPARES.pids() == []

    def left() -> list[tuple[int, float]]:
        out = []
        for key, proc in _below().items():
            with contextlib.suppress(psutil.Error):  # (ended while looked at: not left)
                # The status first: a zombie has no command line (psutil raises).
                if key not in earlier and (
                    proc.status() == psutil.STATUS_ZOMBIE
                    or "subagents.supervisor" in " ".join(proc.cmdline())
                ):
                    out.append(key)
        return out

    # The supervisors ended with their results; the last are reaped as they exit.
    assert eventually(lambda: not left())


def test_a_template_exits_on_eof_and_on_a_stop_signal() -> None:
    for how in ("eof", "signal"):
        template = Template.start()
        template.wait_ready(30)
        assert template.usable()
        if how == "eof":
            assert template.popen.stdin is not None
            template.popen.stdin.close()
        else:
            os.kill(template.pid, signal.SIGTERM)
        assert template.popen.wait(30) == 0
        template.retire()


def test_a_template_whose_starter_dies_exits() -> None:
    pid = left_by_a_dead_starter(
        "from subagents.launchers.template import Template; w = Template.start()"
    )
    assert eventually(lambda: not pid_alive(pid)), "an orphaned template kept waiting"


def test_the_template_command() -> None:
    assert template_command()[-1] == "--template"
    assert template_command(bound=True)[-2:] == ["--template", "--bound"]
