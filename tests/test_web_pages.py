"""Every page of ``subagents web`` over a fleet such as a user has, in a real headless chromium
at 1400x900 and at 390x844 (a phone): the fleet (a parallel job still running, one that
failed, one over its budget, "Needs you"), a parallel job's timeline and transcript, an
isolated run's changes, the cost page. Each page is checked, then saved as docs/web.md's
screenshot when ``SUBAGENTS_SCREENSHOTS`` names a directory:

    SUBAGENTS_SCREENSHOTS=docs/web .venv/bin/pytest -q tests/test_web_pages.py

Jobs run real supervisors with the fake agent, in two throwaway git repositories."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.cli import cli
from support.fake import Fake
from support.git import git_repo
from support.webserver import (
    DESKTOP,
    PHONE,
    Web,
    cost_rows,
    have_chromium,
    screenshot,
    too_wide,
    until,
)

import subagents

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("chromium"),
    pytest.mark.skipif(not have_chromium(), reason="needs Debian's chromium and chromium-driver"),
]

WAIT = 60.0
EMPTY_LIST_FIX = "def total(xs):\n    if not xs:\n        return 0\n    return sum(xs)\n"
EMPTY_LIST_TEST = "from app import total\n\n\ndef test_empty():\n    assert total([]) == 0\n"


@dataclass
class Fleet:
    done: str
    failed: str
    over: str
    isolated: str
    parallel: str  # two of its three runs wait on a command; the third has not started


def _worked(answer: str, command: str, output: str, pause: float) -> list[dict[str, Any]]:
    return [
        *pi.start(),
        *pi.tool_use(command=command),
        {"sleep": pause},
        *pi.tool_end(output=output),
        pi.text_end(answer),
        *pi.end(),
    ]


@pytest.fixture
def fleet(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    monkeypatch.setenv("SUBAGENTS_SESSION", "refactor-auth")
    src = Path(tempfile.mkdtemp(prefix="src-"))  # a short path: the pages show it
    api = git_repo(src / "billing-api", {"app.py": "def total(xs):\n    return sum(xs)\n"})
    shop = git_repo(src / "storefront", {"README.md": "# storefront\n"})

    def start(spec: Any, repo: Path, steps: list[dict[str, Any]]) -> subagents.JobHandle:
        return subagents.start(spec, cwd=repo, env=fake.env(steps))

    summary = "The billing module has **3** entry points:\n\n- `total`\n- `refund`\n- `invoice`"
    done = start("Summarize the billing module", api, _worked(summary, "rg -n def", "", 0.4))
    failed = start(
        "Run the migrations",
        shop,
        [*pi.start(), {"stderr": "error: database is locked\n"}, {"exit": 3}],
    )
    turns = [
        step
        for i in range(3)
        for step in (*pi.tool_use(f"t{i}", f"rg -n logging src/part{i}"), *pi.tool_end(f"t{i}"))
    ]
    over = start(
        {"mode": "single", "steps": [{"task": "Tidy the logging calls", "max_tokens": 20}]},
        api,
        [*pi.start(), *turns, pi.text_end("Tidied two of them."), *pi.end()],
    )
    fix = {"task": "Handle an empty list in total()", "isolate": "worktree"}
    isolated = start(
        {"mode": "single", "steps": [fix]},
        api,
        [
            {"write": "app.py", "text": EMPTY_LIST_FIX},
            {"write": "test_app.py", "text": EMPTY_LIST_TEST},
            *_worked("Done: `total([])` is 0 now, with a test.", "pytest -q", "1 passed\n", 0.3),
        ],
    )
    for job in (done, failed, over, isolated):
        assert job.wait(WAIT) is not None
    gate = src / "gate"
    parallel = start(
        {
            "mode": "parallel",
            "concurrency": 2,
            "tasks": [
                {"task": "Review the checkout flow for race conditions"},
                {"task": "Review the cart for input validation"},
                {"task": "Review the payment webhooks"},
            ],
        },
        shop,
        [
            *pi.start(),
            *pi.tool_use(command="rg -n 'async def' src/"),
            {"sleep": 0.6},
            *pi.tool_end(output="src/checkout.py:12\n"),
            *pi.tool_use("c2", command="pytest tests/test_checkout.py -q"),
            {"wait_for": str(gate)},
            *pi.tool_end("c2", output="4 passed\n"),
            pi.text_end("No race found."),
            *pi.end(),
        ],
    )
    try:
        yield Fleet(done.job_id, failed.job_id, over.job_id, isolated.job_id, parallel.job_id)
    finally:
        gate.touch()
        parallel.wait(WAIT)
        shutil.rmtree(src, ignore_errors=True)


def _text(driver: Any, selector: str) -> str:
    return str(driver.execute_script(f"return document.querySelector({selector!r}).innerText"))


def _fleet_page(driver: Any, fleet: Fleet) -> None:
    parallel = f"document.querySelector('tbody[data-job=\"{fleet.parallel}\"]')"
    waiting = f"[...{parallel}.querySelectorAll('.activity')].filter((e) => e.textContent.includes('test_checkout')).length === 2"  # fmt: skip
    until(driver, f"document.getElementById('live').classList.contains('on') && {waiting}", WAIT)
    shown = driver.execute_script("return [...document.querySelectorAll('tbody.job-rows')].map((e) => e.dataset.job)")  # fmt: skip
    assert sorted(shown) == sorted(vars(fleet).values())
    needs = driver.execute_script(
        "return [...document.querySelectorAll('section.needs > ul > li')]"
        ".map((e) => [e.dataset.key, e.dataset.need, e.innerText])"
    )
    assert [(key, kind) for key, kind, _ in needs] == [
        (f"need-{fleet.over}", "budget"),
        (f"need-{fleet.failed}", "failed"),
    ]
    assert "token limit 20" in needs[0][2] and "database is locked" in needs[1][2]
    assert "Summarize the billing module" in _text(driver, f"tbody[data-job='{fleet.done}']")


def _job_page(driver: Any, fleet: Fleet) -> None:
    until(driver, "document.querySelectorAll('#transcript time.ts').length >= 3", WAIT)
    bars = driver.execute_script(
        "return [...document.querySelectorAll('svg.gantt g')].map((g) => "
        "g.querySelector('rect') ? g.querySelector('rect').getAttribute('class') : g.textContent)"
    )
    assert bars[:2] == ["bar st-running", "bar st-running"] and "not started" in bars[2], bars
    transcript = _text(driver, "#transcript")
    assert "$ pytest tests/test_checkout.py -q" in transcript, transcript
    assert driver.execute_script("return document.getElementById('send-form') !== null")


def _diff_page(driver: Any, fleet: Fleet) -> None:
    until(driver, "document.querySelector('section.diff table.files')", WAIT)
    files = driver.execute_script(
        "return [...document.querySelectorAll('section.diff table.files tr')]"
        ".map((r) => r.innerText.split(/\\s+/).filter(Boolean))"
    )
    assert files == [["app.py", "+2", "-0"], ["test_app.py", "+5", "-0"]]
    patch = _text(driver, "pre.patch").splitlines()
    # One patch line a line, as git wrote them.
    assert "diff --git a/app.py b/app.py" in patch and "+    if not xs:" in patch, patch
    assert "+def test_empty():" in patch
    assert _text(driver, "section.answer code") == "total([])"


def _cost_page(driver: Any, fleet: Fleet) -> None:
    until(driver, "document.querySelectorAll('table.cost').length === 5", WAIT)
    for by in ("backend", "agent", "repo"):
        cells = driver.execute_script(
            f"return [...document.querySelectorAll('table.cost[data-by={by}] tbody tr')]"
            ".map((r) => [...r.cells].map((c) => c.textContent))"
        )
        report = json.loads(cli(["cost", "--json", "--by", by]).stdout)
        assert cells == cost_rows(report), by
    assert driver.execute_script("return document.querySelectorAll('svg.chart rect.bar').length")


PAGES: list[tuple[str, Callable[[Fleet], str], Callable[[Any, Fleet], None]]] = [
    ("fleet", lambda f: "/", _fleet_page),
    ("job", lambda f: f"/job/{f.parallel}", _job_page),
    ("diff", lambda f: f"/job/{f.isolated}", _diff_page),
    ("cost", lambda f: "/cost", _cost_page),
]


def test_every_page_on_a_desktop_and_a_phone_shows_the_fleet(
    browser: Any, web: Web, fleet: Fleet
) -> None:
    browser.get(web.sign_in)
    try:
        for screen, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", screen)
            for name, path, check in PAGES:
                browser.get(web.base + path(fleet))
                check(browser, fleet)
                assert browser.execute_script("return innerWidth") == screen["width"]
                if screen is PHONE:
                    assert too_wide(browser) == [], name
                screenshot(browser, name + suffix)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
