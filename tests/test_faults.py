"""The fault matrix: each fault runs through the real CLI with scripted fake children, and
must end in a true record — the real cause in one line (never a traceback), `ps`/`show`/
`wait` still working, no temp file left, and exactly one lifecycle end entry per job.
The runs are processes; the looks at them afterwards (`ps`, `show`, `wait`, `rm`, ...) run
in this process (``invoke``, the same code), except where the fault is injected in every
process started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import CLI, cli, invoke, no_traceback
from support.fake import Fake, fake_env
from support.sessionlog import end_entries

pytestmark = pytest.mark.process

FAULTS = Path(__file__).parent / "faultinject"


def leftovers(home: Path) -> list[Path]:
    """Temp files and reserved space left behind anywhere in the state dir."""
    return [p for p in home.rglob("*") if p.name.endswith(".tmp") or p.name == ".reserve"]


def only_job(home: Path) -> str:
    jobs = [p.name for p in (home / "jobs").iterdir() if not p.name.startswith(".")]
    assert len(jobs) == 1, jobs
    return jobs[0]


def two_big_lines_then(answer: str) -> list[dict[str, Any]]:
    return [*pi.start(), {"big_line": 1_500_000}, {"big_line": 1_500_000}, pi.text_end(answer)]


# ---- disk full --------------------------------------------------------------------------


def test_disk_full_on_a_real_small_filesystem(fake: Fake, small_disk: Path) -> None:
    home = small_disk / "home"
    env = {**fake_env(fake, two_big_lines_then("The answer.")), "SUBAGENTS_HOME": str(home)}
    p = cli(["run", "x"], env)
    no_traceback(p)
    assert p.returncode == 1
    assert "no space left on device" in p.stderr
    assert "The answer." in p.stderr  # kept, shown as the partial output
    job_id = only_job(home)
    ps, show, wait = (
        invoke(["ps"], env),
        invoke(["show", job_id], env),
        invoke(["wait", job_id], env),
    )
    no_traceback(ps, show, wait)
    assert job_id in ps.stdout and "failed" in ps.stdout
    assert "no space left on device" in show.stdout
    assert wait.returncode == 1
    run = json.loads(invoke(["show", "--json", job_id], env).stdout)["runs"][0]
    assert run["status"] == "failed" and run["finalText"] == "The answer."
    assert "no space left on device" in run["errorMessage"]
    assert leftovers(home) == []
    assert len(end_entries(home, job_id)) == 1
    # Now not a byte is left: a new run is refused in one line, and nothing is half-made.
    with contextlib.suppress(OSError), open(small_disk / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 65536)
    again = cli(["run", "x"], env)
    no_traceback(again)
    assert again.returncode == 1 and "no space left on device" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert only_job(home) == job_id and len(list((home / "runs").iterdir())) == 1
    ps = invoke(["ps"], env)
    no_traceback(ps)
    assert ps.returncode == 0 and job_id in ps.stdout
    assert leftovers(home) == []


def test_disk_full_injected_at_the_write_layer(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    # The same fault anywhere: the child fills the disk half-way through its run.
    flag = tmp_path / "disk-is-full"
    steps = [
        *pi.start(),
        *pi.tool_use(),
        {"pidfile": str(flag)},
        *pi.tool_end(),
        *pi.answer("Done."),
    ]
    env = {
        **fake_env(fake, steps),
        "PYTHONPATH": os.pathsep.join([str(FAULTS), os.environ.get("PYTHONPATH", "")]),
        "SUBAGENTS_TEST_DISK_FULL": str(flag),
    }
    p = cli(["run", "x"], env)
    no_traceback(p)
    assert p.returncode == 1 and "no space left on device" in p.stderr
    job_id = only_job(isolated_state)
    ps, show = cli(["ps"], env), cli(["show", "--json", job_id], env)
    no_traceback(ps, show)
    state = json.loads(show.stdout)
    assert state["status"] == "failed"
    assert "could not write" in state["runs"][0]["errorMessage"]
    assert "no space left on device" in state["runs"][0]["diagnostics"]
    assert "the supervisor died" not in show.stdout
    assert leftovers(isolated_state) == []
    assert len(end_entries(isolated_state, job_id)) == 1


def test_end_entry_that_cannot_be_written_is_written_once_later(
    fake: Fake, isolated_state: Path
) -> None:
    # The session log cannot be appended to (here: its name is taken by a directory).
    log = isolated_state / "sessions" / "default.jsonl"
    log.mkdir(parents=True)
    p = cli(["run", "x"], fake_env(fake, pi.answer("Yes.")))
    no_traceback(p)
    assert p.returncode == 0 and p.stdout == "Yes.\n"
    job_id = only_job(isolated_state)
    assert json.loads(invoke(["show", "--json", job_id]).stdout).get("endEntry") == "pending"
    log.rmdir()
    for _ in range(3):  # whoever looks next writes it; nobody writes it twice
        no_traceback(invoke(["ps"]), invoke(["show", job_id]), invoke(["wait", job_id]))
    assert [e["eventType"] for e in end_entries(isolated_state, job_id)] == ["subagent:complete"]


def test_unwritable_index_is_passed_by(fake: Fake, isolated_state: Path) -> None:
    (isolated_state / "index.sqlite").mkdir(parents=True)  # no database can be opened there
    p = cli(["run", "x"], fake_env(fake, pi.answer("Indexed or not.")))
    no_traceback(p)
    assert p.returncode == 0 and p.stdout == "Indexed or not.\n"
    job_id = only_job(isolated_state)
    ps, show, wait = invoke(["ps"]), invoke(["show", job_id]), invoke(["wait", job_id])
    no_traceback(ps, show, wait)
    assert job_id in ps.stdout and "completed" in ps.stdout
    assert wait.returncode == 0 and "Indexed or not." in show.stdout
    assert len(end_entries(isolated_state, job_id)) == 1


# ---- killed processes -------------------------------------------------------------------


def _driver_pid(home: Path, job_id: str) -> int | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return int(json.loads((home / "jobs" / job_id / "job.json").read_text())["driver"]["pid"])
    return None


def _background_job_whose_driver_dies(fake: Fake, home: Path, answer: str) -> str:
    """A background job's id, its driver SIGKILLed once its run has started (the run goes
    on, and answers ``answer`` once the driver is gone)."""
    started, go = fake.dir / "started", fake.dir / "go"
    steps = [*pi.start(), {"pidfile": str(started)}, {"wait_for": str(go)}, *pi.answer(answer)]
    job_id = str(
        json.loads(cli(["run", "--bg", "--json", "x"], fake_env(fake, steps)).stdout)["jobId"]
    )
    assert eventually(started.exists)
    driver = _driver_pid(home, job_id)
    assert driver is not None
    os.kill(driver, signal.SIGKILL)
    assert eventually(lambda: not pid_alive(driver))
    go.touch()
    return job_id


def test_job_driver_killed_after_starting_its_run(fake: Fake, isolated_state: Path) -> None:
    job_id = _background_job_whose_driver_dies(fake, isolated_state, "Late but true.")
    wait = invoke(["wait", job_id, "--json"])
    no_traceback(wait)
    result = json.loads(wait.stdout)
    # The only run completed: so did the job, with its answer; the driver's death is noted.
    assert wait.returncode == 0 and result["status"] == "completed"
    assert result["finalText"] == "Late but true."
    show = invoke(["show", job_id])
    assert "the job driver died" in show.stdout
    history = invoke(["history", "--json"])
    assert any(json.loads(x)["jobId"] == job_id for x in history.stdout.splitlines())
    no_traceback(invoke(["ps"]), invoke(["ps"]))
    assert [e["eventType"] for e in end_entries(isolated_state, job_id)] == ["subagent:complete"]


def test_a_dead_drivers_late_end_entry_still_runs_its_hooks(
    fake: Fake, isolated_state: Path
) -> None:
    # The end entry of a job whose driver died is written by whoever finds it gone (here
    # `wait`): the hooks it triggers run then, once, as the driver would have run them.
    fired = fake.dir / "fired"
    hook = f"import sys; open({str(fired)!r}, 'a').write(sys.stdin.read() + chr(10))"
    config = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[[hooks]]\non = ["complete"]\ncommand = [{json.dumps(sys.executable)}, "-c", {json.dumps(hook)}]\n'
    )
    job_id = _background_job_whose_driver_dies(fake, isolated_state, "Late.")
    wait = invoke(["wait", job_id, "--json"])
    assert wait.returncode == 0 and json.loads(wait.stdout)["status"] == "completed"
    no_traceback(
        invoke(["ps"]), invoke(["wait", job_id])
    )  # later looks write and fire nothing more
    assert eventually(lambda: fired.exists() and fired.read_text().strip() != "", 30)
    time.sleep(1)  # a second firing, if there were one, would have landed by now
    entries = [json.loads(line) for line in fired.read_text().splitlines() if line]
    assert [(e["eventType"], e["jobId"]) for e in entries] == [("subagent:complete", job_id)]


def test_supervisor_killed_ends_the_job_with_that_cause(fake: Fake, isolated_state: Path) -> None:
    pidfile = fake.dir / "child.pid"
    steps = [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 60}]
    proc = subprocess.Popen(
        [*CLI, "run", "x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **fake_env(fake, steps)},
    )
    assert eventually(pidfile.exists)
    run_dir = next((isolated_state / "runs").iterdir())
    supervisor = json.loads((run_dir / "supervisor.json").read_text())["pid"]
    os.kill(supervisor, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert out == ""
    assert proc.returncode == 1 and "Traceback" not in err
    assert "the supervisor died" in err
    assert eventually(lambda: not pid_alive(int(pidfile.read_text())), 10)
    job_id = only_job(isolated_state)
    assert [e["eventType"] for e in end_entries(isolated_state, job_id)] == ["subagent:error"]
    assert leftovers(isolated_state) == []


def test_a_failing_hook_changes_nothing(fake: Fake, tmp_path: Path, isolated_state: Path) -> None:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text(
        '[[hooks]]\non = ["*"]\ncommand = ["sh", "-c", "exit 7"]\n\n'
        '[[hooks]]\non = ["*"]\ncommand = ["/nonexistent/hook"]\n'
    )
    p = cli(["run", "x"], fake_env(fake, pi.answer("Hooked.")))
    no_traceback(p)
    assert p.returncode == 0 and p.stdout == "Hooked.\n"
    job_id = only_job(isolated_state)
    assert len(end_entries(isolated_state, job_id)) == 1
    hooks_log = isolated_state / "hooks.log.jsonl"
    assert eventually(lambda: hooks_log.exists() and len(hooks_log.read_text().splitlines()) >= 4)


def test_ctrl_c_is_reported_as_sigint(fake: Fake) -> None:
    pidfile = fake.dir / "child.pid"
    proc = subprocess.Popen(
        [*CLI, "run", "x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={
            **os.environ,
            **fake_env(fake, [{"pidfile": str(pidfile)}, *pi.start(), {"sleep": 60}]),
        },
    )
    assert eventually(pidfile.exists)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    # The end line says a person's stop in their words; the signal that came (SIGINT, not
    # SIGTERM) stays in the record and its post-mortem.
    (end,) = [ln for ln in err.splitlines() if ln.startswith("■ job ")]
    assert end.endswith("· stopped by you") and "SIG" not in end, err
    assert "Error: aborted: the supervisor received SIGINT" in err
    (run_dir,) = (Path(os.environ["SUBAGENTS_HOME"]) / "runs").iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    assert "received SIGINT" in result["errorMessage"]
    assert "received SIGTERM" not in result["errorMessage"]


# ---- the smaller faults -----------------------------------------------------------------


def test_no_task_is_a_usage_line_even_with_an_open_stdin() -> None:
    # A parent agent that spawns `subagents run` with a pipe it never closes must not hang.
    proc = subprocess.Popen(
        [*CLI, "run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.wait(timeout=60)  # its stdin stays open all along
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 2 and out == ""
    assert err.startswith("subagents: missing TASK; usage: subagents run")
    assert len(err.strip().splitlines()) == 1
    # '-' reads the task from stdin; an empty one is named plainly.
    empty = cli(["run", "-"], input="", stdin=None)
    assert empty.returncode == 2 and "the task is empty" in empty.stderr
    assert "steps.0" not in empty.stderr


def test_grandchild_holding_stdout_ends_soon_and_the_cleanup_is_forced(fake: Fake) -> None:
    # A kill grace far longer than the bound below: the end must not wait it out for a
    # killed grandchild's zombie (which init, here, may never reap).
    fake.kill_grace = 30.0
    pidfile = fake.dir / "grandchild.pid"
    steps = [
        *pi.start(),
        {"grandchild": 120, "pidfile": str(pidfile)},
        *pi.answer("Bye."),
        {"exit": 0},
    ]
    t0 = time.monotonic()
    result = fake.run(steps)
    assert time.monotonic() - t0 < 20
    assert result["status"] == "completed" and result["forcedCleanup"] is True
    assert eventually(lambda: not pid_alive(int(pidfile.read_text())), 10)


def test_a_long_answer_is_not_one_huge_progress_line(fake: Fake) -> None:
    answer = "\n".join(f"paragraph {i}: " + "words " * 40 for i in range(60))  # ~15 kB
    p = cli(["run", "x"], fake_env(fake, pi.answer(answer)))
    assert p.returncode == 0 and p.stdout == answer + "\n"
    assert max(len(line) for line in p.stderr.splitlines()) <= 500


# ---- housekeeping -----------------------------------------------------------------------


def _bg_job(fake: Fake, steps: list[dict[str, Any]]) -> str:
    job_id: str = json.loads(cli(["run", "--bg", "--json", "x"], fake_env(fake, steps)).stdout)[
        "jobId"
    ]
    return job_id


def _fg_job(fake: Fake, steps: list[dict[str, Any]]) -> str:
    p = cli(["run", "--json", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    return str(json.loads(p.stdout)["jobId"])


def _runs_of(home: Path, job_id: str) -> list[str]:
    return [r for r in json.loads((home / "jobs" / job_id / "job.json").read_text())["runIds"] if r]


def test_rm_and_prune_remove_finished_jobs_whole(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    done = [_fg_job(fake, pi.answer(f"job {i}")) for i in range(3)]
    started = fake.dir / "started"
    running = _bg_job(fake, [*pi.start(), {"pidfile": str(started)}, {"sleep": 60}])
    assert eventually(started.exists)  # its driver runs it: the job is running, not pending
    # A run that recorded a git worktree: removing its job removes the worktree too.
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
        check=True,
    )
    tree = tmp_path / "tree"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(tree)], check=True)
    first_run = isolated_state / "runs" / _runs_of(isolated_state, done[0])[0]
    result = json.loads((first_run / "result.json").read_text())
    # (a record as a run makes it: the repository, the worktree and its branch)
    recorded = {"repo": str(repo), "path": str(tree), "branch": "tree"}
    (first_run / "result.json").write_text(json.dumps({**result, "worktree": recorded}))

    # A running job is refused, and then nothing is removed, not even the finished one.
    refused = invoke(["rm", done[0], running])
    assert refused.returncode == 2 and f"job {running} is running" in refused.stderr
    assert (isolated_state / "jobs" / done[0]).is_dir() and first_run.is_dir()

    removed = invoke(["rm", done[0][:12]])
    assert removed.returncode == 0, removed.stderr
    assert "removed 1 job (1 run(s), 1 worktree(s))" in removed.stdout
    assert not (isolated_state / "jobs" / done[0]).exists() and not first_run.exists()
    assert not tree.exists()
    assert done[0] not in invoke(["ps", "--json"]).stdout
    again = invoke(["show", done[0]])
    assert again.returncode == 2 and f"no job or run with id '{done[0]}'" in again.stderr

    assert invoke(["prune", "--older-than", "0s", "--keep", "1", "--dry-run"]).stdout.split() == [
        done[1]
    ]
    pruned = invoke(["prune", "--older-than", "0s", "--keep", "1"])
    assert pruned.returncode == 0 and "removed 1 job" in pruned.stdout
    left = {p.name for p in (isolated_state / "jobs").iterdir()}
    assert left == {done[2], running}
    assert {r.name for r in (isolated_state / "runs").iterdir()} == set(
        _runs_of(isolated_state, done[2]) + _runs_of(isolated_state, running)
    )
    invoke(["stop", running])


def test_unknown_ids_are_worded_one_way(fake: Fake) -> None:
    bogus = "0" * 10 + "-" + uuid.uuid4().hex[:8].replace("u", "0")
    for cmd in (["show", bogus], ["wait", bogus], ["rm", bogus], ["show", "../x"], ["stop", "!!"]):
        p = invoke(cmd)
        assert p.returncode == 2, (cmd, p.stderr)
        assert p.stderr.startswith("subagents: no job or run with id "), (cmd, p.stderr)
