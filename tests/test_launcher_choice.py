"""Choosing the executor: every way of asking for ``ray`` reaches the run's checks, and
without Ray installed that is one clear line and exit 2, before anything starts.

Ray's absence is shown by making its import fail in this process, where the commands run
(Ray is installed for the tests of the ray executor itself, tests/test_ray_launcher.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.checks import eventually
from support.cli import invoke
from support.fake import Fake

from subagents.launchers import RAY_MISSING

CLI = [sys.executable, "-m", "subagents.cli"]


@pytest.fixture
def without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray as if not installed, for a command in this process: its import fails."""
    monkeypatch.setitem(sys.modules, "ray", None)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["flag", "env", "config", "plan"])
@pytest.mark.usefixtures("without_ray")
def test_ray_without_ray_is_one_line_and_exit_2(
    how: str, tmp_path: Path, fake: Fake, isolated_state: Path
) -> None:
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher)}
    args = ["run", "hi"]
    if how == "flag":
        args = ["run", "--executor", "ray", "hi"]
    elif how == "env":
        env["SUBAGENTS_EXECUTOR"] = "ray"
    elif how == "config":
        config = tmp_path / "config"
        config.mkdir(exist_ok=True)
        (config / "config.toml").write_text('executor = "ray"\n')
    else:
        plan = tmp_path / "plan.yaml"
        plan.write_text(
            json.dumps({"mode": "single", "executor": "ray", "tasks": [{"task": "hi"}]})
        )
        args = ["run", "--plan", str(plan)]
    p = invoke(args, env)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    assert p.stderr.strip().splitlines()[-1].endswith(RAY_MISSING), p.stderr
    # Nothing was started: no run directory was made.
    assert not list(isolated_state.glob("runs/*"))


@pytest.mark.parametrize("command", [["ray", "status"], ["ray", "down"]])
@pytest.mark.usefixtures("without_ray")
def test_ray_commands_without_ray_are_one_line_and_exit_2(command: list[str]) -> None:
    p = invoke(command)
    assert p.returncode == 2, p.stderr
    assert p.stdout == "" and p.stderr == f"subagents: {RAY_MISSING}\n"


@pytest.mark.process
def test_nothing_imports_ray_until_a_ray_run_is_asked_for() -> None:
    code = (
        "import sys, subagents.cli, subagents.api, subagents.launchers;"
        "from subagents.launchers import launcher_named; launcher_named('ray');"
        "print('ray' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "False"


def test_an_unknown_executor_is_refused() -> None:
    p = invoke(["run", "hi"], {"SUBAGENTS_EXECUTOR": "kubernetes"})
    assert p.returncode == 2
    assert "SUBAGENTS_EXECUTOR" in p.stderr and "'local' or 'ray'" in p.stderr, p.stderr


@pytest.mark.process
def test_the_local_executor_is_the_default_and_records_nothing_extra(fake: Fake) -> None:
    from support import pistream as pi

    result = fake.run(pi.answer("Here."))
    assert result["status"] == "completed"
    assert "executor" not in result  # absent means: ran here


@pytest.mark.process
def test_a_restarted_driver_follows_its_local_runs(fake: Fake, tmp_path: Path) -> None:
    """The job driver dies mid-run and is started again: it takes up the run its
    predecessor started (its supervisor went on alone) instead of starting it anew."""
    from support import pistream as pi

    from subagents.core import paths

    gate, pidfile = tmp_path / "gate", tmp_path / "child.pid"
    steps = [{"pidfile": str(pidfile)}, *pi.start(), {"wait_for": str(gate)}, *pi.answer("Done.")]
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}
    p = subprocess.run(
        [*CLI, "run", "--bg", "--json", "x"], env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    job_id = json.loads(p.stdout)["jobId"]
    job_dir = paths.jobs_dir(paths.state_home()) / job_id
    assert eventually(pidfile.exists, 60)
    state = json.loads((job_dir / "job.json").read_text())
    os.kill(state["driver"]["pid"], signal.SIGKILL)
    driver = subprocess.Popen(
        [sys.executable, "-m", "subagents.jobs.driver", str(job_dir)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # The new driver has taken the job (and so its running run) over: only then the
        # child may answer.
        assert eventually(
            lambda: json.loads((job_dir / "job.json").read_text())["driver"]["pid"] == driver.pid,
            60,
        )
        gate.touch()
        assert driver.wait(timeout=60) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    job = json.loads((job_dir / "job.json").read_text())
    assert job["status"] == "completed", job
    assert [r["runId"] for r in job["runs"]] == state["runIds"]
    assert job["runs"][0]["finalText"] == "Done."
