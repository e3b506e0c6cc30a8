"""``subagents web`` in a real headless chromium (Debian's, driven through its chromedriver):
the fleet page follows a job to its end without a reload, Stop aborts a job, Apply lands an
isolated run's change (and a conflict changes nothing), a child's ``<script>`` is text on
the page and opens no dialog. Jobs run real supervisors with the fake agent."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.claude import asking_steps, claude_steps
from support.fake import Fake
from support.git import git, git_repo
from support.webserver import Web, have_chromium, until

import subagents
from subagents import service
from subagents.core import paths
from subagents.jobs import JobStore

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("chromium"),
    pytest.mark.skipif(not have_chromium(), reason="needs Debian's chromium and chromium-driver"),
]

WAIT = 30.0
XSS = "<script>alert(1)</script> and <img src=x onerror=alert(2)> and [click](javascript:alert(3))"


@pytest.fixture
def start(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """``start(steps, spec=None, cwd=None)``: a background job whose fake pi plays ``steps``."""
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))

    def run(steps: list[dict[str, Any]], spec: Any = "do it", cwd: Path | None = None) -> str:
        return subagents.start(spec, cwd=cwd, env=fake.env(steps)).job_id

    return run


def sign_in(driver: Any, web: Web, path: str = "/") -> None:
    driver.get(web.sign_in)
    assert driver.execute_script("return location.search") == ""  # the token left the address
    if path != "/":
        driver.get(web.base + path)


def no_dialog(driver: Any) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        driver.switch_to.alert  # noqa: B018
    except NoAlertPresentException:
        return True
    return False


def test_fleet_follows_a_job_to_its_end_without_a_reload(
    browser: Any, web: Web, start: Callable[..., str], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    steps = [*pi.start(), *pi.tool_use(command="make test"), {"wait_for": str(gate)}]
    job_id = start([*steps, *pi.tool_end(), pi.text_end("all green"), *pi.end()])
    sign_in(browser, web)
    row = f"document.querySelector('tbody[data-job=\"{job_id}\"]')"
    until(browser, f"{row} && {row}.dataset.status === 'running'")
    # (the cell says "starting" until the run's first tool call is seen: wait for that one)
    until(browser, f"{row}.querySelector('.activity').textContent.includes('make test')")
    browser.execute_script("window.stillThisPage = true")
    gate.touch()
    until(browser, f"{row}.dataset.status === 'completed'")
    assert (
        browser.execute_script(f"return {row}.querySelector('.activity').textContent")
        == "all green"
    )
    assert browser.execute_script("return window.stillThisPage") is True  # no reload
    # A filter is the page's address; a job that does not pass it is not shown.
    browser.get(web.base + "/?status=failed")
    until(browser, "document.querySelector('.totals')")
    assert browser.execute_script(f"return {row}") is None


def test_stop_from_the_job_page_aborts_the_job(
    browser: Any, web: Web, start: Callable[..., str], tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    job_id = start(
        [*pi.start(), *pi.tool_use(command="sleep 600"), {"pidfile": str(pidfile)}, {"hang": True}]
    )
    assert eventually(pidfile.exists)
    sign_in(browser, web, f"/job/{job_id}")
    button = "document.querySelector('button[data-action=stop]')"
    until(browser, button)
    browser.execute_script(f"{button}.click()")
    until(browser, "document.getElementById('stop-dialog').open")
    browser.find_element("id", "stop-no").click()  # a second thought: nothing happens
    assert not browser.execute_script("return document.getElementById('stop-dialog').open")
    assert service.job_state(JobStore(), job_id)["status"] == "running"
    browser.execute_script(f"{button}.click()")
    until(browser, "document.getElementById('stop-dialog').open")
    browser.find_element("id", "stop-yes").click()
    until(browser, "document.getElementById('stop-result').textContent === 'job aborted'")
    until(browser, "document.querySelector('.jobhead').dataset.status === 'aborted'")
    assert service.job_state(JobStore(), job_id)["status"] == "aborted"
    assert eventually(lambda: not pid_alive(int(pidfile.read_text())))


def test_deny_from_the_fleet_page_answers_the_waiting_child(
    browser: Any, web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with --approvals ask waits: the fleet's "needs you" shows its request with
    Approve and Deny, each after a confirmation (as Stop); the child gets the refusal."""
    monkeypatch.setenv("SUBAGENTS_CLAUDE_BIN", str(fake.launcher))
    spec = {
        "mode": "single",
        "steps": [{"task": "push it", "backend": "claude", "approvals": "ask"}],
    }
    job_id = subagents.start(spec, cwd=fake.dir, env=fake.env(asking_steps())).job_id
    assert eventually(lambda: subagents.inbox(), timeout=WAIT)
    (item,) = subagents.inbox()
    sign_in(browser, web)
    deny = f"document.querySelector('button[data-action=decide][data-choice=deny][data-item=\"{item['id']}\"]')"
    until(browser, deny)
    assert "Bash: git push" in browser.execute_script(f"return {deny}.closest('li').textContent")
    browser.execute_script(f"{deny}.click()")
    until(browser, "document.getElementById('decide-dialog').open")
    browser.find_element("id", "decide-no").click()  # a second thought: nothing happens
    assert subagents.inbox() != []
    browser.execute_script(f"{deny}.click()")
    until(browser, "document.getElementById('decide-dialog').open")
    browser.find_element("id", "decide-reason").send_keys("not today")
    browser.find_element("id", "decide-yes").click()
    until(
        browser,
        f"document.getElementById('decide-result').textContent === 'denied: item {item['id']}'",
    )
    done = service.wait_job(JobStore(), job_id, WAIT)
    assert done is not None and done["status"] == "completed"
    assert "not today" in (fake.dir / "asked").read_text()
    (record,) = done["runs"][0]["approvals"]  # type: ignore[typeddict-item]
    assert record["choice"] == "deny" and record["reason"] == "not today"
    until(browser, f"!document.querySelector('li[data-item=\"{item['id']}\"]')")  # gone


