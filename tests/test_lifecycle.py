"""Lifecycle records and hooks through real jobs: the session log and its readers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually
from support.cli import CLI, cli, invoke
from support.fake import Fake, bin_env

from subagents.lifecycle import sessionlog

pytestmark = pytest.mark.process


def _config(text: str) -> None:
    d = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.toml").write_text(text)


def test_background_job_records_its_end_and_runs_its_hook(
    fake: Fake, tmp_path: Path, isolated_state: Path
) -> None:
    hook_out = tmp_path / "hook.json"
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys\nopen({str(hook_out)!r}, 'w').write(sys.stdin.read())\n")
    _config(
        f'[[hooks]]\non = ["subagent:complete", "error"]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(hook))}]\n'
    )
    steps = [*pi.start(), {"sleep": 1.0}, pi.text_end("Recorded."), *pi.end()]
    p = cli(["run", "--bg", "--json", "--session", "s1", "x"], {**bin_env(fake), **fake.env(steps)})
    assert p.returncode == 0, p.stderr
    job_id = json.loads(p.stdout)["jobId"]  # the caller has exited by now
    log = isolated_state / "sessions" / "s1.jsonl"
    assert eventually(lambda: hook_out.exists() and hook_out.read_text().strip() != "")
    entries = sessionlog.read(log)
    assert [e["eventType"] for e in entries] == ["subagent:start", "subagent:complete"]
    start, end = entries
    assert start["jobId"] == end["jobId"] == job_id
    assert set(end) == {
        "type",
        "timestamp",
        "eventType",
        "jobId",
        "requestedBy",
        "startedAt",
        "completedAt",
        "durationMs",
        "model",
        "usage",
        "agentName",
        "pid",
        "mode",
        "status",
        "summary",
    }
    assert end["status"] == "completed" and end["mode"] == "single" and len(end["summary"]) <= 200
    assert "Recorded." in end["summary"]
    assert end["usage"]["totalTokens"] == 15
    assert json.loads(hook_out.read_text()) == end


def test_a_hanging_hook_never_changes_or_delays_the_result(
    fake: Fake, isolated_state: Path
) -> None:
    _config('[[hooks]]\non = ["complete"]\ncommand = ["sleep", "60"]\ntimeout = 1\n')
    t0 = time.monotonic()
    # A process: a hook holding the command's pipes would hold up whoever reads them.
    p = cli(["run", "--json", "x"], {**bin_env(fake), **fake.env(pi.answer("Unaffected."))})
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["finalText"] == "Unaffected."
    assert elapsed < 30  # not held up by the hook's 60 s
    hooks_log = isolated_state / "hooks.log.jsonl"
    assert eventually(lambda: hooks_log.exists() and "timeout" in hooks_log.read_text())
    outcome = json.loads(hooks_log.read_text().splitlines()[-1])
    assert outcome["outcome"] == "timeout"


def test_failed_and_aborted_jobs_are_recorded(fake: Fake, isolated_state: Path) -> None:
    invoke(["run", "x"], {**bin_env(fake), **fake.env([{"exit": 7}])})
    job_id = json.loads(
        cli(
            ["run", "--bg", "--json", "x"],
            {**bin_env(fake), **fake.env([*pi.start(), {"sleep": 60}])},
        ).stdout
    )["jobId"]
    assert invoke(["stop", job_id]).returncode == 0
    entries = sessionlog.read(isolated_state / "sessions" / "default.jsonl")
    ends = [e for e in entries if e["eventType"] != "subagent:start"]
    assert [e["eventType"] for e in ends] == ["subagent:error", "subagent:aborted"]
    assert "exited with code 7" in ends[0]["summary"]
    h = invoke(["history", "--json", "--status", "aborted"])
    rows = [json.loads(x) for x in h.stdout.splitlines()]
    assert [r["jobId"] for r in rows] == [job_id]
    assert invoke(["history", "--since", "1h"]).returncode == 0
    bad = invoke(["history", "--since", "yesterday-ish"])
    assert bad.returncode == 2 and "yesterday-ish" in bad.stderr


def test_watch_shows_an_entry_within_a_second(fake: Fake, isolated_state: Path) -> None:
    import queue
    import threading

    log = isolated_state / "sessions" / "w.jsonl"
    watcher = subprocess.Popen(
        [*CLI, "watch", "--session", "w"],
        stdout=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    lines: queue.Queue[tuple[float, str]] = queue.Queue()

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            lines.put((time.monotonic(), line))

    threading.Thread(target=read, daemon=True).start()
    appended: dict[str, float] = {}
    try:
        # However long the watcher takes to start, some entry lands after it watches:
        # the first one it shows must show within a second of its append.
        for i in range(60):
            job_id = f"j{i}"
            appended[job_id] = time.monotonic()
            sessionlog.append(
                log,
                sessionlog.entry(
                    "subagent:start",
                    job_id=job_id,
                    mode="single",
                    agent_name="scout",
                    model=None,
                    pid=1,
                ),
            )
            try:
                seen, line = lines.get(timeout=1.5)
            except queue.Empty:
                continue
            shown = json.loads(line)["jobId"]
            assert seen - appended[shown] < 1.0
            break
        else:
            raise AssertionError("watch never showed an entry")
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)


def test_bad_session_name_is_rejected(fake: Fake) -> None:
    p = invoke(["run", "--session", "../escape", "x"], bin_env(fake))
    assert p.returncode == 2 and "session" in p.stderr


def test_a_job_stopped_at_any_moment_still_records_its_end(
    fake: Fake, isolated_state: Path
) -> None:
    # `stop` right after `--bg` lands anywhere in the driver's start: while it imports,
    # records its start, or starts its run. The end is recorded every time.
    env = {**bin_env(fake), **fake.env([*pi.start(), {"sleep": 60}])}
    job_ids = []
    for delay in (0.0, 0.1, 0.3, 0.6):
        job_id = json.loads(cli(["run", "--bg", "--json", "x"], env).stdout)["jobId"]
        time.sleep(delay)
        assert invoke(["stop", job_id]).returncode == 0
        job_ids.append(job_id)
    entries = sessionlog.read(isolated_state / "sessions" / "default.jsonl")
    aborted = [e["jobId"] for e in entries if e["eventType"] == "subagent:aborted"]
    assert aborted == job_ids


def test_a_job_s_start_entry_is_in_its_log_before_its_child_starts(
    tmp_path: Path, isolated_state: Path
) -> None:
    # The start entry is written while the first run is prepared, but its child waits for it.
    seen = tmp_path / "log-at-child-start"
    log = isolated_state / "sessions" / "s3.jsonl"
    answer = json.dumps(pi.text_end("ok")["emit"])
    child = tmp_path / "child"
    child.write_text(f"#!/bin/sh\ncat '{log}' > '{seen}'\necho '{answer}'\n")
    child.chmod(0o755)
    p = invoke(["run", "-q", "--session", "s3", "x"], {"SUBAGENTS_PI_BIN": str(child)})
    assert p.returncode == 0, p.stderr
    at_start = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [e["eventType"] for e in at_start] == ["subagent:start"]
    assert [e["eventType"] for e in sessionlog.read(log)] == [
        "subagent:start",
        "subagent:complete",
    ]
