"""Issue 27, processes: a pid read from a record is signalled only while it is still the
recorded process (its start time matches), and a caller that binds a job to its life
(``--parent-pid``) takes the job down with it however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import CLI, cli, invoke
from support.fake import Fake, fake_env

from subagents.core import procs
from subagents.runs import RunMonitor

pytestmark = pytest.mark.process


def started(run_dir: Path) -> dict[str, object]:
    """The run's run_started event, once it is written."""
    found: list[dict[str, object]] = []

    def look() -> bool:
        events = run_dir / "events.jsonl"
        lines = events.read_text().splitlines() if events.exists() else []
        found[:] = [e for e in map(json.loads, lines) if e["type"] == "run_started"]
        return bool(found)

    assert eventually(look, 30), "the run never started"
    return found[0]


def rewrite_started(run_dir: Path, **fields: object) -> None:
    """events.jsonl with its run_started event changed (what a reused pid looks like)."""
    events = run_dir / "events.jsonl"
    lines = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "run_started":
            event.update(fields)
            event = {k: v for k, v in event.items() if v is not None}
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n")


@pytest.fixture
def stranger() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Makes a process of someone else's, leading its own process group: started well after
    the run's child (start times are told apart to within 50 ms)."""
    made: list[subprocess.Popen[bytes]] = []

    def make() -> subprocess.Popen[bytes]:
        time.sleep(0.3)
        made.append(subprocess.Popen(["sleep", "300"], start_new_session=True))
        return made[-1]

    yield make
    for proc in made:
        proc.kill()
        proc.wait()


def kill_supervisor_and_child(fake: Fake, steps: list[dict[str, object]]) -> Path:
    """A run whose supervisor and child were both SIGKILLed (an OOM kill, a reboot)."""
    handle = fake.start(steps)
    child = int(started(handle.run_dir)["pid"])  # type: ignore[call-overload]
    os.kill(handle.launched.pid, signal.SIGKILL)
    os.killpg(child, signal.SIGKILL)
    assert eventually(lambda: not procs.group_alive(child), 10)
    handle.launched.reap(5)
    return handle.run_dir


def test_a_recorded_child_pid_now_someone_elses_is_never_signalled(
    fake: Fake, stranger: Callable[[], subprocess.Popen[bytes]]
) -> None:
    run_dir = kill_supervisor_and_child(fake, [*pi.start(), *pi.tool_use(), {"sleep": 60}])
    # The pid went to another process since: the record still names the child's start time.
    other = stranger()
    rewrite_started(run_dir, pid=other.pid)
    result = RunMonitor(run_dir).wait(timeout=30)
    assert result is not None and result["status"] == "failed"
    assert f"its child (pid {other.pid}) had already ended" in result["errorMessage"]
    time.sleep(0.2)
    assert other.poll() is None, "a process that is not the run's was killed"


def test_a_child_recorded_without_its_start_time_is_not_signalled(
    fake: Fake, stranger: Callable[[], subprocess.Popen[bytes]]
) -> None:
    # A record from before start times were kept: its pid proves nothing.
    run_dir = kill_supervisor_and_child(fake, [*pi.start(), {"sleep": 60}])
    other = stranger()
    rewrite_started(run_dir, pid=other.pid, createTime=None)
    result = RunMonitor(run_dir).wait(timeout=30)
    assert result is not None and "its start time was not recorded" in result["errorMessage"]
    assert other.poll() is None


def test_the_child_is_recorded_with_its_start_time(fake: Fake) -> None:
    handle = fake.start([*pi.start(), {"sleep": 60}])
    event = started(handle.run_dir)
    assert procs.is_alive(event)  # pid and createTime name the child, as psutil sees it
    handle.stop()