def test_a_childs_question_is_answered_from_the_fleet_page(
    browser: Any, web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child's question (claude's AskUserQuestion) shows "Answer…"; the words typed in
    its dialog go back to the child as the user's answer."""
    monkeypatch.setenv("SUBAGENTS_CLAUDE_BIN", str(fake.launcher))
    question = {"question": "Which colour?", "header": "Colour", "multiSelect": False}
    options = [{"label": "Red", "description": ""}, {"label": "Blue", "description": ""}]
    asked = {"questions": [{**question, "options": options}]}
    spec = {
        "mode": "single",
        "steps": [{"task": "pick one", "backend": "claude", "approvals": "ask"}],
    }
    steps = asking_steps("AskUserQuestion", asked)
    subagents.start(spec, cwd=fake.dir, env=fake.env(steps))
    assert eventually(lambda: subagents.inbox(), timeout=WAIT)
    (item,) = subagents.inbox()
    sign_in(browser, web)
    answer = f"document.querySelector('button[data-choice=answer][data-item=\"{item['id']}\"]')"
    until(browser, answer)
    assert not browser.execute_script(
        f"return {answer}.closest('li').querySelector('button[data-choice=allow]')"
    )
    browser.execute_script(f"{answer}.click()")
    until(browser, "document.getElementById('decide-dialog').open")
    browser.find_element("id", "decide-reason").send_keys("Blue")
    browser.find_element("id", "decide-yes").click()
    until(
        browser,
        f"document.getElementById('decide-result').textContent === 'answered: item {item['id']}'",
    )
    assert eventually(lambda: (fake.dir / "asked").exists(), timeout=WAIT)
    said = (fake.dir / "asked").read_text()
    assert "'answers': {'Which colour?': 'Blue'}" in said and "'behavior': 'allow'" in said


