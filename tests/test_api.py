"""The public Python API, as the README shows it."""

from __future__ import annotations

import pytest
from support import pistream as pi
from support.fake import Fake

import subagents


@pytest.mark.process
def test_run_returns_result_json(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    seen: list[str] = []
    result = subagents.run(
        "Summarize README.md",
        agent="scout",
        env=fake.env(pi.answer("A summary.")),
        on_event=lambda i, e: seen.append(e["type"]),
    )
    assert result["status"] == "completed" and result["finalText"] == "A summary."
    assert result["agent"] == "scout" and result["jobId"]
    assert "tool_call" in seen and seen[-1] == "run_finished"


@pytest.mark.process
def test_start_wait_and_stop(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = subagents.start(
        {"mode": "parallel", "tasks": [{"task": "a"}, {"task": "b"}]}, env=fake.env(pi.answer("ok"))
    )
    result = job.wait(timeout=60)
    assert result is not None and result["status"] == "completed"
    assert [r["finalText"] for r in result["runs"]] == ["ok", "ok"]
    slow = subagents.start("forever", env=fake.env([*pi.start(), {"sleep": 60}]))
    assert slow.wait(timeout=0.2) is None
    assert slow.stop()["status"] == "aborted"


def test_bad_request_is_one_exception(fake: Fake) -> None:
    with pytest.raises(subagents.BadRequest, match="unknown agent 'nobody'"):
        subagents.run("x", agent="nobody")


@pytest.mark.process
def test_a_parallel_jobs_run_ids_all_land_in_its_record(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs starting side by side each record the job's run ids; a list made earlier must
    never be written last (job.json once kept 2 of 3 ids, and the web page drew 2 bars)."""
    import threading
    import time

    from subagents.jobs import JobStore

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    update = JobStore.update
    held = threading.Event()

    def slow_update(self: JobStore, job_id: str, **fields: object) -> object:
        ids = fields.get("runIds")
        if isinstance(ids, list) and None in ids and not held.is_set():
            held.set()
            time.sleep(1.0)  # an older list, preempted on its way to the file
        return update(self, job_id, **fields)

    monkeypatch.setattr(JobStore, "update", slow_update)
    result = subagents.run(
        {"mode": "parallel", "concurrency": 3, "tasks": [{"task": t} for t in "abc"]},
        env=fake.env(pi.answer("ok")),
    )
    assert held.is_set() and result["status"] == "completed"
    state = JobStore().load(result["jobId"])
    assert state["runIds"] == [r["runId"] for r in result["runs"]]


@pytest.mark.process
def test_a_job_run_here_is_recorded_running_from_its_first_write(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job its caller drives at once (``run``; the CLI's foreground) is written running,
    with its driver and session log, from its first record: never 'pending' first, and
    job.json is written once before its run's child starts (made; its run's id is written
    as the child starts), not three times. Its start entry and its result keep the start it
    was made with."""
    import os
    from pathlib import Path
    from typing import Any

    from subagents.jobs import JobStore, store
    from subagents.lifecycle import sessionlog

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    written: list[tuple[Any, ...]] = []
    real = store.on_disk  # what every write of a job.json writes

    def spy(state: Any) -> Any:
        written.append((state["status"], state.get("startedAt"), state.get("runIds")))
        return real(state)

    monkeypatch.setattr(store, "on_disk", spy)
    result = subagents.run("t", env=fake.env(pi.answer("ok")))
    state = JobStore().load(result["jobId"])
    assert [w[0] for w in written] == ["running", "running", "completed"]
    assert written[0][1] == written[1][1] == state["startedAt"]
    assert written[1][2] == [result["runId"]]
    assert state["driver"]["pid"] == os.getpid() and state["sessionLog"]
    entries = sessionlog.read(Path(state["sessionLog"]))
    assert [e["eventType"] for e in entries] == ["subagent:start", "subagent:complete"]
    assert entries[0]["startedAt"] == state["startedAt"]


@pytest.mark.process
def test_a_run_s_record_is_on_disk_before_its_child_starts_and_the_job_lists_it_after(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's directory (its meta.json's rename, which names the job) is fsynced before
    the run is handed to its supervisor; the job's list of its runs is written after the
    handover, while the child starts (a driver killed between the two leaves a run found by
    its meta.json: test_job_recovery, test_control)."""
    import os
    from typing import Any

    from subagents.jobs import JobStore, orchestrator

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    real_fsync = os.fsync
    order: list[str] = []

    def fsync(fd: int) -> None:
        where = os.readlink(f"/proc/self/fd/{fd}")
        real_fsync(fd)
        if os.path.isdir(where) and "/runs/" in where:
            order.append("run dir synced")

    update = JobStore.update

    def spy_update(self: JobStore, job_id: str, **fields: Any) -> Any:
        if fields.get("runIds"):
            order.append("run listed")
        return update(self, job_id, **fields)

    start_prepared = orchestrator.start_prepared

    def start(spec: Any, run_dir: Any, *args: Any, **kw: Any) -> Any:
        order.append("handed over")
        return start_prepared(spec, run_dir, *args, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(JobStore, "update", spy_update)
    monkeypatch.setattr(orchestrator, "start_prepared", start)
    result = subagents.run("t", env=fake.env(pi.answer("ok")))
    assert result["status"] == "completed"
    assert order[:3] == ["run dir synced", "handed over", "run listed"]
    assert JobStore().load(result["jobId"])["runIds"] == [result["runId"]]


@pytest.mark.process
def test_a_run_whose_launch_may_wait_is_listed_before_it(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch that may wait (tmux; Ray, for a unit) is not a hand-over: the job lists its
    run before it, so its views show the run meanwhile."""
    from typing import Any

    from subagents import service
    from subagents.errors import UsageError
    from subagents.jobs import JobStore, orchestrator

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    listed: list[object] = []

    def start(spec: Any, run_dir: Any, placement: Any, **kw: Any) -> Any:
        listed.append((placement.launcher, JobStore().load(spec.jobId).get("runIds")))
        raise UsageError("not started here")

    monkeypatch.setattr(orchestrator, "start_prepared", start)
    job = service.prepare_job({"mode": "single", "tasks": [{"task": "t"}]}, runner="tmux")
    result = service.drive(job)
    assert result["status"] == "failed"
    (run,) = result["runs"]
    assert listed == [("tmux", [run["runId"]])]


@pytest.mark.process
def test_a_job_driven_here_is_on_disk_before_its_start_entry_synced_beside_its_run_s_making(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job made to be driven at once has its directory (job.json's rename) fsynced while
    its first run is made, and that is done before its start entry is written (so before its
    child starts: the child waits for the entry)."""
    import os
    import threading

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    real_fsync = os.fsync
    meta_synced = threading.Event()  # the first run's meta.json, whole, fsynced
    order: list[str] = []
    waited: list[bool] = []

    def fsync(fd: int) -> None:
        where = os.readlink(f"/proc/self/fd/{fd}")
        if "/runs/" in where and ".meta.json." in where:
            meta_synced.set()
        elif os.path.isdir(where) and "/jobs/" in where:
            # One after the other, the job's directory would be synced before the run began.
            waited.append(meta_synced.wait(30))
            order.append("job")
        elif "/sessions/" in where:
            order.append("entry")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    result = subagents.run("t", env=fake.env(pi.answer("ok")))
    assert result["status"] == "completed"
    assert waited[:1] == [True]
    assert order[:2] == ["job", "entry"]
