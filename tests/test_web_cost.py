"""The cost page over a store of parallel, stopped and failed jobs: every table is what
``subagents cost --json --by …`` says, and the counts agree with each other and with the
jobs' own records (a run never started is in no count; each run that did is in one row of
every grouping; each job once in the total)."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually
from support.cli import invoke
from support.fake import Fake
from support.webserver import Web, cost_rows, cost_tables

import subagents
from subagents.jobs import JobStore

TIMEOUT = 60


@pytest.mark.process
def test_the_cost_counts_agree_over_parallel_stopped_and_failed_jobs(
    web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    parallel = subagents.start(
        {"mode": "parallel", "tasks": [{"task": f"part {i}"} for i in range(3)]},
        env=fake.env(pi.answer("done")),
    )
    failed = subagents.start("fail", env=fake.env([*pi.start(), {"exit": 3}]))
    # Two tasks one at a time, stopped while the first goes: the second never starts.
    hang = [*pi.start(), *pi.tool_use(command="sleep"), {"hang": True}]
    stopped = subagents.start(
        {"mode": "parallel", "tasks": [{"task": "first"}, {"task": "never"}], "concurrency": 1},
        env=fake.env(hang),
    )
    try:
        assert eventually(lambda: any(JobStore().load(stopped.job_id)["runIds"]), TIMEOUT)
        run_id = str(JobStore().load(stopped.job_id)["runIds"][0])
        transcript = Path(JobStore().home) / "runs" / run_id / "transcript.md"
        assert eventually(
            lambda: transcript.exists() and "sleep" in transcript.read_text(), TIMEOUT
        )
    finally:
        stopped.stop()  # (on a failure too: its child would hang on)
    ended = {j.job_id: j.wait(TIMEOUT) for j in (parallel, failed, stopped)}
    statuses = {k: (v or {}).get("status") for k, v in ended.items()}
    assert statuses == {
        parallel.job_id: "completed",
        failed.job_id: "failed",
        stopped.job_id: "aborted",
    }
    started = sum(r is not None for j in ended for r in JobStore().load(j)["runIds"])
    assert started == 3 + 1 + 1  # the stopped job's second task never started

    with web.client() as client:
        page = client.get("/cost").text
    tables = cost_tables(page)
    assert set(tables) == {"day", "backend", "model", "agent", "repo"}
    total = json.loads(invoke(["cost", "--json"]).stdout)
    assert total["total"]["jobs"] == 3 and total["summary"] in unescape(page)
    for by, rows in tables.items():
        report = json.loads(invoke(["cost", "--json", "--by", by]).stdout)
        assert rows == cost_rows(report), by  # the page is the report
        # Each run that started is in one row; the total is the report's without grouping.
        assert sum(r["runs"] for r in report["rows"]) == report["total"]["runs"] == started, by
        grouped = {k: v for k, v in report["total"].items() if k != "runs"}
        assert grouped == {k: v for k, v in total["total"].items() if k != "runs"}, by
        for field in ("input", "output", "totalTokens"):
            assert sum(r[field] for r in report["rows"]) == report["total"][field], (by, field)
        assert all(0 < r["jobs"] <= 3 for r in report["rows"]), by
    days = json.loads(invoke(["cost", "--json", "--by", "day"]).stdout)
    assert sum(r["jobs"] for r in days["rows"]) == 3  # a job ends on one day
    backends = json.loads(invoke(["cost", "--json", "--by", "backend"]).stdout)
    assert [(r["key"], r["jobs"], r["runs"]) for r in backends["rows"]] == [("pi", 3, started)]
