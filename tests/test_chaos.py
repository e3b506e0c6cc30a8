"""Issue 27, the chaos test: trials that SIGKILL a random process of an isolated job (the
command, the background driver, the supervisor, the child, the grandchild) at a random
moment, then reconcile with two readers at once. Every job must end with exactly one end
entry, a result, the changes its child made on its branch, and no process of it left.

``SUBAGENTS_CHAOS_TRIALS`` sets the number of trials (the suite runs a few; the issue's run
is 100: ``SUBAGENTS_CHAOS_TRIALS=100 pytest tests/test_chaos.py``), ``SUBAGENTS_CHAOS_SEED``
the seed (a failure names its trial's seed and what it killed when)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.fake import Fake
from support.git import git, git_repo
from support.sessionlog import end_entries

pytestmark = pytest.mark.process

TRIALS = int(os.environ.get("SUBAGENTS_CHAOS_TRIALS", "8"))
SEED = int(os.environ.get("SUBAGENTS_CHAOS_SEED", "27"))
CLI = [sys.executable, "-m", "subagents.cli"]
# What a reader runs (the job's id after it where it takes one): each may find the job's
# driver or supervisor dead and finish what it left.
READERS = (["wait", "--json", "{job}"], ["ps"], ["show", "--json", "{job}"], ["top", "--json"])


@dataclass
class Trial:
    index: int
    seed: int
    home: Path
    background: bool
    victim: str
    delay: float
    sleep: float

    def __str__(self) -> str:
        where = "background" if self.background else "foreground"
        return (
            f"trial {self.index} (seed {self.seed}): {where} job, SIGKILL to the {self.victim} "
            f"{self.delay:.2f} s in, the child answering after {self.sleep:.2f} s"
        )


def job_of(home: Path) -> str | None:
    jobs = [p.name for p in (home / "jobs").glob("*") if not p.name.startswith(".")]
    return jobs[0] if jobs else None


def read_json(path: Path) -> Any:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def victim_pid(trial: Trial, cli: subprocess.Popen[bytes] | None, pidfiles: Path) -> int | None:
    """The victim's pid once it exists (None: not now)."""
    if trial.victim == "command":
        return cli.pid if cli is not None else None
    if trial.victim in ("child", "grandchild"):
        found = pidfiles / f"{trial.victim}.pid"
        return int(found.read_text()) if found.exists() else None
    job_id = job_of(trial.home)
    state = read_json(trial.home / "jobs" / job_id / "job.json") if job_id else None
    if not isinstance(state, dict):
        return None
    if trial.victim == "driver":
        driver = state.get("driver")
        return int(driver["pid"]) if isinstance(driver, dict) else None
    run_ids = state.get("runIds") or []
    record = read_json(trial.home / "runs" / run_ids[0] / "supervisor.json") if run_ids else None
    return int(record["pid"]) if isinstance(record, dict) else None


def processes_of(home: Path) -> list[str]:
    """Every process still running (not a zombie) with this state home in its environment:
    the command, driver, supervisor, spare supervisors, child and grandchild all have it."""
    marker = f"SUBAGENTS_HOME={home}".encode()
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            if stat[stat.rfind(b")") + 2 :][:1] == b"Z":
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            left.append(f"{name}: {argv[:120]}")
        except OSError:
            continue
    return left


