"""The pi package as a person sees it: the real pi TUI (1.6, as scripts/setup pins it) in a real terminal (tmux,
120x40, capture-pane), the package loaded, its calls run through the real ``subagents`` CLI,
every model the mock on 127.0.0.1. The parent's mock calls ``subagent`` once. The foreground
row and the widget have real pi children, each child's provider a mock of its own (slow, or
running a command); a mixed parallel call and the fleet view have a stand-in playing pi's
stream as their children (``Parent.stand_in``), whose rows are the subject there.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.checks import on_screen
from support.gate import gate
from support.pi_parent import COLUMNS, SUBAGENTS, Parent, delegating, mixed_tasks
from support.pi_parent import needs_pi_parent as needs_pi
from support.pi_tui import COLS, PiTui
from support.pistream import fails, replies

from subagents.demo.mockmodel import Script

pytestmark = [
    pytest.mark.e2e,
    needs_pi,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def session_lines(parent: Parent) -> list[dict[str, Any]]:
    return [json.loads(x) for x in parent.session_file().read_text().splitlines() if x]


def roles(parent: Parent) -> list[str]:
    """The roles of the session's messages so far, in order."""
    return [e["message"]["role"] for e in session_lines(parent) if e["type"] == "message"]


def tool_results(parent: Parent) -> list[dict[str, Any]]:
    return [
        e["message"]
        for e in session_lines(parent)
        if e["type"] == "message" and e["message"].get("role") == "toolResult"
    ]


ELAPSED = re.compile(r"(\d+\.\d)s")


