"""``subagents run`` starts its run's supervisor as it starts (cli/entry.py,
``SparePool.start_early``): the run is handed to that one, a job counts it as its spare,
and one never handed a run is gone when the command exits."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import cli
from support.fake import Fake, fake_env
from support.pistream import shell_pi

from subagents.cli.entry import launches_here
from subagents.launchers.spares import SPARES


@pytest.fixture(autouse=True)
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands here run in-process: the early supervisor they start is the subject (a
    warm server's worker forks its own: test_warm.py), found by its command line and
    environment, which a forked one does not show."""
    monkeypatch.setenv("SUBAGENTS_WARM", "0")


@pytest.mark.parametrize(
    "args",
    [
        ["run", "hi"],
        ["run", "-q", "--json", "hi"],
        ["run", "--parallel", "a", "b"],
        ["run", "--", "--bg"],  # a TASK, not the option
        ["run", "--launcher=process", "hi"],  # not the option: its value is in the same word
        ["continue", "01m8j5", "and a test"],
    ],
)
def test_a_foreground_run_here_starts_its_supervisor_first(args: list[str]) -> None:
    assert launches_here(args) == (args[1] != "--launcher=process")


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["ps"],
        ["map", "rows.csv", "--task", "t"],
        ["run", "--bg", "hi"],
        ["run", "hi", "--help"],
        ["run", "-h"],
        ["run", "--launcher", "tmux", "hi"],
        ["run", "--executor=ray", "hi"],
        ["run", "--runner", "tmux", "hi"],
        ["continue", "--bg", "01m8j5", "and a test"],
    ],
)
def test_other_commands_start_nothing_ahead(args: list[str]) -> None:
    assert not launches_here(args)


def shell_child(tmp_path: Path) -> dict[str, str]:
    return shell_pi(tmp_path / "pi")


def supervisors_of(home: Path) -> list[psutil.Process]:
    """The supervisor processes started for this test's state directory."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "subagents.supervisor" in (proc.info["cmdline"] or []) and (
                proc.environ().get("SUBAGENTS_HOME") == str(home)
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.process
def test_subagents_run_hands_its_run_to_the_supervisor_it_started_first(
    tmp_path: Path, isolated_state: Path
) -> None:
    done = cli(["run", "-q", "hi"], env=shell_child(tmp_path))
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    (job_dir,) = (isolated_state / "jobs").iterdir()
    job = json.loads((job_dir / "job.json").read_text())
    (run_id,) = job["runIds"]
    supervisor = json.loads((isolated_state / "runs" / run_id / "supervisor.json").read_text())
    # Started before the job was even planned: the one the command started as it started
    # (a spare the job asked for would start after the job record is written).
    assert supervisor["createTime"] <= job["createdAt"]
    assert eventually(lambda: not supervisors_of(isolated_state))


@pytest.mark.process
def test_subagents_continue_hands_its_run_to_the_supervisor_it_started_first(
    fake: Fake, isolated_state: Path
) -> None:
    # The fake keeps a session file where pi would: the run can be continued.
    first = cli(["run", "--json", "hi"], env=fake_env(fake, [{"session": True}, *pi.answer("1")]))
    assert first.returncode == 0, first.stderr
    done = cli(
        ["continue", "-q", json.loads(first.stdout)["runId"], "and then"],
        env=fake_env(fake, [{"session": True}, *pi.answer("2")]),
    )
    assert (done.returncode, done.stdout) == (0, "2\n"), done.stderr
    newest = max((isolated_state / "jobs").iterdir(), key=lambda d: d.name)
    job = json.loads((newest / "job.json").read_text())
    (run_id,) = job["runIds"]
    supervisor = json.loads((isolated_state / "runs" / run_id / "supervisor.json").read_text())
    assert supervisor["createTime"] <= job["createdAt"]  # started before the job was planned
    assert eventually(lambda: not supervisors_of(isolated_state))


@pytest.mark.process
@pytest.mark.parametrize(
    "args", [["run"], ["run", "--max-turns", "nope", "hi"], ["run", "--plan", "missing.yaml"]]
)
def test_bad_input_leaves_no_supervisor_behind(
    args: list[str], tmp_path: Path, isolated_state: Path
) -> None:
    done = cli(args, env=shell_child(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    # Killed and reaped at exit, not left to wait out its bound: gone at once.
    assert supervisors_of(isolated_state) == []
    assert not (isolated_state / "runs").exists() or not any((isolated_state / "runs").iterdir())


@pytest.fixture
def no_spares() -> Iterator[None]:
    yield
    SPARES.want(object(), 0)  # whatever a test left: let go, and reaped
    assert SPARES.pids() == []


@pytest.mark.process
def test_a_job_counts_the_early_supervisor_as_its_spare(no_spares: None) -> None:
    SPARES.start_early()
    (early,) = SPARES.pids()
    job = object()
    SPARES.want(job, 1)  # a job with one run to start: the early one is that spare
    assert SPARES.pids() == [early]
    taken = SPARES.take()
    assert taken is not None and taken.pid == early
    taken.dismiss()
    assert taken.popen.wait(30) == 0
    SPARES.want(job, 0)


@pytest.mark.process
def test_an_early_supervisor_never_handed_a_run_is_killed_at_exit() -> None:
    code = (
        "from subagents.launchers import start_spare_early; "
        "from subagents.launchers.spares import SPARES; "
        "start_spare_early(); print(SPARES.pids()[0], flush=True)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    pid = int(out.stdout)
    assert not pid_alive(pid)  # killed and reaped by the exiting process itself
