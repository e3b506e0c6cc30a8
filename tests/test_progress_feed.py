"""`subagents run --progress jsonl` (the machine-readable feed the pi package relays) and
`--parent-pid` (the foreground job stops when the program that started it dies)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.cli import CLI, cli, invoke
from support.fake import Fake, fake_env

pytestmark = pytest.mark.process


def records(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in stderr.splitlines()]


def test_jsonl_progress_is_records_in_the_transcripts_words(fake: Fake) -> None:
    steps = pi.answer("Done.")  # one `ls`, then the answer
    p = cli(["run", "--json", "--progress", "jsonl", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    recs = records(p.stderr)  # every stderr line is a JSON record
    job = json.loads(invoke(["show", result["jobId"], "--json"]).stdout)
    assert recs[0] == {
        "type": "job",
        "jobId": result["jobId"],
        "mode": "single",
        "runs": 1,
        "startedAt": job["startedAt"],  # the job's own start, said before it runs
        "steps": [{"task": "x", "agent": None, "backend": "pi", "model": None, "role": None}],
    }
    progress, end = recs[1:-1], recs[-1]
    # The last record is the parent's answer, as the pi package shows it (present/answer.py).
    assert end == {
        "type": "answer",
        "jobId": result["jobId"],
        "status": "completed",
        "text": "Done.",
        "isError": False,
        # The job's duration, the one every face shows; how each run ended, in words.
        "durationMs": job["durationMs"],
        "runs": [{"mark": None, "used": None, "why": None}],
    }
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
    # What a row needs besides the words: where it runs, since when, where its transcript is,
    # said once (in the first record) and not again, so records stay small.
    first = progress[0]
    assert first["backend"] == "pi" and "model" not in first  # none was given
    started = json.loads(Path(result["paths"]["events"]).read_text().splitlines()[0])["ts"]
    assert first["startedAt"] == started and first["transcript"] == result["paths"]["transcript"]
    assert not any("backend" in r or "transcript" in r for r in progress[1:])
    assert progress[-1]["durationMs"] == result["durationMs"]
    assert not any(r.get("stalled") or "warning" in r for r in progress)


def test_a_childs_warnings_on_stderr_reach_its_progress_records(fake: Fake) -> None:
    # pi says an unknown model only on stderr, and goes on: the run "works".
    warning = '\x1b[33mWarning:\x1b[0m Model "nope" not found for provider "mock".\x07\n'
    steps = [{"stderr": "some noise\n"}, {"stderr": warning}, *pi.answer("Done.")]
    p = invoke(["run", "--json", "--progress", "jsonl", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    progress = [r for r in records(p.stderr) if r["type"] == "progress"]
    said = [r["warning"] for r in progress if "warning" in r]  # said once, when it came
    assert said == ['Model "nope" not found for provider "mock".']


def test_wait_follows_a_background_job_with_the_same_records(fake: Fake, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    steps = [*pi.start(), {"wait_for": str(gate)}, *pi.tool_use(), *pi.tool_end()]
    steps += [pi.text_end("Done."), *pi.end()]
    p = cli(["run", "--bg", "--json", "x"], fake_env(fake, steps))
    assert p.returncode == 0, p.stderr
    started = json.loads(p.stdout)
    waiting = subprocess.Popen(
        [*CLI, "wait", started["jobId"], "--json", "--progress", "jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    gate.touch()
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    result = json.loads(out)
    recs = records(err)
    # One clock: the start `--bg` announced is the job's, in the feed and in its result.
    assert recs[0]["type"] == "job" and recs[0]["jobId"] == started["jobId"]
    assert recs[0]["startedAt"] == started["startedAt"] == result["startedAt"]
    progress, end = recs[1:-1], recs[-1]
    assert end["type"] == "answer" and (end["text"], end["isError"]) == ("Done.", False)
    texts = [r["text"] for r in progress]
    assert texts[0].startswith("Started pi") and texts[-1].startswith("Finished: completed")
    assert "$ ls" in texts and "Done." in texts
    assert progress[-1]["runId"] == result["runs"][0]["runId"]
    assert progress[-1]["usage"]["totalTokens"] == result["usage"]["totalTokens"]


def test_jsonl_progress_names_each_run_of_a_parallel_job(fake: Fake) -> None:
    p = invoke(
        ["run", "--json", "--progress", "jsonl", "--parallel", "a", "b"],
        fake_env(fake, pi.answer("ok")),
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    progress = [r for r in records(p.stderr) if r["type"] == "progress"]
    by_index = {r["index"]: r["runId"] for r in progress}
    assert by_index == {i: run["runId"] for i, run in enumerate(result["runs"])}


def test_a_chain_steps_task_is_its_template_until_it_starts_then_filled(fake: Fake) -> None:
    tasks = ["find the TODOs", "pick the most important:\n{previous}", "fix: {previous}"]
    p = invoke(
        ["run", "--json", "--progress", "jsonl", "--chain", *tasks],
        fake_env(fake, pi.answer("TODO in main.py")),
    )
    assert p.returncode == 0, p.stderr
    recs = records(p.stderr)
    steps = recs[0]["steps"]
    # Before a step starts: its place, and its template said as one (never a raw {previous}).
    assert [(s["role"], s["task"]) for s in steps] == [
        ("step 1/3", "find the TODOs"),
        ("step 2/3", "pick the most important:"),
        ("step 3/3", "fix: ⟨step 2's answer⟩"),
    ]
    # Once it starts: its task as it was given, the answer before it filled in (once).
    filled = {r["index"]: r["task"] for r in recs if r["type"] == "progress" and "task" in r}
    assert filled == {1: "pick the most important:", 2: "fix: TODO in main.py"}
    assert all("{previous}" not in json.dumps(r) for r in recs)


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
    p = invoke(["run", "--parent-pid", "999999999", "x"], fake_env(fake, pi.answer("ok")))
    assert p.returncode == 2 and "--parent-pid 999999999: no such process" in p.stderr


def test_bg_json_names_the_job_and_its_driver(fake: Fake) -> None:
    p = cli(["run", "--bg", "--json", "x"], fake_env(fake, pi.answer("ok")))
    assert p.returncode == 0, p.stderr
    started = json.loads(p.stdout)
    assert isinstance(started["pid"], int)
    waited = invoke(["wait", "--timeout", "60", started["jobId"], "--json"])
    assert json.loads(waited.stdout)["status"] == "completed"
    shown = invoke(["show", started["jobId"], "--json"])
    assert json.loads(shown.stdout)["driver"]["pid"] == started["pid"]
