"""Jobs through the real CLI: parallel, chain, background, ps/show/logs/wait/stop, plans."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import CLI as CLI_ARGS
from support.cli import cli, invoke
from support.fake import Fake, bin_env

from subagents.testing.fakeagent import SCRIPT_ENV

pytestmark = pytest.mark.process


def timed_child(fake: Fake, log: Path, seconds: float, answer: str) -> Path:
    """A fake pi that logs when it starts and ends, sleeps, then answers."""
    script = fake.dir / "timed.py"
    script.write_text(
        "import json, os, sys, time\n"
        "if sys.argv[1:] == ['--version']: sys.exit(0)  # read once per binary (runs/versions.py)\n"
        f"log = {str(log)!r}\n"
        "def note(what):\n"
        "    with open(log, 'a') as f: f.write(f'{what} {os.getpid()} {time.time()}\\n')\n"
        "note('start')\n"
        f"time.sleep({seconds})\n"
        f"msg = {{'role': 'assistant', 'content': [{{'type': 'text', 'text': {answer!r} + ' ' + sys.argv[-1]}}], 'stopReason': 'stop', 'model': 'm'}}\n"
        "print(json.dumps({'type': 'message_end', 'message': msg}), flush=True)\n"
        "note('end')\n"
    )
    launcher = fake.dir / "timed-pi"
    launcher.write_text(f"#!{os.sys.executable}\nexec(open({str(script)!r}).read())\n")
    launcher.chmod(0o755)
    return launcher


def test_parallel_six_tasks_at_concurrency_two(fake: Fake, tmp_path: Path) -> None:
    log = tmp_path / "lifetimes.log"
    launcher = timed_child(fake, log, 0.5, "answer to")
    tasks = [f"task-{i}" for i in range(6)]
    p = invoke(
        ["run", "--parallel", "-j", "2", "--json", *tasks], {"SUBAGENTS_PI_BIN": str(launcher)}
    )
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)
    assert job["mode"] == "parallel" and job["status"] == "completed"
    assert [r["finalText"] for r in job["runs"]] == [f"answer to task-{i}" for i in range(6)]
    assert job["finalText"] is None
    # Never more than 2 children alive at once.
    spans: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        _what, pid, ts = line.split()
        spans.setdefault(pid, []).append(float(ts))
    assert len(spans) == 6
    points = sorted([(s[0], 1) for s in spans.values()] + [(s[1], -1) for s in spans.values()])
    alive = peak = 0
    for _, step in points:
        alive += step
        peak = max(peak, alive)
    assert peak == 2


def test_chain_passes_previous_and_stops_at_a_failure(fake: Fake, tmp_path: Path) -> None:
    launcher = timed_child(fake, tmp_path / "chain.log", 0, "got")
    plan = tmp_path / "plan.yaml"
    plan.write_text("mode: chain\nsteps:\n  - task: first\n  - task: 'then use {previous}'\n")
    p = invoke(["run", "-f", str(plan), "--json"], {"SUBAGENTS_PI_BIN": str(launcher)})
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)
    assert job["runs"][0]["finalText"] == "got first"
    assert job["runs"][1]["task"] == "then use got first"
    assert job["finalText"] == job["runs"][1]["finalText"] == "got then use got first"
    assert job["usage"]["totalTokens"] == 0

    # A failing first step: the chain stops there.
    steps: list[dict[str, Any]] = [{"exit": 3}]
    plan.write_text(
        json.dumps({"mode": "chain", "steps": [{"task": "a"}, {"task": "b {previous}"}]})
    )
    p = invoke(["run", "-f", str(plan), "--json"], {**bin_env(fake), **fake.env(steps)})
    assert p.returncode == 1
    job = json.loads(p.stdout)
    assert job["status"] == "failed" and len(job["runs"]) == 1
    assert job["finalText"] is None


def _job_id(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, p.stderr
    return str(json.loads(p.stdout)["jobId"])


def test_background_job_survives_the_caller_and_wait_returns_its_status(fake: Fake) -> None:
    steps = [*pi.start(), {"sleep": 1.5}, pi.text_end("Background done."), *pi.end()]
    t0 = time.monotonic()
    p = cli(["run", "--bg", "--json", "x"], {**bin_env(fake), **fake.env(steps)})
    job_id = _job_id(p)
    assert time.monotonic() - t0 < 1.5 + 5  # returned without waiting for the job... (bounded)
    # The caller has exited; the job goes on.
    state = json.loads(invoke(["show", "--json", job_id[:12]]).stdout)
    assert state["jobId"] == job_id
    w = invoke(["wait", job_id, "--json"])
    assert w.returncode == 0, w.stderr
    result = json.loads(w.stdout)
    assert result["status"] == "completed" and result["finalText"] == "Background done."
    ps = invoke(["ps", "--json"])
    rows = [json.loads(x) for x in ps.stdout.splitlines()]
    assert any(r["jobId"] == job_id and r["status"] == "completed" for r in rows)
    logs = invoke(["logs", job_id])
    assert "Background done." in logs.stdout
    shown = invoke(["show", job_id])
    assert "completed" in shown.stdout and "Background done." in shown.stdout


def test_wait_exit_code_is_the_job_status(fake: Fake) -> None:
    job_id = _job_id(
        cli(["run", "--bg", "--json", "x"], {**bin_env(fake), **fake.env([{"exit": 5}])})
    )
    w = invoke(["wait", job_id])
    assert w.returncode == 1
    assert "exited with code 5" in w.stderr


def test_wait_timeout_leaves_the_job_running(fake: Fake) -> None:
    job_id = _job_id(
        cli(
            ["run", "--bg", "--json", "x"],
            {**bin_env(fake), **fake.env([*pi.start(), {"sleep": 30}])},
        )
    )
    w = invoke(["wait", job_id, "--timeout", "0.5"])
    assert w.returncode == 124
    assert "still running" in w.stderr
    s = invoke(["stop", job_id])
    assert s.returncode == 0 and "aborted" in s.stdout


def test_stop_leaves_no_process_of_the_job_alive(fake: Fake, tmp_path: Path) -> None:
    pidfiles = [tmp_path / f"child{i}.pid" for i in range(2)]
    scripts = []
    for pf in pidfiles:
        scripts.append(
            fake.env(
                [
                    {"pidfile": str(pf)},
                    {"grandchild": 60, "pidfile": str(pf) + ".gc"},
                    *pi.start(),
                    *pi.tool_use(),
                    {"sleep": 60},
                ]
            )[SCRIPT_ENV]
        )
    # Each parallel run plays its own script: the launcher picks one by task text.
    chooser = fake.dir / "choose-pi"
    chooser.write_text(
        f"#!{os.sys.executable}\nimport os, sys\n"
        f"scripts = {scripts!r}\n"
        "os.environ['SUBAGENTS_FAKE_SCRIPT'] = scripts[int(sys.argv[-1][-1])]\n"
        "from subagents.testing.fakeagent import main\nmain()\n"
    )
    chooser.chmod(0o755)
    job_id = _job_id(
        cli(["run", "--bg", "--json", "--parallel", "t0", "t1"], {"SUBAGENTS_PI_BIN": str(chooser)})
    )
    assert eventually(lambda: all(Path(str(pf) + ".gc").exists() for pf in pidfiles))
    pids = [int(pf.read_text()) for pf in pidfiles] + [
        int(Path(str(pf) + ".gc").read_text()) for pf in pidfiles
    ]
    state = json.loads(
        (Path(os.environ["SUBAGENTS_HOME"]) / "jobs" / job_id / "job.json").read_text()
    )
    driver = state["driver"]["pid"]
    s = invoke(["stop", job_id])
    assert s.returncode == 0, s.stderr
    assert f"{job_id}: aborted" in s.stdout
    assert eventually(lambda: not any(pid_alive(p) for p in [*pids, driver]), 10)
    result = json.loads(invoke(["show", "--json", job_id]).stdout)
    assert result["status"] == "aborted"
    assert [r["status"] for r in result["runs"]] == ["aborted", "aborted"]


def test_unknown_and_ambiguous_ids(fake: Fake) -> None:
    for cmd in (["show", "zzzz"], ["wait", "zzzz"], ["stop", "zzzz"], ["logs", "zzzz"]):
        p = invoke(cmd)
        assert p.returncode == 2 and "no job or run with id 'zzzz'" in p.stderr, (cmd, p.stderr)
    # Two jobs, run in the foreground: whether in the background is not what is looked at.
    a = _job_id(invoke(["run", "--json", "x"], {**bin_env(fake), **fake.env(pi.answer("a"))}))
    b = _job_id(invoke(["run", "--json", "x"], {**bin_env(fake), **fake.env(pi.answer("b"))}))
    common = next(a[:i] for i in range(len(a), 0, -1) if b.startswith(a[:i]))
    p = invoke(["show", common])
    assert p.returncode == 2 and "ambiguous job id" in p.stderr
    p = invoke(["show", "../etc"])
    assert p.returncode == 2 and "no job or run with id '../etc'" in p.stderr


def test_bad_plans_are_rejected_before_anything_starts(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    cases = {
        "unknown-agent.yaml": (
            "mode: parallel\ntasks:\n  - task: x\n    agent: nobody\n",
            "tasks.0.agent: unknown agent 'nobody'",
        ),
        "bad-mode.yaml": ("mode: sideways\ntasks:\n  - task: x\n", "mode: unknown mode 'sideways'"),
        "empty.yaml": ("mode: parallel\ntasks: []\n", "the job has no tasks"),
        "no-cwd.yaml": (
            f"mode: chain\nsteps:\n  - task: x\n    cwd: {tmp_path}/missing\n",
            "steps.0.cwd: directory does not exist",
        ),
        "broken.yaml": ("mode: parallel\ntasks: [\n", "invalid YAML at line"),
        "extra.yaml": (
            "mode: parallel\ntasks:\n  - task: x\n    colour: red\n",
            "tasks.0.colour: unknown field",
        ),
        "empty-task.yaml": (
            "mode: single\ntasks:\n  - task: '  '\n",
            "tasks.0.task: the task is empty",
        ),
    }
    for name, (text, needle) in cases.items():
        plan = tmp_path / name
        plan.write_text(text)
        p = invoke(["run", "-f", str(plan)], bin_env(fake))
        assert p.returncode == 2, (name, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (name, p.stderr)
    too_many = tmp_path / "many.json"
    too_many.write_text(
        json.dumps({"mode": "parallel", "tasks": [{"task": str(i)} for i in range(9)]})
    )
    p = invoke(["run", "-f", str(too_many)], bin_env(fake))
    assert p.returncode == 2 and "exceed the limit of 8" in p.stderr
    assert not (isolated_state / "jobs").exists() and not (isolated_state / "runs").exists()


def test_agents_list_show_and_run(fake: Fake, tmp_path: Path) -> None:
    p = invoke(["agents"])
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert {"general", "scout", "planner", "worker", "reviewer"} <= set(names)
    shown = invoke(["agents", "show", "scout"])
    assert (
        shown.returncode == 0
        and "name: scout" in shown.stdout
        and "source: builtin" in shown.stdout
    )
    assert invoke(["agents", "show", "nobody"]).returncode == 2
    # A run with an agent: its system prompt and tools reach pi's command line.
    r = invoke(
        ["run", "--json", "--agent", "scout", "look"],
        {**bin_env(fake), **fake.env(pi.answer("seen"))},
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["agent"] == "scout" and result["agentSource"] == "builtin"
    meta = json.loads((Path(result["paths"]["events"]).parent / "meta.json").read_text())
    argv = meta["argv"]
    assert "--append-system-prompt" in argv and "--tools" in argv
    prompt_file = Path(argv[argv.index("--append-system-prompt") + 1])
    assert "scout" in prompt_file.read_text().lower()


def test_project_agents_need_opt_in(fake: Fake, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / ".subagents" / "agents").mkdir(parents=True)
    (project / ".subagents" / "agents" / "local.md").write_text(
        "---\nname: local\ndescription: from the repo\n---\nBe local.\n"
    )
    env = {**bin_env(fake), **fake.env(pi.answer("ok"))}
    refused = invoke(["run", "--agent", "local", "--cwd", str(project), "x"], env, cwd=project)
    assert refused.returncode == 2 and "--agent-scope both" in refused.stderr
    allowed = invoke(
        ["run", "--json", "--agent-scope", "both", "--agent", "local", "x"], env, cwd=project
    )
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["agentSource"].startswith("project:")


def test_config_default_agent_and_env_override(fake: Fake, tmp_path: Path) -> None:
    config_dir = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text('default_agent = "reviewer"\nconcurrency = 3\n')
    r = invoke(["run", "--json", "x"], {**bin_env(fake), **fake.env(pi.answer("ok"))})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["agent"] == "reviewer"
    (config_dir / "config.toml").write_text("concurrency = 'many'\n")
    bad = invoke(["run", "x"], bin_env(fake))
    assert bad.returncode == 2 and "concurrency" in bad.stderr and "config.toml" in bad.stderr


def test_stop_after_the_driver_died_still_stops_the_runs(fake: Fake, tmp_path: Path) -> None:
    import signal as sig

    pidfile = tmp_path / "child.pid"
    job_id = _job_id(
        cli(
            ["run", "--bg", "--json", "x"],
            {**bin_env(fake), **fake.env([{"pidfile": str(pidfile)}, *pi.start(), {"sleep": 60}])},
        )
    )
    job_file = Path(os.environ["SUBAGENTS_HOME"]) / "jobs" / job_id / "job.json"
    assert eventually(pidfile.exists)
    driver = json.loads(job_file.read_text())["driver"]["pid"]
    os.kill(driver, sig.SIGKILL)  # the driver is gone; its run goes on
    # Someone looking meanwhile does not declare the job over while its run lives.
    time.sleep(0.5)
    assert json.loads(invoke(["show", "--json", job_id]).stdout)["status"] == "running"
    s = invoke(["stop", job_id])
    assert s.returncode == 0 and f"{job_id}: aborted" in s.stdout, s.stdout + s.stderr
    child = int(pidfile.read_text())
    assert eventually(lambda: not pid_alive(child), 10)
    state = json.loads(job_file.read_text())
    assert state["status"] == "aborted" and state["runs"][0]["status"] == "aborted"


def test_stop_a_foreground_job_from_another_terminal(fake: Fake, tmp_path: Path) -> None:
    """The CLI driving a job is not killed by `stop`: its runs are, and it reports the job aborted."""
    pidfile = tmp_path / "c.pid"
    env = {
        **os.environ,
        **bin_env(fake),
        **fake.env([{"pidfile": str(pidfile)}, *pi.start(), {"sleep": 60}]),
    }
    fg = subprocess.Popen(
        [*CLI_ARGS, "run", "--json", "--parallel", "-j", "1", "a", "b"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert eventually(pidfile.exists)
    jobs = Path(os.environ["SUBAGENTS_HOME"]) / "jobs"
    (job_id,) = [p.name for p in jobs.iterdir()]
    s = invoke(["stop", job_id])
    assert s.returncode == 0 and f"{job_id}: aborted" in s.stdout, s.stdout + s.stderr
    out, err = fg.communicate(timeout=30)
    assert fg.returncode == 130, err
    job = json.loads(out)
    assert job["status"] == "aborted"
    # The second task never started: the stop reached the driver before it could.
    assert job["runs"][1]["runId"] is None and job["runs"][1]["status"] == "aborted"
    assert not pid_alive(int(pidfile.read_text()))


def test_ps_index_is_rebuilt_from_the_files(fake: Fake, isolated_state: Path) -> None:
    ids = [  # in the foreground: the index is what is looked at, not the background
        _job_id(invoke(["run", "--json", "x"], {**bin_env(fake), **fake.env(pi.answer(str(i)))}))
        for i in range(3)
    ]

    def listed() -> dict[str, str]:
        return {
            r["jobId"]: r["status"]
            for r in map(json.loads, invoke(["ps", "--json"]).stdout.splitlines())
        }

    assert listed() == dict.fromkeys(ids, "completed")
    (isolated_state / "index.sqlite").unlink()  # missing: rebuilt
    assert listed() == dict.fromkeys(ids, "completed")
    import shutil
    import sqlite3

    shutil.rmtree(isolated_state / "jobs" / ids[0])  # a job gone from disk leaves the index too
    db = sqlite3.connect(isolated_state / "index.sqlite")
    db.execute("update jobs set status = 'running' where job_id = ?", (ids[1],))  # stale: re-read
    db.commit()
    db.close()
    assert listed() == dict.fromkeys(ids[1:], "completed")


def test_ps_shows_current_activity_and_logs_follows_live(fake: Fake, tmp_path: Path) -> None:
    gate = tmp_path / "tool-done"  # the tool runs until the test has seen it in ps
    steps = [
        *pi.start(),
        *pi.tool_use(command="make test"),
        {"wait_for": str(gate)},
        *pi.tool_end(),
        pi.text_end("Followed."),
        *pi.end(),
    ]
    job_id = _job_id(cli(["run", "--bg", "--json", "x"], {**bin_env(fake), **fake.env(steps)}))
    follower = subprocess.Popen(
        [*CLI_ARGS, "logs", "-f", job_id],
        stdout=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    try:

        def activity() -> str | None:
            rows = map(json.loads, invoke(["ps", "--json"]).stdout.splitlines())
            return next(r.get("activity") for r in rows if r["jobId"] == job_id)

        assert eventually(lambda: "make test" in (activity() or ""), 20)
        assert activity() == "$ make test"
        table = invoke(["ps"]).stdout
        assert job_id in table and "running" in table
    finally:
        gate.touch()  # let the tool end, whatever happened above
    out, _ = follower.communicate(timeout=30)  # ends by itself when the job does
    assert follower.returncode == 0
    assert out.index("$ make test") < out.index("Followed.")


def test_a_run_id_finds_its_job(fake: Fake) -> None:
    r = invoke(["run", "--json", "x"], {**bin_env(fake), **fake.env(pi.answer("by run id"))})
    result = json.loads(r.stdout)
    shown = invoke(["show", "--json", result["runId"]])
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["jobId"] == result["jobId"]


def test_ps_and_history_stay_readable_at_80_columns(fake: Fake) -> None:
    env = {**bin_env(fake), **fake.env(pi.answer("Narrow enough."))}
    p = invoke(["run", "--json", "--session", "narrow", "x"], env)
    assert p.returncode == 0, p.stderr
    job_id = json.loads(p.stdout)["jobId"]
    for args in (["ps"], ["history", "--session", "narrow"]):
        out = invoke(args, {"COLUMNS": "80"})
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines and all(len(line) <= 80 for line in lines), out.stdout
        row = next(line for line in lines if job_id in line)  # the id is whole, not cut
        assert "complete" in row, row  # so is the status
