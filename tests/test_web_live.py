"""``subagents web`` in a real headless chromium while a run streams: live updates leave
what the user is doing alone (a Stop clicked at human speed opens its dialog every time, a
selected id stays selected), at 390 px wide nothing is wider than the screen; Re-run and
Continue ask first, then start a new job and go to it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.fake import Fake
from support.webserver import PHONE, Web, have_chromium, too_wide, until

import subagents
from subagents import service
from subagents.jobs import JobStore

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("chromium"),
    pytest.mark.skipif(not have_chromium(), reason="needs Debian's chromium and chromium-driver"),
]

WAIT = 30.0


@pytest.fixture
def streaming(fake: Fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], str]:
    """A job whose child runs a command every 0.2 s for a minute, then lingers."""
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))

    def start() -> str:
        steps = [*pi.start()]
        for i in range(300):
            steps += [*pi.tool_use(f"c{i}", command=f"step {i}"), {"sleep": 0.2}]
            steps += pi.tool_end(f"c{i}")
        return subagents.start("stream", env=fake.env([*steps, {"hang": True}])).job_id

    return start


def open_page(driver: Any, web: Web, path: str) -> None:
    driver.get(web.sign_in)
    driver.get(web.base + path)


ACTIVITY = "document.querySelector('#job-live td.activity').textContent"


def changes(driver: Any, times: int) -> None:
    """Waits for the live part to show ``times`` more activities (the stream at work)."""
    for _ in range(times):
        before = driver.execute_script(f"return {ACTIVITY}")
        until(driver, f"{ACTIVITY} !== {before!r}")


def test_stop_clicked_at_human_speed_while_a_run_streams_opens_the_dialog_every_time(
    browser: Any, web: Web, streaming: Callable[[], str]
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    job_id = streaming()
    open_page(browser, web, f"/job/{job_id}")
    until(browser, f"{ACTIVITY}.includes('step')")
    browser.execute_script("window.stopButton = document.querySelector('button[data-action=stop]')")
    dialog = "document.getElementById('stop-dialog')"
    seen = set()
    for _ in range(10):
        button = browser.find_element("css selector", "button[data-action=stop]")
        # A person's click: the pointer comes, the button is held a moment, released.
        ActionChains(browser).move_to_element(button).pause(0.3).click_and_hold().pause(
            0.2
        ).release().perform()
        until(browser, f"{dialog}.open")
        seen.add(browser.execute_script(f"return {ACTIVITY}"))
        browser.find_element("id", "stop-no").click()
        until(browser, f"!{dialog}.open")
        changes(browser, 1)  # the page was redrawn between clicks
    assert len(seen) >= 5  # the clicks landed while the run streamed
    assert browser.execute_script(
        "return window.stopButton.isConnected && "
        "window.stopButton === document.querySelector('button[data-action=stop]')"
    )
    assert service.job_state(JobStore(), job_id)["status"] == "running"  # "No", every time
    # Focus and a selection survive the redraws too.
    browser.execute_script(
        "const code = document.querySelector('.jobhead h1 code');"
        "const range = document.createRange(); range.selectNodeContents(code);"
        "getSelection().removeAllRanges(); getSelection().addRange(range);"
    )
    changes(browser, 3)
    assert browser.execute_script("return getSelection().toString()") == job_id
    browser.execute_script("document.querySelector('button[data-action=stop]').focus()")
    changes(browser, 2)
    assert browser.execute_script(
        "return document.activeElement === document.querySelector('button[data-action=stop]')"
    )
    browser.execute_script("document.querySelector('button[data-action=stop]').click()")
    until(browser, f"{dialog}.open")
    browser.find_element("id", "stop-yes").click()
    until(browser, "document.querySelector('.jobhead').dataset.status === 'aborted'")


def test_at_390_px_a_job_is_a_card_and_nothing_is_wider_than_the_screen(
    browser: Any, web: Web, streaming: Callable[[], str], fake: Fake
) -> None:
    job_id = streaming()
    done = subagents.start(
        "a finished task with a long name " * 4, env=fake.env(pi.answer("ok " * 200))
    )
    assert done.wait(WAIT) is not None
    failed = subagents.start("a failing task", env=fake.env([*pi.start(), {"exit": 3}]))
    assert failed.wait(WAIT) is not None
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    try:
        open_page(browser, web, "/")
        row = f"document.querySelector('tbody[data-job=\"{job_id}\"]')"
        until(browser, f"{row} && {row}.querySelector('.activity').textContent.includes('step')")
        assert too_wide(browser) == []
        need = f"section.needs li[data-key=need-{failed.job_id}] .need-failed"
        assert browser.execute_script(f"return document.querySelector('{need}').offsetWidth > 0")
        card = browser.execute_script(f"return {row}.getBoundingClientRect().width")
        assert card <= PHONE["width"]
        # A card says the job's status, task, elapsed and cost.
        shown = browser.execute_script(
            f"return ['.job-status', '.task', '.elapsed', '.cost'].map((c) => {{"
            f"  const e = {row}.querySelector(c); const r = e.getBoundingClientRect();"
            f"  return r.width > 0 && r.right <= innerWidth ? e.textContent.trim() : null }})"
        )
        assert shown[0] == "running" and shown[1] == "stream", shown
        assert shown[2].endswith("s") and shown[3].startswith("$"), shown
        for path in (f"/job/{job_id}", f"/job/{done.job_id}", "/cost"):
            open_page(browser, web, path)
            until(browser, "document.querySelector('main h1')")
            assert too_wide(browser) == [], path
            if path == f"/job/{job_id}":
                # Each part's time is in the transcript's gutter, clear of its text.
                times = until(browser, "document.querySelectorAll('#transcript time.ts').length")
                assert times >= 2
                assert browser.execute_script(
                    "const t = document.getElementById('transcript');"
                    "const edge = t.getBoundingClientRect().left"
                    "  + parseFloat(getComputedStyle(t).paddingLeft);"
                    "return [...t.querySelectorAll('time.ts')].every((e) => {"
                    "  const r = e.getBoundingClientRect();"
                    "  return r.width > 0 && r.left >= 0 && r.right <= edge })"
                )
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        service.stop_job(JobStore(), job_id)


def _confirm_and_follow(driver: Any, action: str, text: str | None = None) -> str:
    """Clicks ``action``'s button, answers its dialog yes, and waits for the new job's page:
    the new job's id."""
    until(driver, f"document.querySelector('button[data-action={action}]')")
    here = driver.current_url
    driver.execute_script(f"document.querySelector('button[data-action={action}]').click()")
    until(driver, "document.getElementById('again-dialog').open")
    if text is not None:
        driver.find_element("id", "again-text").send_keys(text)
    driver.find_element("id", "again-yes").click()
    until(driver, f"location.href !== {here!r} && document.querySelector('.jobhead')")
    return str(driver.execute_script("return location.pathname.split('/').pop()"))