def test_call_line_and_a_live_row_whose_elapsed_ticks_while_nothing_happens(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    task = "Count the files in this project and report the total\nsecond line, not shown"
    args = {"task": task, "model": "slow/mock-model"}
    # The child's answer tries to color its text, set the window's title and clear the screen.
    answer = "There are \x1b[31m3\x1b[0m.\x1b]2;PWNED\x07\x1b[2J"
    # The child's model answers once the test has seen the row tick (not after a fixed time).
    answered = threading.Event()
    slow = Script(hold=answered, use_tool=False, final_text=answer)
    with (
        delegating(tmp_path, args, answer="Counted.", slow=slow) as (parent, _),
        contextlib.ExitStack() as stack,
    ):
        stack.callback(answered.set)  # however the test ends, the mock's handler lets go
        pi = PiTui(tmux, parent)
        pi.type("delegate it")
        # The call line: the tool, the mode, the task's first line, the model.
        call = (
            "subagent single Count the files in this project and report the total · slow/mock-model"
        )
        assert on_screen(lambda: pi.shows(call), 60), pi.screen
        assert "second line" not in pi.screen
        # A row for the run: a spinner, its label, counts, an elapsed time; then what it does.
        label = "Count the files in this project and report the total · 0 tools · 0 tok · "
        assert on_screen(lambda: bool(pi.line(label)), 60), pi.screen
        first = pi.line(label)
        assert re.match(r"^ [⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ", first), first
        assert "⎿ Starting" in pi.screen
        # The child waits on its model: no event comes, and the elapsed time goes on.
        start = float(ELAPSED.findall(first)[-1])

        def ticked() -> bool:
            now = ELAPSED.findall(pi.line(label))
            return bool(now) and float(now[-1]) >= start + 2 and "⎿ Starting" in pi.screen

        assert on_screen(ticked, 30), (first, pi.screen)
        answered.set()
        # The end: ✓, the answer as Markdown (none of its escapes), the parent's next turn.
        assert on_screen(lambda: pi.shows("✓ Count the files", "There are 3."), 90), pi.screen
        assert on_screen(lambda: pi.shows("Counted."), 60), pi.screen
        assert all(len(ln) <= COLS for ln in pi.screen.splitlines())
        assert "PWNED" not in tmux("display-message", "-p", "-t", "pi", "#{pane_title}")
        pi.keys("C-o")  # the expanded view draws it whole: still no escape through
        assert on_screen(lambda: pi.shows("transcript: "), 30), pi.screen
        assert "PWNED" not in tmux("display-message", "-p", "-t", "pi", "#{pane_title}")
        assert "Count the files" in pi.capture()  # nothing cleared the screen
    (result,) = tool_results(parent)
    assert result["isError"] is False
    assert result["details"]["runs"][0]["status"] == "completed"
    assert result["content"][0]["text"] == answer  # the model reads what the child said


def test_a_mixed_parallel_call_shows_the_answer_and_the_failure_and_is_not_an_error(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    args = mixed_tasks("Find the entry point", "Summarize the changelog")
    with delegating(tmp_path, args) as (parent, _):
        parent.stand_in(child=replies("It is **main.py**."), broken=fails())
        pi = PiTui(tmux, parent)
        pi.type("delegate both")
        assert on_screen(lambda: pi.shows("subagent parallel \u00d72 Find the entry point"), 60)
        done = ("✓ Find the entry point · scout", "✗ Summarize the changelog · failer · failed")
        assert on_screen(lambda: pi.shows(*done, "1/2 completed · 1 failed"), 120), pi.screen
        # The answer, rendered (no literal **), and the failure's reason, side by side.
        assert "It is main.py." in pi.screen and "500 mock server error" in pi.screen, pi.screen
        assert "**" not in pi.line("It is main.py")
        # Ctrl+O: the failure's post-mortem (its headings drawn, not ##) and the transcripts.
        pi.keys("C-o")
        assert on_screen(lambda: pi.shows("transcript: ", "Error"), 30), pi.screen
        assert not [ln for ln in pi.screen.splitlines() if ln.strip().startswith("## ")]
    (result,) = tool_results(parent)
    assert result["isError"] is False
    text = result["content"][0]["text"]
    assert "It is **main.py**." in text and "500 mock server error" in text
    assert '1 of 2 tasks did not complete: "Summarize the changelog" (failed).' in text
    statuses = [r["status"] for r in result["details"]["runs"]]
    assert statuses == ["completed", "failed"]
    assert result["usage"]["totalTokens"] == result["details"]["usage"]["totalTokens"] > 0


def test_the_widget_follows_a_background_job_and_is_gone_after_it(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    args = {"task": "Tidy the imports", "model": "slow/mock-model", "background": True}
    slow = Script(command="flock -s gate echo tidied")  # (the run waits on the gate)
    with delegating(tmp_path, args, slow=slow) as (parent, _), gate(parent.work) as release:
        pi = PiTui(tmux, parent)
        pi.type("start it in the background")
        widget = ("subagents · 1 background job running", "1 subagent job running")
        assert on_screen(lambda: pi.shows(*widget), 60), pi.screen
        row = pi.line("Tidy the imports", " tok")
        assert re.search(r"^  [⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] \S{10} Tidy the imports · ", row), row
        doing = ("Tidy the imports", "$ flock -s gate echo tidied")
        assert on_screen(lambda: bool(pi.line(*doing)), 60), pi.screen
        release()
        # Its end: a notice (✓, title, stats, a preview, the transcript); the widget is gone.
        ended = ("background subagent job", "ended", "✓ Tidy the imports · completed", "tidied")
        assert on_screen(lambda: pi.shows(*ended, "transcript: "), 120), pi.screen
        assert on_screen(lambda: not pi.shows("subagents · 1 background job running"), 30)
        assert "subagent job running" not in pi.screen
    entries = [
        e["data"]["eventType"]
        for e in session_lines(parent)
        if e["type"] == "custom" and e["customType"] == "agent_event"
    ]
    assert entries == ["subagent:start", "subagent:complete"]


def test_fleet_view_lists_labelled_columns_and_stops_a_job_without_starting_a_turn(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    args = {"task": "Watch the logs", "model": "slow/mock-model", "background": True}
    with delegating(tmp_path, args) as (parent, server):
        parent.stand_in(slow=replies("never", ["sleep", "300"]))
        pi = PiTui(tmux, parent)
        pi.type("start it in the background")
        assert on_screen(lambda: bool(pi.line("Watch the logs", "$ sleep 300")), 90), pi.screen
        assert on_screen(lambda: pi.shows("I ran subagent"), 60)  # the parent's turn is over
        asked = len(server.requests)

        pi.type("/subagents")
        header = COLUMNS
        assert on_screen(lambda: pi.shows("Subagent jobs of this session"), 60), pi.screen
        head = pi.line(*header)
        assert head and all(h in head for h in header), pi.screen
        row = pi.line("Watch the logs", "running")
        assert row and " pi " in row, pi.screen
        # Columns line up under their labels.
        assert row.index("Watch the logs") == head.index("TASK")
        assert row.index("running") == head.index("STATUS")
        pi.keys("Enter")
        assert on_screen(
            lambda: pi.shows("Show the transcript (live", "Send a message", "Stop the job"), 30
        )
        pi.keys("Down")
        pi.keys("Down")
        pi.keys("Enter")
        assert on_screen(lambda: pi.shows("Stop this subagent job?"), 30), pi.screen
        pi.keys("Enter")  # Yes
        assert on_screen(lambda: pi.shows("Stopped subagent job", ": aborted"), 60), pi.screen
        assert on_screen(lambda: pi.shows("■ Watch the logs · aborted"), 60), pi.screen
        assert on_screen(lambda: not pi.shows("1 subagent job running"), 30), pi.screen
        # A turn of our own: one the notice had started would have asked the model first.
        pi.type("what now?")
        assert on_screen(lambda: roles(parent)[-2:] == ["user", "assistant"], 60), pi.screen
        assert len(server.requests) == asked + 1
    lines = session_lines(parent)
    notices = [i for i, e in enumerate(lines) if e["type"] == "custom_message"]
    assert len(notices) == 1 and "(aborted)" in lines[notices[0]]["content"]
    after = [e["message"]["role"] for e in lines[notices[0] :] if e["type"] == "message"]
    assert after == ["user", "assistant"]  # nothing answered the notice: only our prompt
    states = subprocess.run(
        [str(SUBAGENTS), "ps", "--json"], capture_output=True, text=True, timeout=60
    ).stdout
    assert json.loads(states.splitlines()[0])["status"] == "aborted"
