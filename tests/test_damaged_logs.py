"""Issue 27, logs: `history` reads any session log — damaged entries, a long log, one huge
line — in bounded time and memory, and the hook's notice state survives being damaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.sessionlog import CLAUDE_ID, end_entry, hook

from subagents.lifecycle import notices, sessionlog

CLI = [sys.executable, "-m", "subagents.cli"]
WIDE = {"COLUMNS": "120"}


def entry(**changes: Any) -> dict[str, Any]:
    e = end_entry("01m84t0m9p-8m6spb63", "the answer")
    e.update(changes)
    return e


def write_log(home: Path, entries: list[dict[str, Any]]) -> Path:
    log = sessionlog.session_path(home, "default")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return log


def test_history_shows_damaged_entries_without_a_traceback(isolated_state: Path) -> None:
    write_log(
        isolated_state,
        [
            entry(usage={"cost": "abc", "totalTokens": "many"}),
            entry(usage="not usage"),
            entry(durationMs="long"),
            entry(timestamp=5),
            entry(agentName={"a": 1}),
            entry(summary=["x"]),
            entry(status={"not": "a status"}),
            entry(summary="the last one"),
        ],
    )
    for args in (["history"], ["history", "--json"], ["history", "--status", "completed"]):
        p = invoke(args, WIDE)
        assert p.returncode == 0, (args, p.stderr)
        assert "Traceback" not in p.stderr
    shown = invoke(["history"], WIDE).stdout
    assert "the last one" in shown and shown.count("01m84t0m9p-8m6spb63") == 8


def test_history_lists_the_newest_first_up_to_its_limit(isolated_state: Path) -> None:
    write_log(isolated_state, [entry(summary=f"job {i}") for i in range(60)])

    def summaries(*args: str) -> list[str]:
        p = invoke(["history", "--json", *args])
        assert p.returncode == 0, p.stderr
        return [json.loads(line)["summary"] for line in p.stdout.splitlines()]

    assert summaries() == [f"job {i}" for i in range(59, 9, -1)]  # 50 by default
    assert summaries("-n", "2") == ["job 59", "job 58"]
    assert len(summaries("--limit", "0")) == 60
    bad = invoke(["history", "-n", "-1"])
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_a_log_holding_nan_or_infinity_reads_as_null_and_every_output_stays_json(
    isolated_state: Path,
) -> None:
    log = write_log(isolated_state, [entry(summary="whole")])
    usage = {"input": 1, "output": 1, "totalTokens": 2, "cost": 0.4242}
    damaged = json.dumps(entry(summary="damaged", durationMs=777, usage=usage))
    with log.open("a") as f:
        f.write(damaged.replace("0.4242", "Infinity").replace("777", "NaN") + "\n")
    assert "NaN" in log.read_text() and "Infinity" in log.read_text()
    for args in (["history", "--json"], ["cost", "--json"], ["history"], ["cost"]):
        p = invoke(args, WIDE)
        assert p.returncode == 0, (args, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr
        if "--json" in args:
            for line in p.stdout.splitlines():
                json.loads(line, parse_constant=_refuse)
    shown = [json.loads(line) for line in invoke(["history", "--json"]).stdout.splitlines()]
    assert [e["summary"] for e in shown] == ["damaged", "whole"]  # newest first
    assert shown[0]["durationMs"] is None and shown[0]["usage"]["cost"] is None


def _refuse(constant: str) -> Any:
    raise AssertionError(f"{constant} is not JSON")


def measured(args: list[str]) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """The command's outcome, seconds and peak memory (KiB), measured in a process of its
    own (whose only child it is)."""
    probe = (
        "import json, resource, subprocess, sys, time\n"
        "t0 = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, stdin=subprocess.DEVNULL)\n"
        "took = time.monotonic() - t0\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(json.dumps([p.returncode, p.stdout, p.stderr, took, peak]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *CLI, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )
    rc, out, err, took, peak = json.loads(done.stdout)
    return subprocess.CompletedProcess(args, rc, out, err), took, peak


@pytest.mark.process
@pytest.mark.parametrize("shape", ["many entries", "one huge line"])
def test_history_of_a_20_mib_log_takes_seconds_not_minutes(
    isolated_state: Path, shape: str
) -> None:
    if shape == "many entries":
        one = json.dumps(entry()) + "\n"
        log = sessionlog.session_path(isolated_state, "default")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(one * (20 * 1024 * 1024 // len(one)))
    else:
        write_log(isolated_state, [entry(summary="x" * (20 * 1024 * 1024))])
    p, took, peak = measured(["history"])
    assert p.returncode == 0, p.stderr
    # Generous bounds (a shared machine), far from the minutes and the 400 MB it took.
    assert took < 60, took
    assert peak < 300 * 1024, peak
    assert max(len(line) for line in p.stdout.splitlines()) <= 200


def test_a_damaged_notice_state_neither_floods_nor_blocks_the_prompt(
    isolated_state: Path,
) -> None:
    session = f"claude-{CLAUDE_ID}"
    log = sessionlog.session_path(isolated_state, session)
    for i in range(30):
        sessionlog.append(log, end_entry(f"01m84t0m9p-{i:08d}", f"answer {i}"))
    first = hook(isolated_state, here=True)
    assert first.returncode == 0 and first.stdout, first.stderr
    state = isolated_state / "notices" / notices.CLAUDE_READER / f"{session}.json"
    # Even 30 news at once make a short notice: the newest, and a count of the rest.
    context = json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.count("✓ job") == 10 and "and 20 earlier" in context
    for damage in ('{"offset": 12', '{"offset": -40, "announced": []}', "[]"):
        state.write_text(damage)
        p = hook(isolated_state, here=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout == "", p.stdout  # nothing told twice
    sessionlog.append(log, end_entry("01m84t0m9p-zzzzzzzz", "news"))
    p = hook(isolated_state, here=True)
    told = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "01m84t0m9p-zzzzzzzz" in told and told.count("✓ job") == 1
