"""`subagents run --progress jsonl` (the machine-readable feed the pi package relays) and
`--parent-pid` (the foreground job stops when the program that started it dies)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pistream as pi
from conftest import Fake, eventually, pid_alive
from test_cli_run import CLI, cli, fake_env


def records(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in stderr.splitlines()]


def test_jsonl_progress_is_records_in_the_transcripts_words(fake: Fake) -> None:
    steps = pi.answer("Done.")  # one `ls`, then the answer
    p = cli(["run", "--json", "--progress", "jsonl", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    recs = records(p.stderr)  # every stderr line is a JSON record
    assert recs[0] == {"type": "job", "jobId": result["jobId"], "mode": "single", "runs": 1}
    progress = recs[1:]
    assert {r["type"] for r in progress} == {"progress"}
    assert {r["runId"] for r in progress} == {result["runId"]}
    assert {r["jobId"] for r in progress} == {result["jobId"]}
    texts = [r["text"] for r in progress]
    transcript = Path(result["paths"]["transcript"]).read_text()
    assert all(t in transcript for t in texts)
    assert texts[0].startswith("Started pi") and texts[-1].startswith("Finished: completed")
    assert "$ ls" in texts
    assert progress[0]["toolCount"] == 0 and progress[-1]["toolCount"] == 1
    assert progress[-1]["status"] == "completed" and progress[0]["status"] == "running"
    assert progress[-1]["usage"]["totalTokens"] == result["usage"]["totalTokens"]


def test_jsonl_progress_names_each_run_of_a_parallel_job(fake: Fake) -> None:
    p = cli(
        ["run", "--json", "--progress", "jsonl", "--parallel", "a", "b"],
        fake_env(fake, pi.answer("ok")),
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    progress = [r for r in records(p.stderr) if r["type"] == "progress"]
    by_index = {r["index"]: r["runId"] for r in progress}
    assert by_index == {i: run["runId"] for i, run in enumerate(result["runs"])}


def test_job_stops_when_its_parent_process_dies(fake: Fake, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    env = {**os.environ, **fake_env(fake, [{"pidfile": str(pidfile)}, *pi.start(), {"sleep": 60}])}
    parent = subprocess.Popen(["sleep", "60"])
    proc = subprocess.Popen(
        [*CLI, "run", "--json", "--progress", "jsonl", "--parent-pid", str(parent.pid), "x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert eventually(pidfile.exists)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert json.loads(out)["status"] == "aborted"
    assert eventually(lambda: not pid_alive(int(pidfile.read_text())), 10)


def test_parent_pid_that_does_not_exist_is_bad_input(fake: Fake) -> None:
    p = cli(["run", "--parent-pid", "999999999", "x"], fake_env(fake, pi.answer("ok")))
    assert p.returncode == 2 and "--parent-pid 999999999: no such process" in p.stderr


def test_bg_json_names_the_job_and_its_driver(fake: Fake) -> None:
    p = cli(["run", "--bg", "--json", "x"], fake_env(fake, pi.answer("ok")))
    assert p.returncode == 0, p.stderr
    started = json.loads(p.stdout)
    assert isinstance(started["pid"], int)
    waited = cli(["wait", started["jobId"], "--json"], timeout=60)
    assert json.loads(waited.stdout)["status"] == "completed"
    shown = cli(["show", started["jobId"], "--json"])
    assert json.loads(shown.stdout)["driver"]["pid"] == started["pid"]
