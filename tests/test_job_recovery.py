"""Issue 39, items 2 and 3: answers are never lost and no job stays ``running``.

A result recovered after its supervisor died is rebuilt from ``events.jsonl`` (usage, model,
answer, messages, limit, end time); a supervisor's start allowance counts from the run's own
record, never from when someone looked; a kill -9 of a foreground parallel command at any
point ends the job within a bound, with one end entry; a job killed before its first run is
entered in its session (start and end); a recovered job ends when its last run did."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import invoke
from support.fake import Fake
from support.sessionlog import end_entries

from subagents import api
from subagents.core.clock import epoch
from subagents.jobs import JobStore
from subagents.runs import RunMonitor

CLI = [sys.executable, "-m", "subagents.cli"]
TERMINAL = ("completed", "failed", "aborted", "timeout")
# How long after a kill -9 of the command its job may take to end, once its runs are over:
# the supervisor-start allowance (runs.monitor.START_PATIENCE, 10 s) and a look.
ENDS_WITHIN = 10.0

pytestmark = pytest.mark.process


def read_json(path: Path) -> Any:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def entries(home: Path, job_id: str) -> list[dict[str, Any]]:
    out = []
    for log in (home / "sessions").glob("*.jsonl"):
        for line in log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("jobId") == job_id:
                    out.append(entry)
    return out


def test_a_recovered_result_is_rebuilt_from_the_run_s_events(fake: Fake) -> None:
    steps = [
        *pi.start(),
        pi.text_end("halfway there", stop="toolUse"),
        *pi.tool_use(),
        {"sleep": 300},
    ]
    handle = fake.start(steps)
    run_dir = handle.run_dir
    events = run_dir / "events.jsonl"
    assert eventually(lambda: events.exists() and b'"tool_call"' in events.read_bytes())
    supervisor = read_json(run_dir / "supervisor.json")
    os.kill(int(supervisor["pid"]), signal.SIGKILL)
    result = RunMonitor(run_dir).wait(timeout=60)
    assert result is not None and result["status"] == "failed"
    assert "supervisor died" in (result["errorMessage"] or "")
    assert result["usage"]["totalTokens"] > 0 and result["usage"]["cost"]
    assert result["model"] == "mock-model"
    assert result["finalText"] == "halfway there"
    assert result["toolCalls"] == 1
    assert result.get("messages") == {"sent": 0, "delivered": 0}
    # It ended when it was last heard of, not when it was looked at.
    last = json.loads(events.read_text().splitlines()[-1])["ts"]
    assert abs(float(epoch(result["completedAt"]) or 0) - last) < 1.0


def test_a_rebuilt_result_counts_the_messages_and_the_limit(tmp_path: Path) -> None:
    from subagents.supervisor.result import publish_ended
    from subagents.supervisor.spec import RunSpec

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = RunSpec(runId="r1", backend="pi", task="t", cwd=str(tmp_path), argv=[], createdAt=100.0)
    usage = {"input": 30, "output": 15, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 45}
    events: list[Any] = [
        {"seq": 1, "ts": 101.0, "type": "run_started", "model": "m0", "backend": "pi"},
        {
            "seq": 2,
            "ts": 102.0,
            "type": "user_message",
            "id": "m1",
            "mode": "follow-up",
            "text": "a",
            "receipt": "queued",
        },
        {
            "seq": 3,
            "ts": 103.0,
            "type": "user_message",
            "id": "m2",
            "mode": "follow-up",
            "text": "b",
            "receipt": "queued",
        },
        {
            "seq": 4,
            "ts": 103.5,
            "type": "user_message",
            "id": "m3",
            "mode": "steer",
            "text": "c",
            "receipt": "refused",
            "reason": "no",
        },
        {
            "seq": 5,
            "ts": 104.0,
            "type": "user_message",
            "id": "m1",
            "mode": "follow-up",
            "text": "a",
            "receipt": "delivered",
        },
        {
            "seq": 6,
            "ts": 105.0,
            "type": "assistant_text",
            "text": "ok",
            "stopReason": "stop",
            "rawStopReason": "stop",
            "model": "m1",
        },
        {"seq": 7, "ts": 106.0, "type": "usage", **usage, "cost": 0.5, "turns": 2},
        {
            "seq": 8,
            "ts": 107.0,
            "type": "limit",
            "kind": "cost",
            "limit": 0.4,
            "used": 0.5,
            "action": "wrap-up",
            "scope": "run",
        },
    ]
    result = publish_ended(run_dir, status="failed", error_message="died", spec=spec, events=events)
    assert result["usage"]["totalTokens"] == 45 and result["usage"]["cost"] == 0.5
    assert result["model"] == "m1"
    assert result["messages"] == {"sent": 2, "delivered": 1}
    assert result["limit"] == {
        "kind": "cost",
        "limit": 0.4,
        "used": 0.5,
        "action": "wrap-up",
        "scope": "run",
    }
    assert result["durationMs"] == 7000
    assert json.loads((run_dir / "result.json").read_text())["usage"]["totalTokens"] == 45


def test_the_start_allowance_counts_from_the_run_s_own_record(tmp_path: Path) -> None:
    """A run whose supervisor never recorded itself: lost 10 s after the run was made,
    however freshly a monitor looks (each new look used to grant another 10 s)."""
    old, new = tmp_path / "old", tmp_path / "new"
    for run_dir, made in ((old, time.time() - 11), (new, time.time())):
        run_dir.mkdir()
        meta = {"runId": run_dir.name, "backend": "pi", "task": "t", "cwd": "/", "argv": []}
        (run_dir / "meta.json").write_text(json.dumps({**meta, "createdAt": made}))
    assert RunMonitor(old).supervisor_alive() is False
    assert RunMonitor(new).supervisor_alive() is True


def test_a_job_killed_before_its_first_run_has_a_start_and_an_end_entry(
    isolated_state: Path, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = api.prepare_job({"mode": "parallel", "tasks": [{"task": "a"}, {"task": "b"}]})
    store = JobStore(isolated_state)
    # Its command died before the job started: made more than the allowance ago.
    path = store.path(job.job_id)
    state = json.loads(path.read_text())
    state["createdAt"] = time.time() - 30
    path.write_text(json.dumps(state))
    shown = invoke(["show", "--json", job.job_id])
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "failed"
    kinds = [e["eventType"] for e in entries(isolated_state, job.job_id)]
    assert kinds == ["subagent:start", "subagent:error"]
    # Another look writes nothing more.
    assert invoke(["ps"]).returncode == 0
    assert len(entries(isolated_state, job.job_id)) == 2
    history = invoke(["history", "--json"])
    assert job.job_id in history.stdout


def job_of(home: Path) -> str | None:
    jobs = [p.name for p in (home / "jobs").glob("*") if not p.name.startswith(".")]
    return jobs[0] if jobs else None


def kill_the_command_at(delay: float, home: Path, fake: Fake) -> None:
    steps = [*pi.start(), {"sleep": 1.0}, pi.text_end("done"), *pi.end()]
    env = {
        **os.environ,
        "SUBAGENTS_HOME": str(home),
        "SUBAGENTS_PI_BIN": str(fake.launcher),
        **fake.env(steps),
        # In-process: what is left is found by its environment, which a warm server's
        # forked worker and supervisor do not show (theirs is the server's, in /proc).
        "SUBAGENTS_WARM": "0",
    }
    args = ["run", "--parallel", "-j", "2", "--backend", "pi", "a", "b", "c"]
    cli = subprocess.Popen(
        [*CLI, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(delay)
    cli.send_signal(signal.SIGKILL)
    cli.wait(30)
    job_id = job_of(home)
    if job_id is None:  # killed before it made its job: nothing else may exist
        assert not (home / "runs").exists()
        return
    # A look from time to time (as ps / show would be) until the job has ended.
    looks_env = {k: v for k, v in env.items() if os.environ.get(k) != v}

    def ended() -> bool:
        invoke(["show", "--json", job_id], looks_env)
        state = read_json(home / "jobs" / job_id / "job.json")
        return isinstance(state, dict) and state.get("status") in TERMINAL

    eventually(ended, 2.0 + ENDS_WITHIN + 20, every=0.5)
    state: Any = read_json(home / "jobs" / job_id / "job.json")
    what = f"killed {delay:.2f} s in"
    assert isinstance(state, dict) and state.get("status") in TERMINAL, f"{what}: {state}"
    assert len(end_entries(home, job_id)) == 1, what
    runs = state["runs"]
    # Finished by a look (its driver dead): it ended when its last run did, not at the look.
    ends = [epoch(r.get("completedAt")) for r in runs if r.get("completedAt")]
    if ends and "driver died" in str(state.get("errorMessage")):
        assert abs(float(epoch(state["completedAt"]) or 0) - max(e for e in ends if e)) < 0.01


@pytest.mark.parametrize("delay", [0.2, 0.5, 0.8, 1.1, 1.4, 1.8, 2.4, 3.2])
def test_a_kill_9_of_a_foreground_parallel_command_ends_its_job_with_one_end_entry(
    tmp_path: Path, fake: Fake, delay: float
) -> None:
    home = tmp_path / f"home-{delay}"
    kill_the_command_at(delay, home, fake)
    # Nothing of the job is left running.
    marker = f"SUBAGENTS_HOME={home}".encode()

    def left() -> list[int]:
        pids = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError), open(f"/proc/{name}/environ", "rb") as f:
                if marker in f.read().split(b"\0") and pid_alive(int(name)):
                    pids.append(int(name))
        return pids

    assert eventually(lambda: not left(), 30), left()


def test_a_progress_sink_that_fails_costs_the_job_nothing(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    """The caller's progress (stderr, gone with its terminal or its parent) fails: the job
    goes on and records its end all the same."""
    steps = [*pi.start(), pi.text_end("kept"), *pi.end()]
    for key, value in {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}.items():
        monkeypatch.setenv(key, value)
    calls: list[str] = []

    def gone(_index: int, event: Any) -> None:
        calls.append(event["type"])
        raise BrokenPipeError(32, "Broken pipe")

    job = api.prepare_job({"mode": "parallel", "tasks": [{"task": "a"}, {"task": "b"}]})
    result = api.drive(job, on_event=gone)
    assert result["status"] == "completed" and [r["finalText"] for r in result["runs"]] == [
        "kept",
        "kept",
    ]
    assert len(calls) == 1  # not called again once it failed
    state = JobStore(isolated_state).load(job.job_id)
    assert state["status"] == "completed"
    assert len(end_entries(isolated_state, job.job_id)) == 1


def test_a_run_its_dead_driver_made_but_never_recorded_is_the_job_s(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    """The driver was killed between making a run's directory and writing its id in job.json:
    whoever finishes the job finds the run by its meta.json, so the job accounts for it."""
    from subagents.config import Settings
    from subagents.runs import RunRequest, prepare

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = api.prepare_job({"mode": "single", "tasks": [{"task": "a"}]})
    store = JobStore(isolated_state)
    req = RunRequest(task="a", backend="pi", cwd=str(fake.dir), job_id=job.job_id)
    spec, run_dir = prepare(req, Settings())
    meta = json.loads((run_dir / "meta.json").read_text())
    meta["createdAt"] = time.time() - 30  # its supervisor never started, long ago
    (run_dir / "meta.json").write_text(json.dumps(meta))
    dead = subprocess.Popen(["true"])
    dead.wait()
    state = json.loads(store.path(job.job_id).read_text())
    state.update(status="running", driver={"pid": dead.pid, "createTime": 1.0})
    store.path(job.job_id).write_text(json.dumps(state))
    finished = store.recover_if_orphaned(job.job_id)
    assert finished["status"] == "failed"
    assert [r["runId"] for r in finished.get("runs", [])] == [spec.runId]
    assert (run_dir / "result.json").exists()


def test_stop_stops_a_run_its_dead_driver_started_but_never_listed(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    """The driver was killed after handing a run to its supervisor and before listing it in
    job.json (it lists a run as its child starts): `stop` finds the run by its meta.json,
    stops it, and ends the job."""
    from subagents.config import Settings
    from subagents.runs import RunMonitor, RunRequest, prepare, start_prepared

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    for key, value in fake.env([*pi.start(), {"sleep": 60}]).items():
        monkeypatch.setenv(key, value)
    job = api.prepare_job({"mode": "single", "tasks": [{"task": "a"}]})
    store = JobStore(isolated_state)
    req = RunRequest(task="a", backend="pi", cwd=str(fake.dir), job_id=job.job_id)
    spec, run_dir = prepare(req, Settings())
    handle = start_prepared(spec, run_dir, job.plan.placement)
    dead = subprocess.Popen(["true"])
    dead.wait()
    state = json.loads(store.path(job.job_id).read_text())
    state.update(status="running", driver={"pid": dead.pid, "createTime": 1.0}, runIds=[])
    store.path(job.job_id).write_text(json.dumps(state))
    assert eventually(lambda: (run_dir / "events.jsonl").exists())
    stopped = invoke(["stop", job.job_id])
    assert stopped.returncode == 0 and f"{job.job_id}: aborted" in stopped.stdout, stopped.stderr
    result = handle.wait(timeout=30)
    assert result is not None and result["status"] == "aborted"
    assert not RunMonitor(run_dir).supervisor_alive()
    finished = store.load(job.job_id)
    assert finished["status"] == "aborted"
    assert [r["runId"] for r in finished.get("runs", [])] == [spec.runId]


def test_a_run_names_its_job_before_its_worktree_is_made(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated_state: Path
) -> None:
    """Making a worktree takes long: a driver killed meanwhile leaves a run directory that
    must already say whose it is (else no finisher can account for it)."""
    from support.git import git_repo

    from subagents import worktree
    from subagents.config import Settings
    from subagents.runs import RunRequest, prepare, runs_naming

    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    seen: list[list[str]] = []
    real_create = worktree.create

    def create(cwd: Path, run_id: str, run_dir: Path) -> Any:
        seen.append(runs_naming(isolated_state, "01m8hex3mv-job00000"))
        return real_create(cwd, run_id, run_dir)

    monkeypatch.setattr(worktree, "create", create)
    req = RunRequest(
        task="a", backend="pi", cwd=str(repo), isolate="worktree", job_id="01m8hex3mv-job00000"
    )
    spec, _ = prepare(req, Settings())
    assert seen == [[spec.runId]]
