"""The Claude Code plugin in the real Claude Code TUI (2.1.330): ``claude`` runs in a tmux pane
(120x40, private tmux server) with ``--plugin-dir integrations/claude-code`` against the
loopback mock model; the jobs the plugin's MCP tool starts run the real pi CLI on the same
mock. Only the model is fake: what is asserted is what Claude Code shows and what it hands
the model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.checks import eventually, on_screen
from support.claude import last_user_text
from support.claude_tui import (
    SCREEN_WAIT,
    TOOL,
    TUI_MARKS,
    ClaudeTUI,
    claude_requests,
    tool_results,
    tui_session,
)
from support.gate import gate

from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script

pytestmark = TUI_MARKS


@pytest.fixture
def claude_tui(
    tmux: Callable[..., str], tmp_path: Path
) -> Iterator[Callable[..., tuple[ClaudeTUI, MockModelServer]]]:
    """``start(script, *claude_args)``: the mock model serving ``script``, and claude on it."""
    yield from tui_session(tmux, tmp_path)


def open_gate(fifo: Path) -> None:
    """Let a ``cat`` of ``fifo`` end: a writer opens it once a reader waits, and closes it."""

    def opened() -> bool:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # (ENXIO: no reader yet)
            return False
        return True

    eventually(opened, SCREEN_WAIT)


NOISY_COST = re.compile(r"\$\d+\.\d{7,}")  # float noise: 0.00020999999999999998


def test_a_background_job_shows_its_end_wakes_the_session_and_lists_with_its_task(
    claude_tui: Callable[..., tuple[ClaudeTUI, MockModelServer]], tmp_path: Path
) -> None:
    """Then, in the same session, a parallel call's progress for every run (below)."""
    # The job's tool call waits on a pipe (`cat` of a FIFO) until the test has seen the status
    # line show it: however slow the machine, the job is running when the line ticks.
    gate = tmp_path / "go"  # (claude, and so pi, works in tmp_path / "work")
    os.mkfifo(gate)
    task = {
        "task": "list the files",
        "backend": "pi",
        "model": mm.OPENCODE_MODEL,
        "timeout": 120,
        "background": True,
    }
    script = Script(
        command="cat ../go; ls",
        final_text="pi listed: {tool_output}",
        per_api={mm.ANTHROPIC: Script(tool_name=TOOL, tool_args=task, final_text="Noted.")},
    )
    cc, server = claude_tui(script)
    assert "SessionStart" not in cc.screen, cc.screen  # the MCP server can start: no warning

    cc.type("Start a background pi job to list the files.")
    # The permission dialog names the tool by its title, whole.
    assert cc.shows("Do you want to proceed?", "plugin:subagents:subagents — Run a subagent"), (
        cc.screen
    )
    cc.answer("Do you want to proceed?")  # 1. Yes

    # The model's view of the call: the job id and how to follow it.
    assert eventually(lambda: tool_results(server), SCREEN_WAIT), cc.capture()
    (started,) = tool_results(server)
    view = json.loads(started.split("\n\n<system-reminder>")[0])  # the structured content
    job_id = view["jobId"]
    assert f'subagent_result(job_id="{job_id}", wait_seconds=' in view["follow"], view
    assert f'subagent_status(job_id="{job_id}")' in view["follow"], view
    turns = len(claude_requests(server))
    # While it runs, the status line (the user's, from `subagents claude-code statusline`)
    # shows it and what it does.
    try:
        assert cc.shows(f"subagents: 1 running · {job_id}: $ cat ../go; ls"), cc.screen
    finally:
        open_gate(gate)

    # The job's end shows on screen, worded as the command line ends a job, cost rounded...
    end = cc.shows_match(
        # (the screen cuts the line at its width: the model gets it whole, answer and all)
        rf"Monitor event: ✓ job {job_id} \(list the files\) · pi · [^\n]*\"pi listed: a\.txt, b\."
    )
    assert end, cc.screen
    line = end.group(0)
    assert re.search(r" · \d+ tokens · \$0\.000\d{1,2} · ", line), line
    # ...and wakes the session: the model gets the end without a user prompt, and answers.
    assert eventually(lambda: len(claude_requests(server)) > turns, SCREEN_WAIT), cc.capture()
    woken = last_user_text(claude_requests(server)[turns])
    assert "<task-notification>" in woken and f"✓ job {job_id} (list the files) · pi · " in woken
    # ...with the whole answer: no call needed to read it.
    assert 'answer: "pi listed: a.txt, b.py"' in woken, woken
    assert "Start a background" not in woken  # no prompt of the user's in that turn
    assert on_screen(
        lambda: cc.capture().rfind("Noted.") > cc.screen.find("Monitor event:"), SCREEN_WAIT
    ), cc.screen

    # The documented command lists the session's jobs, with their tasks, on screen at once.
    cc.type("/subagents:jobs")
    assert cc.shows("Subagents jobs of this session:"), cc.screen
    listing = cc.screen[cc.screen.index("Subagents jobs of this session:") :]
    row = next((ln for ln in listing.splitlines() if job_id in ln), "")
    assert "pi" in row and "completed" in row and "list the files" in row, cc.screen
    assert re.search(r"\$0\.000\d{1,2}\b", row), row
    # The model gets the list too (and is told it was shown).
    assert eventually(
        lambda: any("list the files" in last_user_text(r) and job_id in last_user_text(r)
                    for r in claude_requests(server)),
        SCREEN_WAIT,
    ), cc.capture()  # fmt: skip
    assert not NOISY_COST.search(cc.capture()), cc.screen
    a_parallel_call_shows_progress_for_every_run(cc, server, job_id)


