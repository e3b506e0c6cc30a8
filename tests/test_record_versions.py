"""Versioned records: ``job.json``, ``meta.json`` and ``result.json`` of every earlier shape
(tests/fixtures/records/, one file per shape subagents wrote) are read as today's, by the one
upgrade function of each record (``core/upgrade.py``) and by the readers that go through it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.checks import fits

from subagents.core.records import JOB_VERSION, META_VERSION, RESULT_VERSION
from subagents.core.upgrade import upgrade_job, upgrade_meta, upgrade_result
from subagents.jobs import JobStore
from subagents.jobs.planning import JobPlan
from subagents.supervisor.spec import RunSpec
from subagents.types import JobPlanRecord, RunRequestRecord, RunResult

RECORDS = Path(__file__).parent / "fixtures" / "records"


def fixture(kind: str, name: str) -> dict[str, Any]:
    data = json.loads((RECORDS / kind / f"{name}.json").read_text())
    assert isinstance(data, dict) and "version" not in data  # an earlier shape
    return data


JOBS = sorted(p.stem for p in (RECORDS / "job").glob("*.json"))


@pytest.mark.parametrize("name", JOBS)
def test_every_earlier_job_record_reads_as_todays(name: str) -> None:
    job = upgrade_job(fixture("job", name))
    assert job["version"] == JOB_VERSION
    plan = job["plan"]
    fits(plan, JobPlanRecord)
    for request in plan["requests"]:
        fits(request, RunRequestRecord)
        assert "runner" not in request  # the placement says it now
    for run in job["runs"]:
        fits(run, RunResult)
    # What the job's driver and `continue` make of it.
    again = JobPlan.from_record(plan)
    assert again.placement.to_record() == plan["placement"]
    assert len(again.requests) == len(plan["requests"])


def test_a_job_from_before_placements_keeps_the_runner_it_was_given() -> None:
    job = upgrade_job(fixture("job", "v0-before-placements"))
    assert job["plan"]["placement"] == {"launcher": "tmux", "ray_address": None}
    assert job["plan"]["budget"] == {} and job["plan"]["concurrency"] == 4
    assert job["plan"]["requests"][0]["max_turns"] is None
    assert job["plan"]["requests"][0]["watch"] == []
    # Its runs' worktrees were at the repository's top.
    assert {r["worktree"]["subdir"] for r in job["runs"]} == {"."}


def test_a_ray_job_from_before_placements_runs_where_its_settings_said() -> None:
    job = upgrade_job(fixture("job", "v0-ray-before-placements"))
    placement = job["plan"]["placement"]
    assert placement == {
        "launcher": "ray",
        "ray_address": "127.0.0.1:6379",
        "ray_shared_cwd": False,
    }
    assert JobPlan.from_record(job["plan"]).placement.ships_cwd is True


def test_a_ray_placement_from_before_repositories_travelled_ran_on_a_shared_filesystem() -> None:
    job = upgrade_job(fixture("job", "v0-ray-placement-before-shipping"))
    placement = job["plan"]["placement"]
    assert placement == {"launcher": "ray", "ray_address": "127.0.0.1:6379", "ray_shared_cwd": True}
    assert JobPlan.from_record(job["plan"]).placement.ships_cwd is False


def test_the_store_reads_an_earlier_job_record_as_todays(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job_id = "01m8hf6grk-9ev3n9zn"
    (store.dir / job_id).mkdir(parents=True)
    shutil.copy(RECORDS / "job" / "v0-before-placements.json", store.path(job_id))
    state = store.load(job_id)
    assert state["version"] == JOB_VERSION
    assert state["plan"]["placement"]["launcher"] == "tmux"
    assert state["finalText"] is None  # a chain whose runs say nothing of it: as before
    # Written back (any update), the record is today's, and says so.
    store.update(job_id, background=True)
    on_disk = json.loads(store.path(job_id).read_text())
    assert on_disk["version"] == JOB_VERSION and "placement" in on_disk["plan"]


def test_a_new_job_record_says_its_version(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    plan = upgrade_job(fixture("job", "v0-before-versions"))["plan"]
    job_id = store.create(plan, agents=["pi"], background=False)
    assert json.loads(store.path(job_id).read_text())["version"] == JOB_VERSION


def test_an_earlier_meta_record_reads_as_todays() -> None:
    meta = upgrade_meta(fixture("meta", "v0-before-subdir"))
    assert meta["version"] == META_VERSION
    assert meta["worktree"]["subdir"] == "."
    spec = RunSpec.from_dict(fixture("meta", "v0-before-subdir"))  # what the supervisor reads
    assert spec.worktree is not None and spec.worktree["subdir"] == "."
    assert "version" not in spec.to_dict()  # the file's, not the spec's


def test_an_earlier_result_record_reads_as_todays() -> None:
    result = upgrade_result(fixture("result", "v0-before-subdir"))
    assert result["version"] == RESULT_VERSION
    fits(result, RunResult)
    assert result["worktree"]["subdir"] == "."


def test_a_record_of_a_later_version_is_read_as_it_is() -> None:
    later = {"version": JOB_VERSION + 1, "jobId": "x", "plan": {"requests": []}}
    assert upgrade_job(json.loads(json.dumps(later))) == later
    result = {"version": RESULT_VERSION + 1, "worktree": {"repo": "/r"}}
    assert upgrade_result(json.loads(json.dumps(result))) == result