def run_trial(trial: Trial, fake: Fake, repo: Path) -> None:
    pidfiles = trial.home / "pids"
    pidfiles.mkdir(parents=True)
    steps = [
        *pi.start(),
        {"write": f"made{trial.index}.txt", "text": f"trial {trial.index}\n"},
        {"pidfile": str(pidfiles / "child.pid")},
        {"grandchild": 300, "pidfile": str(pidfiles / "grandchild.pid")},
        {"sleep": trial.sleep},
        pi.text_end(f"done {trial.index}"),
        *pi.end(),
    ]
    env = {
        **os.environ,
        "SUBAGENTS_HOME": str(trial.home),
        "SUBAGENTS_PI_BIN": str(fake.launcher),
        **fake.env(steps),
        # In-process: what is left is found by its environment, which a warm server's
        # forked worker and supervisor do not show (theirs is the server's, in /proc).
        "SUBAGENTS_WARM": "0",
    }
    args = ["run", "--json", "--isolate", "worktree", "--cwd", str(repo), f"task {trial.index}"]
    out = subprocess.DEVNULL
    cli: subprocess.Popen[bytes] | None = None
    if trial.background:
        started = subprocess.run(
            [*CLI, *args[:1], "--bg", *args[1:]], env=env, capture_output=True, timeout=60
        )
        assert started.returncode == 0, started.stderr
    else:
        cli = subprocess.Popen([*CLI, *args], env=env, stdin=out, stdout=out, stderr=out)
    t0 = time.monotonic()
    time.sleep(trial.delay)
    # The victim, once it exists (it may never: the job may be over by then).
    deadline = time.monotonic() + 10
    pid = None
    while pid is None and time.monotonic() < deadline:
        pid = victim_pid(trial, cli, pidfiles)
        if pid is None:
            time.sleep(0.02)
    killed_at = time.monotonic() - t0
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # Two readers at once, each of which may find the job's driver or supervisor dead.
    rng = random.Random(trial.seed + 1)
    job_id = job_of(trial.home)
    if job_id is None and cli is not None and pid is not None:
        cli.wait(120)
        job_id = job_of(trial.home)
        if job_id is None:  # the command was killed before it made its job: nothing else
            assert not (trial.home / "runs").exists(), f"{trial}: a run without a job"
            assert processes_of(trial.home) == [], f"{trial}: {processes_of(trial.home)}"
            return
    while job_id is None and time.monotonic() < deadline + 10:
        job_id = job_of(trial.home)
        time.sleep(0.02)
    assert job_id is not None, f"{trial}: no job was recorded"
    pair = [rng.choice(READERS), READERS[0]]
    readers = [
        subprocess.Popen(
            [*CLI, *(a.replace("{job}", job_id) for a in cmd)],
            env=env,
            stdin=out,
            stdout=out,
            stderr=out,
        )
        for cmd in pair
    ]
    for reader in readers:
        reader.wait(120)
    if cli is not None:
        cli.wait(120)
    what = f"{trial}; killed pid {pid} at {killed_at:.2f} s; readers {pair}"
    # One end, a result, the changes on the branch, nothing left running.
    state = read_json(trial.home / "jobs" / job_id / "job.json")
    assert isinstance(state, dict) and state.get("status") in (
        "completed",
        "failed",
        "aborted",
        "timeout",
    ), f"{what}: job not ended: {state}"
    runs_made = list((trial.home / "runs").glob("*")) if (trial.home / "runs").exists() else []
    assert isinstance(state.get("runs"), list) and len(state["runs"]) == len(runs_made), what
    assert len(end_entries(trial.home, job_id)) == 1, f"{what}: {end_entries(trial.home, job_id)}"
    if not runs_made:  # the driver was killed before it made the job's run
        assert trial.victim in ("driver", "command") and state["status"] == "failed", what
        assert processes_of(trial.home) == [], f"{what}: left running: {processes_of(trial.home)}"
        return
    assert len(state["runs"]) == 1, what
    run = state["runs"][0]
    assert "paths" in run and (trial.home / "runs" / run["runId"] / "result.json").exists(), what
    if (pidfiles / "child.pid").exists():  # the child had written its file by then
        tree = run.get("worktree") or {}
        assert "error" not in tree and tree.get("commit"), f"{what}: {tree}"
        shown = git(repo, "show", f"{tree['branch']}:made{trial.index}.txt")
        assert shown == f"trial {trial.index}\n", what
    deadline = time.monotonic() + 15
    while processes_of(trial.home) and time.monotonic() < deadline:
        time.sleep(0.1)  # (a spare supervisor notices its starter is gone within moments)
    assert processes_of(trial.home) == [], f"{what}: left running: {processes_of(trial.home)}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"app.py": "one\n"})


def test_chaos(fake: Fake, repo: Path, tmp_path: Path) -> None:
    failures = []
    only = os.environ.get("SUBAGENTS_CHAOS_ONLY")  # one trial's index, to look at it again
    for n, index in enumerate([int(only)] * TRIALS if only else range(TRIALS)):
        rng = random.Random(SEED * 1000 + index)
        background = rng.random() < 0.5
        victims = ["driver" if background else "command", "supervisor", "child", "grandchild"]
        trial = Trial(
            index=index,
            seed=SEED * 1000 + index,
            home=tmp_path / f"home{n}",
            background=background,
            victim=rng.choice(victims),
            delay=rng.uniform(0.0, 2.0),
            sleep=rng.uniform(0.2, 2.0),
        )
        try:
            run_trial(trial, fake, repo)
        except AssertionError as exc:
            failures.append(" ".join(str(exc).split("\n")[:2]))
            for proc in processes_of(trial.home):  # nothing of a failed trial lingers
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(proc.split(":")[0]), signal.SIGKILL)
    assert not failures, f"{len(failures)} of {TRIALS} trials failed:\n" + "\n".join(failures)
