"""`subagents map` end to end through the real CLI, with a fake pi (tests/mapchild.py):
results files, slices, retries, budgets, bad input, background, stop and resume."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.cli import cli, invoke
from support.maps import jsonl

pytestmark = pytest.mark.process


def csv_input(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


WORDS = [{"name": n, "team": t} for n, t in [("alpha", "a"), ("beta", "b"), ("gamma", "a")]]


def job_ids(home: Path) -> list[str]:
    jobs = home / "jobs"
    return sorted(p.name for p in jobs.iterdir() if p.is_dir()) if jobs.is_dir() else []


def test_csv_map_with_a_schema_writes_every_row_to_the_results_file(
    tmp_path: Path, child: dict[str, str]
) -> None:
    data = csv_input(tmp_path / "words.csv", WORDS)
    schema = {
        "type": "object",
        "properties": {"word": {"type": "string"}, "length": {"type": "integer"}},
        "required": ["word", "length"],
    }
    out = tmp_path / "results.csv"
    p = invoke(
        [
            "map",
            str(data),
            "--task",
            "Measure the word {name}",
            "--key",
            "name",
            "-j",
            "2",
            "--output-schema",
            json.dumps(schema),
            "--out",
            str(out),
            "--json",
        ],
        {**child, "MAP_JSON": "1"},
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["mode"] == "map" and result["status"] == "completed"
    assert result["map"]["completed"] == 3 and result["map"]["out"] == str(out)
    assert result["usage"]["cost"] == pytest.approx(0.03)
    with out.open() as f:
        rows = list(csv.DictReader(f))
    # The structured answer's fields are columns; every input row once, by key.
    assert sorted((r["key"], r["status"], r["word"], r["length"]) for r in rows) == [
        ("alpha", "completed", "alpha", "5"),
        ("beta", "completed", "beta", "4"),
        ("gamma", "completed", "gamma", "5"),
    ]
    assert all(r["team"] and r["runId"] and r["cost"] == "0.01" for r in rows)
    # show --rows says the same, in input order.
    shown = invoke(["show", "--rows", result["jobId"]], child)
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [r["key"] for r in lines] == ["alpha", "beta", "gamma"]
    assert lines[1]["word"] == "beta" and lines[1]["length"] == 4


def test_where_limit_and_dry_run(tmp_path: Path, child: dict[str, str]) -> None:
    data = csv_input(tmp_path / "words.csv", WORDS)
    dry = invoke(["map", str(data), "--task", "say {name}", "--dry-run"], child)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "row 1 (key 1): say alpha",
        "row 2 (key 2): say beta",
        "row 3 (key 3): say gamma",
        "3 rows; nothing run (--dry-run)",
    ]
    home = Path(os.environ["SUBAGENTS_HOME"])
    assert job_ids(home) == [] and not Path(child["MAP_LOG"]).exists()
    out = tmp_path / "a.jsonl"
    p = invoke(
        [
            "map",
            str(data),
            "--task",
            "say {name}",
            "--where",
            "team=a",
            "--limit",
            "1",
            "--out",
            str(out),
        ],
        child,
    )
    assert p.returncode == 0, p.stderr
    assert [(r["name"], r["answer"]) for r in jsonl(out)] == [("alpha", "done: say alpha")]
    assert "1/1 rows completed" in p.stdout


def test_a_failed_row_is_retried_with_its_reason_and_failures_are_grouped(
    tmp_path: Path, child: dict[str, str]
) -> None:
    data = tmp_path / "items.txt"
    data.write_text("one\nFAIL two\nthree\n")
    out = tmp_path / "r.jsonl"
    p = invoke(
        ["map", str(data), "--task", "do {line}", "--retries", "1", "--out", str(out)], child
    )
    assert p.returncode == 0, p.stderr
    rows = {r["line"]: r for r in jsonl(out)}
    assert rows["FAIL two"]["status"] == "completed"
    assert "previous attempt at this task failed" in rows["FAIL two"]["answer"]
    assert "exit" in rows["FAIL two"]["answer"] or "3" in rows["FAIL two"]["answer"]
    # Without retries the row fails, and the failure is grouped by its reason.
    p = invoke(["map", str(data), "--task", "do {line}", "--json", "--progress", "jsonl"], child)
    assert p.returncode == 1
    result = json.loads(p.stdout)
    record = result["map"]
    assert (record["completed"], record["failed"]) == (2, 1)
    assert record["failures"][0]["rows"] == 1
    assert record["summary"].startswith("1 row: ")
    # The feed: the map counted before any row ends, its failures grouped as they come, and
    # last the answer a parent reads (an error only when no row completed).
    records = [json.loads(line) for line in p.stderr.splitlines()]
    first, last = records[0], records[-1]
    assert (first["type"], first["done"], first["total"], first["failures"]) == ("map", 0, 3, [])
    counted = [r for r in records if r["type"] == "map"][-1]
    assert counted["done"] == 3 and counted["failures"] == record["failures"]
    assert last["type"] == "answer" and last["isError"] is False and last["map"] == record
    assert last["text"].startswith(f"map {result['jobId']}: 2/3 rows completed (1 row: ")
    assert last["text"].endswith(f"each row's answer: `subagents show --rows {result['jobId']}`")


def test_the_maps_budget_stops_new_rows(tmp_path: Path, child: dict[str, str]) -> None:
    data = tmp_path / "items.txt"
    data.write_text("".join(f"w{i}\n" for i in range(6)))
    out = tmp_path / "r.jsonl"
    p = invoke(
        [
            "map",
            str(data),
            "--task",
            "do {line}",
            "-j",
            "1",
            "--max-cost",
            "0.02",
            "--out",
            str(out),
            "--json",
        ],
        child,
    )
    assert p.returncode == 1, p.stderr
    record = json.loads(p.stdout)["map"]
    assert record["completed"] == 2 and record["skipped"] == 4
    assert "limit of $0.02 is spent" in record["summary"]
    statuses = Counter(r["status"] for r in jsonl(out))
    assert statuses == {"completed": 2, "skipped": 4}
    assert len(Path(child["MAP_LOG"]).read_text().split()) == 2  # no third row started


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["empty.txt", "--task", "x {line}"], None, "empty.txt: the input has no rows"),
        (["missing.csv", "--task", "x"], None, "missing.csv: cannot read the input"),
        (["ragged.csv", "--task", "x {a}"], None, "ragged.csv: line 3: 3 fields, the header has 2"),
        (
            ["ok.csv", "--task", "x {c}"],
            None,
            "task: {c}: the input has no field 'c' (row 1 has: a, b)",
        ),
        (["dup.csv", "--task", "x {a}", "--key", "a"], None, "rows 1 and 2 have the same key '1'"),
        (["ok.csv", "--task", "x", "--where", "a"], None, "--where: 'a' is not FIELD=VALUE"),
        (["ok.csv", "--task", "x", "--where", "z=1"], None, "row 1 has no field 'z'"),
        (["-", "--task", "x {line}"], "[1, 2]\n", None),
        (["bad.jsonl", "--task", "x"], None, "bad.jsonl: line 2: a row is a JSON object, not list"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_started(
    tmp_path: Path, child: dict[str, str], args: list[str], stdin: str | None, message: str | None
) -> None:
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3,4,5\n")
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n")
    (tmp_path / "dup.csv").write_text("a,b\n1,2\n1,3\n")
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n[1]\n')
    p = invoke(["map", *args], child, cwd=tmp_path, input=stdin)
    if message is None:  # stdin of lines: "[1, 2]" is a line, and runs
        assert p.returncode == 0, p.stderr
        return
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    assert job_ids(Path(os.environ["SUBAGENTS_HOME"])) == []
    assert not Path(child["MAP_LOG"]).exists()


def test_resume_refuses_a_job_that_is_not_a_map(child: dict[str, str]) -> None:
    p = invoke(["run", "--json", "hello there"], child)
    assert p.returncode == 0, p.stderr
    job_id = json.loads(p.stdout)["jobId"]
    p = invoke(["map", "--resume", job_id], child)
    assert p.returncode == 2
    assert p.stderr.strip() == f"subagents: job {job_id} is not a map (it is a single job)"
    shown = invoke(["show", "--rows", job_id], child)
    assert shown.returncode == 2 and "is not a map" in shown.stderr


def test_background_map_stop_then_resume_finishes_the_rest(
    tmp_path: Path, child: dict[str, str]
) -> None:
    data = tmp_path / "items.txt"
    data.write_text("".join(f"w{i}\n" for i in range(6)))
    out = tmp_path / "r.jsonl"
    go = tmp_path / "go"
    env = {**child, "MAP_HOLD": str(go), "MAP_FREE": "w0,w1"}
    p = cli(["map", str(data), "--task", "do {line}", "-j", "2", "--bg", "--out", str(out)], env)
    assert p.returncode == 0, p.stderr
    job_id = p.stdout.strip()
    from support.checks import eventually

    assert eventually(lambda: out.exists() and len(out.read_text().splitlines()) >= 2)
    ps = invoke(["ps"], env)
    assert job_id in ps.stdout and "map" in invoke(["show", job_id], env).stdout
    stopped = invoke(["stop", job_id], env)
    assert stopped.returncode == 0, stopped.stderr
    state = json.loads(invoke(["show", "--json", job_id], env).stdout)
    assert state["status"] == "aborted"
    done_before = {r["line"] for r in jsonl(out) if r["status"] == "completed"}
    assert done_before == {"w0", "w1"}
    go.touch()
    p = invoke(["map", "--resume", job_id, "--json"], env)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "completed" and result["map"]["completed"] == 6
    rows = jsonl(out)
    assert sorted(r["line"] for r in rows) == [f"w{i}" for i in range(6)]
    assert all(r["status"] == "completed" for r in rows)
    # A row completed before the stop was not run again.
    starts = Counter(Path(child["MAP_LOG"]).read_text().split())
    assert all(starts[w] == 1 for w in done_before)


def _completed_runs_by_row(home: Path, job_id: str) -> Counter[str]:
    """How many runs of the job completed, per row (its task's last word)."""
    done: Counter[str] = Counter()
    for run_dir in (home / "runs").iterdir():
        if not (run_dir / "meta.json").exists():
            continue  # made by a driver killed before it wrote the run's meta: never started
        meta = json.loads((run_dir / "meta.json").read_text())
        result_file = run_dir / "result.json"
        if meta.get("jobId") != job_id or not result_file.exists():
            continue
        result = json.loads(result_file.read_text())
        if result["status"] == "completed":
            done[result["task"].split("\n")[0].split()[-1]] += 1
    return done


@pytest.mark.parametrize("kill_after", [0, 1, 3, 6, 9, 14, "twice"])
def test_kill_9_of_the_driver_then_resume_completes_every_row_exactly_once(
    tmp_path: Path, child: dict[str, str], kill_after: int | str
) -> None:
    """The driver is killed when its row log has ``kill_after`` lines (0: as soon as it
    runs; ``twice``: at 2 lines, and its resumer at 8), then the map is resumed."""
    import signal

    from support.checks import eventually, pid_alive

    home = Path(os.environ["SUBAGENTS_HOME"])
    words = [f"w{i}" for i in range(10)]
    data = tmp_path / "items.txt"
    data.write_text("".join(f"{w}\n" for w in words))
    out = tmp_path / "r.jsonl"
    env = {**child, "MAP_DELAY": "0.3"}

    def kill_driver_at(job_id: str, lines: int) -> None:
        log = home / "jobs" / job_id / "rowlog.jsonl"
        state_file = home / "jobs" / job_id / "job.json"

        def driver() -> int | None:
            driver = json.loads(state_file.read_text()).get("driver")
            return driver["pid"] if driver else None

        assert eventually(lambda: driver() is not None)
        assert eventually(
            lambda: (
                (log.exists() and len(log.read_bytes().splitlines()) >= lines)
                or not pid_alive(driver() or 0)
            )
        )
        pid = driver()
        assert pid is not None
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        assert eventually(lambda: not pid_alive(pid))

    p = cli(["map", str(data), "--task", "do {line}", "-j", "3", "--bg", "--out", str(out)], env)
    assert p.returncode == 0, p.stderr
    job_id = p.stdout.strip()
    if kill_after == "twice":
        kill_driver_at(job_id, 2)
        again = cli(["map", "--resume", job_id, "--bg"], env)
        assert again.returncode == 0, again.stderr
        kill_driver_at(job_id, 8)
    else:
        assert isinstance(kill_after, int)
        kill_driver_at(job_id, kill_after)
    p = invoke(["map", "--resume", job_id, "--json"], env)  # in the foreground
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["map"]["completed"] == 10
    assert _completed_runs_by_row(home, job_id) == Counter(dict.fromkeys(words, 1))
    rows = jsonl(out)
    assert sorted(r["line"] for r in rows) == words
    assert {r["status"] for r in rows} == {"completed"}


def test_wait_and_show_follow_a_background_map(tmp_path: Path, child: dict[str, str]) -> None:
    data = tmp_path / "items.txt"
    data.write_text("".join(f"w{i}\n" for i in range(4)))
    go = tmp_path / "go"
    env = {**child, "MAP_HOLD": str(go)}
    p = cli(["map", str(data), "--task", "do {line}", "-j", "2", "--bg"], env)
    assert p.returncode == 0, p.stderr
    job_id = p.stdout.strip()
    from support.checks import eventually

    assert eventually(lambda: "now: rows 0/4 · 2 running" in invoke(["show", job_id], env).stdout)

    def top_shows_rows_in_flight() -> bool:
        snapshot = json.loads(invoke(["top", "--json"], env).stdout)
        jobs = snapshot["jobs"] if isinstance(snapshot, dict) else snapshot
        job = next(j for j in jobs if j["jobId"] == job_id)
        return job["status"] == "running" and any(r["runId"] for r in job["runs"])

    assert eventually(top_shows_rows_in_flight, 20)
    import subprocess

    waiting = subprocess.Popen(
        [sys.executable, "-m", "subagents.cli", "wait", job_id, "--progress", "jsonl"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stderr is not None
    first = json.loads(waiting.stderr.readline())  # the map as it is when wait starts
    assert (first["type"], first["done"], first["running"]) == ("map", 0, 2)
    go.touch()
    # The rest through the same buffered reader: readline() may have read past the first
    # line already, and communicate() would read the pipe past what that buffer holds.
    err = waiting.stderr.read()
    assert waiting.stdout is not None
    out = waiting.stdout.read()
    waiting.wait(timeout=120)
    waited = subprocess.CompletedProcess(waiting.args, waiting.returncode, out, err)
    assert waited.returncode == 0, waited.stderr
    assert f"map {job_id}: 4/4 rows completed" in waited.stdout
    records = [json.loads(line) for line in waited.stderr.splitlines()]
    rows = [r for r in records if r["type"] == "row"]
    assert records[-1]["type"] == "answer" and records[-1]["map"]["completed"] == 4
    # Every row's end, once: the last of them may come from the log compacted at the end.
    assert sorted(r["key"] for r in rows) == ["1", "2", "3", "4"]
    assert all(r["status"] == "completed" for r in rows)
    last = [r for r in records if r["type"] == "map"][-1]
    assert last["done"] == last["total"] == 4 and last["running"] == 0