def test_rerun_asks_first_then_starts_the_same_job_again(
    browser: Any, web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    first = subagents.start("say it twice", env=fake.env(pi.answer("said")))
    assert first.wait(WAIT) is not None
    open_page(browser, web, f"/job/{first.job_id}")
    until(browser, "document.querySelector('button[data-action=rerun]')")
    browser.execute_script("document.querySelector('button[data-action=rerun]').click()")
    until(browser, "document.getElementById('again-dialog').open")
    browser.find_element("id", "again-no").click()  # a second thought: nothing starts
    assert len(service.list_jobs(10)) == 1
    new = _confirm_and_follow(browser, "rerun")
    assert new != first.job_id
    done = subagents.JobHandle(JobStore(), new).wait(WAIT)
    assert done is not None and done["status"] == "completed" and done["finalText"] == "said"
    assert done["runs"][0]["task"] == "say it twice"


@pytest.mark.skipif(shutil.which("pi") is None, reason="the pi CLI is not installed")
def test_continue_resumes_the_childs_conversation_with_the_message(
    browser: Any, web: Web, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subagents.demo import mockmodel as mm

    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    with mm.MockModelServer(mm.Script(final_text="Listed: {tool_output}.")) as srv:
        for name, value in mm.write_pi_config(tmp_path / "pi-config", srv.url).items():
            monkeypatch.setenv(name, value)  # the server's children see it too
        first = subagents.run("list files FIRST", backend="pi", model="mock/mock-model", cwd=work)
        assert first["status"] == "completed", first["errorMessage"]
        job_id = str(first["jobId"])
        open_page(browser, web, f"/job/{job_id}")
        new = _confirm_and_follow(browser, "continue", "now count them FOLLOW-UP")
        done = subagents.JobHandle(JobStore(), new).wait(WAIT * 2)
        bodies = [json.dumps(body) for body in srv.requests]
    assert done is not None and done["status"] == "completed", done
    assert done["runs"][0]["continuedFrom"] == first["runId"]
    assert any("FIRST" in body and "FOLLOW-UP" in body for body in bodies)