@pytest.fixture
def subreaper() -> Iterator[None]:
    """This process adopts its orphaned descendants (so a test can reap a dead supervisor's
    child: a zombie leader still proves its group is the run's)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) is not available")
    yield
    libc.prctl(pr_set_child_subreaper, 0, 0, 0, 0)


def test_what_a_dead_supervisors_child_left_is_ended_by_the_run_id_it_carries(
    fake: Fake, reap_group: list[int], subreaper: None
) -> None:
    # The supervisor dies, then its child ends and is reaped: the grandchild it left (still
    # in the child's process group) is the run's by the run id in its environment.
    gate, grandchild = fake.dir / "gate", fake.dir / "grandchild.pid"
    handle = fake.start(
        [
            *pi.start(),
            {"grandchild": 120, "pidfile": str(grandchild)},
            {"wait_for": str(gate)},
            {"exit": 0},
        ]
    )
    child = int(started(handle.run_dir)["pid"])  # type: ignore[call-overload]
    reap_group.append(child)
    assert eventually(grandchild.exists, 30)
    os.kill(handle.launched.pid, signal.SIGKILL)
    # Its children are ours once it has exited (a zombie already has handed them over).
    assert eventually(lambda: not pid_alive(handle.launched.pid), 10)
    handle.launched.reap(5)
    gate.touch()
    assert os.waitpid(child, 0)[0] == child  # adopted here: gone for good once reaped
    left = int(grandchild.read_text())
    assert pid_alive(left)
    result = RunMonitor(handle.run_dir).wait(timeout=30)
    assert result is not None and result["status"] == "failed"
    assert f"what it left (pid {left}) was killed" in result["errorMessage"]
    assert eventually(lambda: not pid_alive(left), 10)
    os.waitpid(left, 0)


# ---- --parent-pid: the job is bound to its caller --------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("bg", [False, True])
def test_a_dead_parent_pid_creates_nothing(fake: Fake, isolated_state: Path, bg: bool) -> None:
    env = fake_env(fake, [{"session": True}, *pi.answer("ok")])  # a run that can continue
    first = invoke(["run", "--json", "first"], env)
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["runId"]
    before = sorted((isolated_state / "jobs").iterdir())
    gone = dead_pid()
    extra = ["--bg"] if bg else []
    for args in (
        ["run", *extra, "--parent-pid", str(gone), "x"],
        ["continue", *extra, "--parent-pid", str(gone), run_id, "more"],
    ):
        p = invoke(args, env)
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip() == f"subagents: --parent-pid {gone}: no such process"
    assert sorted((isolated_state / "jobs").iterdir()) == before
    assert len(list((isolated_state / "runs").iterdir())) == 1


def test_a_background_job_bound_to_its_parent_stops_when_the_parent_ends(
    fake: Fake, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    env = fake_env(fake, [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 60}])
    parent = subprocess.Popen(["sleep", "300"])
    started_bg = cli(["run", "--bg", "--json", "--parent-pid", str(parent.pid), "x"], env)
    assert started_bg.returncode == 0, started_bg.stderr
    job_id = json.loads(started_bg.stdout)["jobId"]
    assert eventually(pidfile.exists)
    parent.kill()
    parent.wait()
    waited = invoke(["wait", "--json", "--timeout", "120", job_id], env)
    assert waited.returncode == 130, waited.stderr
    job = json.loads(waited.stdout)
    assert job["status"] == "aborted"
    assert (
        f"process {parent.pid}, which the run was bound to, ended" in job["runs"][0]["errorMessage"]
    )
    assert eventually(lambda: not pid_alive(int(pidfile.read_text())), 10)


def test_a_foreground_job_bound_to_its_parent_stops_when_its_command_is_killed(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    # The parent lives on, but the command it started is killed outright: nothing of the
    # job may run on to its end.
    pidfile = tmp_path / "child.pid"
    env = fake_env(fake, [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 60}])
    parent = subprocess.Popen(["sleep", "300"])
    try:
        proc = subprocess.Popen(
            [*CLI, "run", "--json", "--parent-pid", str(parent.pid), "x"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        assert eventually(pidfile.exists)
        proc.kill()
        proc.wait()
        child = int(pidfile.read_text())
        assert eventually(lambda: not pid_alive(child), 15), "the child ran on"
        job_id = next(p.name for p in (isolated_state / "jobs").iterdir())
        waited = invoke(["wait", "--json", "--timeout", "120", job_id], env)
        run = json.loads(waited.stdout)["runs"][0]
        assert run["status"] == "aborted"
        assert f"process {proc.pid}, which the run was bound to, ended" in run["errorMessage"]
    finally:
        parent.kill()
        parent.wait()


# ---- partial: continue given a job id; top's footer --------------------------------------


def test_continue_takes_the_id_of_a_job_of_one_run(fake: Fake, isolated_state: Path) -> None:
    env = fake_env(fake, [{"session": True}, *pi.answer("first")])
    first = json.loads(invoke(["run", "--json", "x"], env).stdout)
    p = invoke(["continue", "--json", first["jobId"], "more"], env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["continuedFrom"] == first["runId"]
    both = json.loads(invoke(["run", "--json", "--parallel", "a", "b"], env).stdout)
    p = invoke(["continue", both["jobId"], "more"], env)
    assert p.returncode == 2
    ids = ", ".join(r["runId"] for r in both["runs"])
    assert p.stderr.strip() == (
        f"subagents: {both['jobId']!r} is job {both['jobId']}, which has 2 runs: give one of "
        f"them ({ids})"
    )


def test_tops_footer_says_how_many_jobs_of_how_many(fake: Fake, isolated_state: Path) -> None:
    from subagents.jobs import LiveJobs

    env = fake_env(fake, pi.answer("ok"))
    for task in ("a", "b", "c"):
        assert invoke(["run", "-q", task], env).returncode == 0
    assert LiveJobs(isolated_state, limit=2).snapshot().footer().startswith("2 of 3 jobs · ")
    assert LiveJobs(isolated_state, limit=50).snapshot().footer().startswith("3 jobs · ")