def test_send_from_the_job_page_steers_the_running_child(
    browser: Any, web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_CLAUDE_BIN", str(fake.launcher))
    gate = fake.dir / "gate"
    steps = claude_steps(gate, echo="only the tokenizer, then report")
    spec = {"mode": "single", "steps": [{"task": "do it", "backend": "claude"}]}
    job_id = subagents.start(spec, env=fake.env(steps)).job_id
    store = JobStore()

    def run_dir() -> Path | None:
        ids = [r for r in store.load(job_id).get("runIds") or [] if r]
        return paths.runs_dir(store.home) / ids[0] if ids else None

    # The child is at work (its tool call is out) before the page is opened.
    assert eventually(
        lambda: (d := run_dir()) is not None and "tool_call" in _text(d / "events.jsonl")
    )
    sign_in(browser, web, f"/job/{job_id}")
    until(browser, "document.getElementById('send-form')")
    browser.find_element("id", "send-text").send_keys("only the tokenizer, then report")
    browser.find_element("id", "send-button").click()
    result = "document.getElementById('send-result')"
    receipt = until(browser, f"{result}.className === 'ok' && {result}.textContent")
    assert receipt.startswith("queued: steer m1 to run ")
    gate.touch()  # the child takes it, and answers
    until(browser, "document.querySelector('.jobhead').dataset.status === 'completed'")
    d = run_dir()
    assert d is not None
    run = json.loads((d / "result.json").read_text())
    assert run["messages"] == {"sent": 1, "delivered": 1}
    assert "only the tokenizer, then report" in _text(d / "transcript.md")
    # The form follows the run: gone once it ended; a program's message to it is refused.
    until(browser, "document.getElementById('send-form') === null")
    with web.client() as client:
        late = client.post(f"/api/runs/{run['runId']}/send", json={"text": "too late"})
        assert late.status_code == 409 and "ended" in late.json()["error"]
        # A request that is no message is refused before anything is asked of the run.
        bad = client.post(f"/api/runs/{run['runId']}/send", json={"mode": "shout"})
        assert bad.status_code == 400 and "text" in bad.json()["error"]
        unknown = client.post("/api/runs/nope/send", json={"text": "hi"})
        assert unknown.status_code == 404


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_apply_from_the_job_page_lands_an_isolated_runs_change(
    browser: Any, web: Web, start: Callable[..., str], tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"app.py": "one\ntwo\nthree\n"})
    edits = [
        {"write": "app.py", "text": "one\ntwo\nthree ({task})\n"},
        {"write": "new.txt", "text": "new\n"},
    ]
    spec = {"mode": "single", "steps": [{"task": "T", "isolate": "worktree"}]}
    job_id = start([*edits, *pi.answer("edited")], spec, repo)
    job = subagents.JobHandle(JobStore(), job_id).wait(WAIT)
    assert job is not None and job["status"] == "completed", job
    sign_in(browser, web, f"/job/{job_id}")
    until(browser, "document.querySelector('button[data-action=apply]')")
    assert "+three (T)" in browser.find_element("css selector", "pre.patch").text
    assert (repo / "app.py").read_text() == "one\ntwo\nthree\n"  # nothing until Apply
    browser.execute_script("document.querySelector('button[data-action=apply]').click()")
    text = until(
        browser,
        "document.getElementById('apply-result').className === 'ok' && document.getElementById('apply-result').textContent",
    )
    assert text == "applied 2 file(s): app.py, new.txt", text
    assert (repo / "app.py").read_text() == "one\ntwo\nthree (T)\n"
    assert (repo / "new.txt").read_text() == "new\n"
    # Applied again over a tree that changed the same line: a conflict, and nothing changes.
    (repo / "app.py").write_text("one\ntwo\nthree (mine)\n")
    (repo / "new.txt").unlink()
    status = git(repo, "status", "--porcelain")
    browser.execute_script("document.querySelector('button[data-action=apply]').click()")
    text = until(
        browser,
        "document.getElementById('apply-result').className === 'problem' && document.getElementById('apply-result').textContent",
    )
    assert "conflict" in text and "app.py" in text and "nothing was changed" in text
    assert (repo / "app.py").read_text() == "one\ntwo\nthree (mine)\n"
    assert not (repo / "new.txt").exists() and git(repo, "status", "--porcelain") == status


def test_a_childs_markup_is_text_and_runs_nothing(
    browser: Any, web: Web, start: Callable[..., str], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    job_id = start(
        [
            *pi.start(),
            *pi.tool_use(),
            {"wait_for": str(gate)},
            *pi.tool_end(),
            pi.text_end(XSS),
            *pi.end(),
        ]
    )
    sign_in(browser, web, f"/job/{job_id}")
    until(browser, "document.getElementById('transcript').textContent.includes('$ ls')")
    gate.touch()  # the answer arrives through the live stream
    until(browser, "document.querySelector('.jobhead').dataset.status === 'completed'")
    until(browser, "document.querySelector('#run-end .answer')")
    for where in ("#run-end .answer", "#transcript"):
        text = browser.find_element("css selector", where).text
        assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(2)>" in text
    assert (
        browser.execute_script("return document.querySelectorAll('main script, main img').length")
        == 0
    )
    assert (
        browser.execute_script("return document.querySelectorAll('a[href^=javascript]').length")
        == 0
    )
    assert no_dialog(browser)
    # Loaded whole (not through the stream) and on the fleet page: the same.
    browser.refresh()
    until(browser, "document.querySelector('#run-end .answer')")
    assert (
        "<script>alert(1)</script>" in browser.find_element("css selector", "#run-end .answer").text
    )
    browser.get(web.base + "/")
    cell = until(
        browser, f"document.querySelector('tbody[data-job=\"{job_id}\"] .activity').textContent"
    )
    assert cell.startswith("<script>alert(1)</script>")
    assert (
        browser.execute_script("return document.querySelectorAll('main script, main img').length")
        == 0
    )
    assert no_dialog(browser)


def test_a_browser_without_the_token_is_not_signed_in(browser: Any, web: Web) -> None:
    browser.delete_all_cookies()
    browser.get(web.base + "/")
    assert "Not signed in" in browser.find_element("tag name", "body").text
    browser.get(web.base + "/?token=not-the-token-at-all")
    assert "Not signed in" in browser.find_element("tag name", "body").text
    browser.get(web.sign_in)
    assert browser.find_element("tag name", "h1").text == "Fleet"
    cookie = browser.get_cookie(f"subagents_web_{web.port}")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
