"""The fleet's "Needs you": a job waiting on a person first (its items from the approvals
inbox's source), then one over budget, stalled, failed; a job that hit its budget shows
which budget; everything an item says is text on the page."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from html import unescape
from pathlib import Path
from typing import Any

import httpx2
import pytest
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake
from support.webserver import TOKEN, web_server

import subagents
from subagents.core import inbox
from subagents.core.paths import runs_dir
from subagents.present.jobview import RunRow
from subagents.types import JobRow
from subagents.web import Waiting
from subagents.web.fleet import FleetView, JobView, render_fleet
from subagents.web.needs import NEEDS_WINDOW, needs

TIMEOUT = 60


def view(job_id: str, status: str, *, age: float = 60.0, **run: Any) -> JobView:
    job: JobRow = {
        "jobId": job_id,
        "mode": "single",
        "agents": [],
        "status": status,  # type: ignore[typeddict-item]  # (stalled: the view's own word)
        "createdAt": time.time() - age,
        "startedAt": None,
        "completedAt": None,
        "durationMs": None,
        "runIds": [f"{job_id}-r"],
        "session": None,
        "task": "t",
        "totalTokens": None,
        "cost": None,
    }
    fields: dict[str, Any] = {
        "job_id": job_id,
        "run_id": f"{job_id}-r",
        "mode": "single",
        "agent": "pi",
        "backend": "pi",
        "status": status,
        "elapsed": 1.0,
        "tools": 0,
        "tokens": 0,
        "cost": None,
        "activity": "",
        "task": f"task of {job_id}",
        **run,
    }
    return JobView(job, [RunRow(**fields)], "/repo", status)


OVER = {"kind": "tokens", "limit": 1000, "used": 1200, "action": "abort", "scope": "job"}


def test_needs_lists_waiting_then_over_budget_then_stalled_then_failed() -> None:
    views = [
        view("done", "completed"),
        view("failed", "failed", activity="make: error 2"),
        view("stalled", "stalled"),
        view("budget", "failed", limit=OVER, activity="stopped"),
        view("old-failed", "failed", age=NEEDS_WINDOW + 60),
        view("old-stalled", "stalled", age=NEEDS_WINDOW + 60),
        view("asks", "running"),
        view("wrapped", "completed", limit={**OVER, "action": "wrap-up", "scope": "run"}),
    ]
    now = time.time()
    waiting = [
        Waiting("i2", "asks", "asks-r", "run `git push`", now - 5),
        Waiting("i1", "asks", "asks-r", "edit ../outside.txt", now - 30),
        Waiting("i9", "not-shown", "x-r", "a job the fleet does not show", now),
    ]
    found = needs(views, waiting)
    assert [(n.kind, n.view.job_id) for n in found] == [
        ("waiting", "asks"),
        ("budget", "budget"),
        ("budget", "wrapped"),
        ("stalled", "stalled"),
        ("stalled", "old-stalled"),  # a stall is now, whenever the job began
        ("failed", "failed"),
    ]
    asks = found[0]
    assert [w.item for w in asks.waiting] == ["i1", "i2"]  # oldest first
    assert asks.why == "edit ../outside.txt (+1 more)" and asks.label == "waiting on you"
    # (the budget's mark and words as every face says them: present/roles.py)
    assert found[1].why == "⏹ job's token limit 1000 · stopped (1200 tokens used)"
    assert found[1].label == "over budget"
    assert found[2].why.startswith("⏹ token limit 1000 · wrapped up")
    assert found[5].why == "make: error 2"


def test_a_waiting_item_is_text_on_the_page_with_its_id_and_run() -> None:
    hostile = '<img src=x onerror="alert(1)"> rm -rf <b>/</b>'
    asks = view("asks", "running", task="<script>alert(2)</script>")
    fleet = FleetView(jobs=[asks], shown_of=1)
    fleet.needs = needs(fleet.jobs, [Waiting('i"1', "asks", "asks-r", hostile, time.time())])
    html = render_fleet(fleet)
    assert "<img" not in html and "<script" not in html and "<b>" not in html
    assert unescape(hostile) in unescape(html)
    item = re.search(r'<li data-key="item-i&#34;1" data-item="i&#34;1"><a href="([^"]+)">', html)
    assert item, html
    assert unescape(item.group(1)) == "/job/asks?run=asks-r"
    assert '<span class="badge need-waiting">waiting on you</span>' in html


def test_nothing_needs_you_says_nothing() -> None:
    fleet = FleetView(jobs=[view("done", "completed")], shown_of=1)
    fleet.needs = needs(fleet.jobs, [])
    assert "Needs you" not in render_fleet(fleet)


@pytest.mark.process
def test_a_job_over_its_budget_and_one_waiting_are_at_the_top_of_the_fleet(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    turns = [*pi.start()]
    for i in range(4):  # 15 tokens a turn, against a budget of 20
        turns += [*pi.tool_use(f"c{i}", command=f"step {i}"), *pi.tool_end(f"c{i}")]
    spec = {"mode": "single", "steps": [{"task": "count", "max_tokens": 20}]}
    over = subagents.start(spec, env=fake.env([*turns, pi.text_end("done"), *pi.end()]))
    over_result = over.wait(TIMEOUT)
    assert over_result is not None
    run = over_result["runs"][0]
    assert run.get("limit"), run  # the budget acted
    calm = subagents.start("fine", env=fake.env(pi.answer("ok")))
    calm_result = calm.wait(TIMEOUT)
    assert calm_result is not None
    calm_run = str(calm_result["runs"][0]["runId"])
    waiting: Callable[[], list[Waiting]] = lambda: [  # noqa: E731
        Waiting("item-1", calm.job_id, calm_run, "run `make deploy`", time.time())
    ]
    with web_server(isolated_state, waiting=waiting) as web, web.client() as client:
        page = client.get("/").text
    section = re.search(r'<section class="needs".*?</section>', page, re.S)
    assert section, page
    entries = re.findall(r'<li data-key="need-([^"]+)" data-need="(\w+)">', section.group(0))
    assert entries == [(calm.job_id, "waiting"), (over.job_id, "budget")]
    words = unescape(section.group(0))
    assert "run `make deploy`" in words
    assert "⏹ token limit 20 · " in words and f"({run['limit']['used']} tokens used)" in words


@pytest.mark.process
def test_a_map_resumed_with_its_budget_spent_starts_nothing_and_is_over_budget(
    tmp_path: Path, child: dict[str, str], isolated_state: Path
) -> None:
    data = tmp_path / "items.txt"
    data.write_text("".join(f"w{i}\n" for i in range(4)))
    first = invoke(["map", str(data), "--task", "do {line}", "-j", "1", "--max-cost", "0.02", "--json"], child)  # fmt: skip
    job_id = json.loads(first.stdout)["jobId"]
    started = len(Path(child["MAP_LOG"]).read_text().split())
    # Resumed, the rows done before have spent the budget: no row starts.
    again = invoke(["map", "--resume", job_id, "--json"], child)
    assert again.returncode == 1, again.stderr
    assert len(Path(child["MAP_LOG"]).read_text().split()) == started
    limit = json.loads(again.stdout)["limit"]
    assert limit == {
        "kind": "cost",
        "limit": 0.02,
        "used": 0.02,
        "action": "refuse",
        "scope": "job",
    }
    with web_server(isolated_state) as web, web.client() as client:
        page = client.get("/").text
    section = re.search(r'<section class="needs".*?</section>', page, re.S)
    assert section, page
    entries = re.findall(r'<li data-key="need-([^"]+)" data-need="(\w+)">', section.group(0))
    assert entries == [(job_id, "budget")]
    words = unescape(section.group(0))
    assert "⏹ job's cost limit $0.02 · the rest not started ($0.02 used)" in words


def test_a_question_is_answered_from_the_page_not_approved(isolated_state: Path) -> None:
    """A child's question shows "Answer…" (no Approve); the answer, posted as the page
    does, is the decision; an approval's choice for it is refused, nothing changed."""
    run_dir = runs_dir(isolated_state) / "01m8aaaaaa-aaaaaaaa"
    run_dir.mkdir(parents=True)
    now = time.time()
    question = {"question": "Which?", "header": "", "options": [], "multiSelect": False}
    inbox.write_item(
        run_dir,
        {
            "id": "01m8bbbbbb-bbbbbbbb",
            "runId": run_dir.name,
            "jobId": "01m8cccccc-cccccccc",
            "backend": "claude",
            "task": "t",
            "tool": "AskUserQuestion",
            "summary": "Which?",
            "input": {"questions": [question]},
            "policy": "ask",
            "choices": ["answer", "deny"],
            "requestedAt": now,
            "expiresAt": now + 60,
            "kind": "question",
            "questions": [question],  # type: ignore[list-item]
        },
    )
    asks = view("01m8cccccc-cccccccc", "running")
    fleet = FleetView(jobs=[asks], shown_of=1)
    fleet.needs = needs(
        fleet.jobs,
        [Waiting("01m8bbbbbb-bbbbbbbb", asks.job_id, run_dir.name, "Which?", now, True)],
    )
    html = render_fleet(fleet)
    assert 'data-choice="answer"' in html and "Answer…" in html and "Approve…" not in html
    with web_server(isolated_state) as web, httpx2.Client(base_url=web.base, timeout=30) as client:
        client.get(f"/?token={TOKEN}")
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', client.get("/").text)
        assert csrf
        headers = {"Origin": web.base, "X-CSRF-Token": csrf.group(1)}
        url = "/api/approvals/01m8bbbbbb-bbbbbbbb/decide"
        refused = client.post(url, headers=headers, json={"choice": "allow"})
        assert refused.status_code == 400 and "is a question" in refused.json()["error"]
        bad = client.post(url, headers=headers, json={"choice": "answer", "answers": [1]})
        assert bad.status_code == 400
        assert inbox.read_decision(run_dir, "01m8bbbbbb-bbbbbbbb") is None
        done = client.post(url, headers=headers, json={"choice": "answer", "answers": ["the left"]})
        assert done.status_code == 200, done.text
    decision = inbox.read_decision(run_dir, "01m8bbbbbb-bbbbbbbb")
    assert decision is not None and decision["answers"] == ["the left"]
