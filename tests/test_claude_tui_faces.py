"""What the Claude Code plugin shows and hands over, in the real Claude Code TUI (2.1.330) in
tmux against the loopback mock model (the jobs run the real pi CLI on the same mock): a
finished foreground call's outcome line on screen, a background end naming its task,
``/subagents:jobs stop`` stopping a job without a model turn, and a structured answer
reaching the model as parsed JSON."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.checks import eventually
from support.claude_tui import (
    SCREEN_WAIT,
    TOOL,
    TUI_MARKS,
    ClaudeTUI,
    claude_requests,
    tool_results,
    tui_session,
)

from subagents import service
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.service import JobStore

pytestmark = TUI_MARKS
SCREENS = os.environ.get("SUBAGENTS_TEST_SCREENS")  # a directory to keep the screens in


@pytest.fixture
def claude_tui(
    tmux: Callable[..., str], tmp_path: Path
) -> Iterator[Callable[..., tuple[ClaudeTUI, MockModelServer]]]:
    yield from tui_session(tmux, tmp_path)


def keep(name: str, screen: str) -> None:
    if SCREENS:
        Path(SCREENS, f"{name}.txt").write_text(screen)


def test_a_foreground_call_shows_its_outcome_and_jobs_stop_stops_a_background_job(
    claude_tui: Callable[..., tuple[ClaudeTUI, MockModelServer]],
) -> None:
    """One Claude Code session: a finished foreground call's outcome line and its structured
    answer, parsed; then a background job, listed while it runs and stopped by
    ``/subagents:jobs stop``."""
    schema = {
        "type": "object",
        "properties": {"files": {"type": "string"}},
        "required": ["files"],
    }
    task = {
        "task": "list the files",
        "backend": "pi",
        "model": mm.OPENCODE_MODEL,
        "output_schema": schema,
    }
    script = Script(
        command="ls",
        final_text='{"files": "{tool_output}"}',
        per_api={mm.ANTHROPIC: Script(tool_name=TOOL, tool_args=task, final_text="Listed.")},
    )
    cc, server = claude_tui(script, f"--allowedTools={TOOL}")
    cc.type("List the files with a pi subagent.")
    # Claude Code shows the call as "Called plugin:subagents:subagents"; the turn's end
    # says how it went: status, time, tokens, cost and the job.
    line = cc.shows_match(
        r"subagents: ✓ completed · pi · \d+\.\ds · \d+ tokens · \$0\.000\d{1,2} · job [0-9a-z-]+"
    )
    assert line, cc.screen
    keep("foreground", cc.screen)
    assert cc.screen.index("Called plugin:subagents:subagents") < cc.screen.index(line.group(0))
    # The model got the answer parsed, as the tool's description says.
    (result,) = tool_results(server)
    view = json.loads(result.split("\n\n<system-reminder>")[0])
    assert view["answer"] == {"files": "a.txt, b.py"}, view
    assert view["status"] == "completed" and view["jobId"] in line.group(0)
    assert cc.shows("Listed."), cc.screen

    # A background job that works until stopped: the model's second call of the tool (its
    # script calls it while the conversation holds fewer than two tool results).
    background = {
        "task": "wait a long while",
        "backend": "pi",
        "model": mm.OPENCODE_MODEL,
        "background": True,
    }
    server.script = Script(
        command="sleep 300",
        final_text="never",
        per_api={
            mm.ANTHROPIC: Script(
                tool_name=TOOL,
                tool_args=background,
                final_text="Started.",
                loop=True,
                loop_limit=2,
                heed_messages=False,
            )
        },
    )
    cc.type("Start a long background pi job.")
    assert cc.shows("Started."), cc.screen
    # (The model is handed the first call's result again with each turn.)
    views = [json.loads(r.split("\n\n<system-reminder>")[0]) for r in tool_results(server)]
    (job_id,) = {v["jobId"] for v in views} - {view["jobId"]}
    store = JobStore()

    def sleeping() -> bool:  # running its tool
        runs = service.job_state(store, job_id).get("runIds") or []
        return "sleep 300" in (service.current_activity(store.home, runs) or "")

    assert eventually(sleeping, SCREEN_WAIT), service.job_state(store, job_id)
    turns = len(claude_requests(server))

    # The listing, while it runs: its tokens and cost so far, not "-".
    cc.type("/subagents:jobs")
    assert cc.shows("Subagents jobs of this session:"), cc.screen
    listing = cc.screen[cc.screen.rindex("Subagents jobs of this session:") :]
    row = next((ln for ln in listing.splitlines() if job_id in ln), "")
    assert "running" in row and re.search(r" \d+ +\$0\.000\d{1,2} ", row), cc.screen
    keep("jobs-list-running", cc.screen)

    cc.type(f"/subagents:jobs stop {job_id}")
    stopped = cc.shows_match(rf"Stopped: ■ job {job_id} aborted · pi · [^\n]*")
    assert stopped, cc.screen
    keep("jobs-stop", cc.screen)
    state = service.job_state(store, job_id)
    assert state["status"] == "aborted"
    # Neither command was a model turn, and the stop is no news to the model (no notice).
    assert not eventually(lambda: len(claude_requests(server)) > turns, 5)
    assert "Monitor event" not in cc.capture(), cc.screen
