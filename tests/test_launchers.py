"""The launch seam: a run's Placement comes from the settings (and the caller's overrides),
a job's record keeps it, and every reader asks a run's supervisor.json what it is (a local
supervisor, a run on a Ray node) -- records written before the seam included."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from support import pistream as pi
from support.checks import eventually
from support.fake import Fake

from subagents import api
from subagents.config import Settings
from subagents.core.upgrade import upgrade_job
from subagents.jobs import JobPlan
from subagents.launchers import (
    SUPERVISOR_FILE,
    Placement,
    launcher_for,
    launcher_named,
    reattach,
)
from subagents.runs import RunMonitor, RunRequest
from subagents.types import PlacementRecord


def test_placement_from_the_settings() -> None:
    assert Placement.of(Settings()) == Placement("process")
    assert Placement.of(Settings(runner="tmux")) == Placement("tmux")
    # On Ray the runner does not matter; the address travels with the placement.
    on_ray = Placement.of(Settings(runner="tmux", executor="ray", ray_address="h:6379"))
    assert on_ray == Placement("ray", "h:6379")
    assert Placement.from_record(on_ray.to_record()) == on_ray
    with pytest.raises(api.BadRequest, match="unknown launcher 'screen'"):
        Placement("screen")  # type: ignore[arg-type]


def test_each_launcher_says_what_it_does() -> None:
    process, tmux, ray = (launcher_named(n) for n in ("process", "tmux", "ray"))
    assert (process.name, process.keeps_spares, process.echo) == ("process", True, False)
    assert (tmux.name, tmux.keeps_spares, tmux.echo) == ("tmux", False, True)
    assert (ray.name, ray.keeps_spares, ray.echo) == ("ray", False, False)
    assert launcher_for(Placement("ray", "h:1")).name == "ray"


def test_the_api_overrides_reach_the_plan_and_job_json(fake: Fake, isolated_state: Path) -> None:
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)}
    job = api.prepare_job({"mode": "single", "tasks": [{"task": "x"}]}, runner="tmux", env=env)
    assert job.plan.placement == Placement("tmux")
    assert job.plan.settings.runner == "tmux"
    stored = json.loads((job.store.dir / job.job_id / "job.json").read_text())["plan"]
    assert stored["placement"] == {"launcher": "tmux", "ray_address": None}
    assert stored["limits"]["runner"] == "tmux" and "mcp_token" not in stored["limits"]
    assert "runner" not in stored["requests"][0]  # a request holds only what is per run
    again = JobPlan.from_record(stored)
    assert (again.placement, again.settings, again.requests) == (
        job.plan.placement,
        job.plan.settings,
        job.plan.requests,
    )


def test_a_bad_override_is_one_line_naming_it(isolated_state: Path) -> None:
    with pytest.raises(api.BadRequest) as info:
        api.prepare_job({"mode": "single", "tasks": [{"task": "x"}]}, executor="k8s")
    assert str(info.value) == "executor: must be 'local' or 'ray', not 'k8s'"
    assert info.value.field == "executor"


def test_a_job_recorded_before_placements_reads_as_it_ran() -> None:
    """job.json of a job planned by the code before the seam: limits without placement,
    the command line's runner on each request."""
    old: dict[str, Any] = {
        "mode": "chain",
        "requests": [
            {"task": "a", "backend": "pi", "runner": "tmux", "env": {}, "job_id": None},
            {"task": "b {previous}", "backend": "pi", "runner": "tmux", "env": {}},
        ],
        "limits": {
            "default_backend": "pi",
            "grace": 0.5,
            "kill_grace": 2.0,
            "max_depth": 2,
            "timeout": None,
            "runner": "process",
            "bins": {"pi": "/opt/pi"},
            "executor": "local",
            "ray_address": None,
            "stall_timeout": 300.0,
            "on_stall": "notice",
            "tool_timeout": None,
            "keep_worktree": False,
            "copilot_agent_initiator": False,
        },
        "concurrency": 1,
        "session": "s",
        "extra": {},
    }

    def read(plan: dict[str, Any]) -> JobPlan:  # as the store reads job.json (core.upgrade)
        return JobPlan.from_record(upgrade_job({"plan": copy.deepcopy(plan)})["plan"])

    plan = read(old)
    assert plan.placement == Placement("tmux")
    assert [r.task for r in plan.requests] == ["a", "b {previous}"]
    assert (plan.settings.grace, plan.settings.bins) == (0.5, {"pi": "/opt/pi"})
    old["requests"] = [{**r, "runner": None} for r in old["requests"]]
    assert read(old).placement == Placement("process")
    old["limits"] = {**old["limits"], "executor": "ray", "ray_address": "h:1"}
    assert read(old).placement == Placement("ray", "h:1")