def a_parallel_call_shows_progress_for_every_run(
    cc: ClaudeTUI, server: MockModelServer, job_id: str
) -> None:
    """The model's second call of the tool in the session (its script calls it while the
    conversation holds fewer than two tool results): two pi runs side by side, after the
    background job ``job_id``."""
    tasks = [
        {"task": "first", "backend": "pi", "model": mm.OPENCODE_MODEL},
        {"task": "second", "backend": "pi", "model": mm.OPENCODE_MODEL},
    ]
    # Each pi run's command waits on the test's gate (beside the work directory: `ls` lists
    # the work alone) until the screen has shown both at work.
    server.script = Script(
        command="flock -s ../gate ls",
        final_text="pi listed: {tool_output}",
        per_api={
            mm.ANTHROPIC: Script(
                tool_name=TOOL,
                tool_args={"tasks": tasks},
                final_text="Both done.",
                loop=True,
                loop_limit=2,
                heed_messages=False,
            )
        },
    )
    with gate(cc.work.parent):
        cc.type("Run two pi jobs side by side.")
        assert cc.shows("Do you want to proceed?"), cc.screen
        cc.answer("Do you want to proceed?")  # 1. Yes
        # One progress message says what both runs do.
        gated = r"\$ flock -s \.\./gate ls"
        both = cc.shows_match(rf"\[1\] {gated} · \[2\] {gated}")
        assert both, cc.screen
    assert cc.shows("Both done."), cc.screen
    # The model's view: both answers first, then the status line; costs rounded.
    # (The model is handed the first call's result again with each turn: this one is new.)
    result = tool_results(server)[-1]
    assert not NOISY_COST.search(result), result
    view = json.loads(result.split("\n\n<system-reminder>")[0])
    assert view["jobId"] != job_id, view
    assert view["answer"] == ["pi listed: a.txt, b.py"] * 2, view
    assert view["summary"].startswith("✓ completed · parallel · pi · "), view


def test_without_subagents_on_path_the_session_says_so_once(
    claude_tui: Callable[..., tuple[ClaudeTUI, MockModelServer]],
) -> None:
    claude = shutil.which("claude")
    assert claude is not None
    path = os.pathsep.join([str(Path(claude).parent), "/usr/bin", "/bin"])
    if shutil.which("subagents", path=path):
        pytest.skip("a subagents command is installed system-wide")
    cc, _ = claude_tui(Script(use_tool=False, final_text="Hello there."), path=path)
    said = (
        "SessionStart:startup says: subagents plugin: the `subagents` command is not on your PATH"
    )
    assert cc.shows(said, "pipx install"), cc.screen
    for n, prompt in enumerate(("hello", "and again"), 1):
        cc.type(prompt)
        assert on_screen(lambda n=n: cc.capture().count("Hello there.") == n, SCREEN_WAIT), (
            cc.screen
        )
    # Said once; no hook fails on each prompt, and the monitor does not end with a notice.
    assert cc.screen.count("is not on your PATH") == 1, cc.screen
    assert "hook failed" not in cc.screen and "Monitor" not in cc.screen, cc.screen
    assert "1 monitor" in cc.screen, cc.screen  # it waits, silent