@pytest.mark.process
def test_a_local_runs_record_is_its_supervisor(fake: Fake) -> None:
    handle = fake.start([*pi.start(), {"sleep": 30}])
    try:
        record = json.loads((handle.run_dir / SUPERVISOR_FILE).read_text())
        assert set(record) == {"pid", "createTime", "runner"}
        found = reattach(handle.run_dir, follow=False)
        assert found is not None and found.launcher == "process" and found.alive()
        assert found.record() == record and found.where() is None
    finally:
        result = handle.stop()
    assert result["status"] == "aborted"
    assert eventually(lambda: not found.alive(), 30)  # it exits right after its result


@pytest.fixture
def relay() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing for the one that relayed a ray run (a job driver)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.process
def test_a_ray_record_written_before_the_seam_is_read(
    tmp_path: Path, relay: subprocess.Popen[bytes]
) -> None:
    """The old code recorded the relaying process as if it were the supervisor ("pid",
    "createTime") and the actor under "executor": a job running across an upgrade is still
    followed and stopped by what its record names."""
    (tmp_path / SUPERVISOR_FILE).write_text(
        json.dumps(
            {
                "pid": relay.pid,
                "createTime": psutil.Process(relay.pid).create_time(),
                "runner": "ray",
                "executor": {"kind": "ray", "actor": "subagents-run-x", "address": "h:6379"},
            }
        )
    )
    run = reattach(tmp_path, follow=False)
    assert run is not None and run.launcher == "ray"
    assert run.alive()  # its relay runs
    assert run.where() == {"kind": "ray", "node": None}
    assert run.record() == {
        "runner": "ray",
        "ray": {"actor": "subagents-run-x", "address": "h:6379", "node": None},
        "relay": {"pid": relay.pid, "createTime": psutil.Process(relay.pid).create_time()},
    }
    relay.kill()
    relay.wait()
    assert not run.alive()  # its relay is gone: a monitor ends the run
    assert RunMonitor(tmp_path).supervisor_alive() is False


@pytest.mark.process
def test_a_ray_record_never_names_a_pid_as_its_supervisor(
    tmp_path: Path, relay: subprocess.Popen[bytes]
) -> None:
    record = {
        "runner": "ray",
        "ray": {"actor": "subagents-run-y", "address": "h:6379", "node": "n1"},
        "relay": {"pid": relay.pid, "createTime": psutil.Process(relay.pid).create_time()},
    }
    (tmp_path / SUPERVISOR_FILE).write_text(json.dumps(record))
    run = reattach(tmp_path, follow=False)
    assert run is not None and run.record() == record and "pid" not in run.record()
    assert run.where() == {"kind": "ray", "node": "n1"}
    assert run.alive()


def test_a_damaged_or_missing_record_is_no_supervisor(tmp_path: Path) -> None:
    assert reattach(tmp_path) is None
    (tmp_path / SUPERVISOR_FILE).write_text('{"runner": "process"}')
    assert reattach(tmp_path) is None
    (tmp_path / SUPERVISOR_FILE).write_text('{"runner": "kubernetes", "pid": 1}')
    assert reattach(tmp_path) is None
    (tmp_path / SUPERVISOR_FILE).write_text("[1, 2]")
    assert reattach(tmp_path) is None


def test_requests_read_from_any_version() -> None:
    req = RunRequest.from_record({"task": "t", "runner": "tmux", "later_field": 1})
    assert req == RunRequest(task="t")


def test_a_ray_placement_says_whether_the_working_directory_travels() -> None:
    assert Placement.of(Settings(executor="ray")).ships_cwd
    shared = Placement.of(Settings(executor="ray", ray_shared_cwd=True))
    assert not shared.ships_cwd and Placement.from_record(shared.to_record()) == shared
    assert not Placement("process").ships_cwd and not Placement("tmux").ships_cwd
    # A ray job recorded before repositories travelled ran on a shared filesystem.
    old: PlacementRecord = {"launcher": "ray", "ray_address": "h:1"}
    plan = upgrade_job({"plan": {"requests": [], "limits": {}, "placement": dict(old)}})["plan"]
    assert Placement.from_record(plan["placement"]) == Placement("ray", "h:1", ray_shared_cwd=True)
