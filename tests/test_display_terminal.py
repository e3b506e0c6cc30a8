"""On a terminal the live display draws at a bounded rate, whatever the number of events,
and still shows what must be seen: the real CLI with its stderr on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from support import pistream as pi
from support.fake import Fake
from support.ptyterm import Terminal

from subagents.cli.display import BURST, KEEP, REFRESH_PER_SECOND, Pending

CLI = [sys.executable, "-m", "subagents.cli"]
ERASE_LINE = b"\x1b[2K"  # rich's live status erases its line(s) before each redraw
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_pty(args: list[str], env: dict[str, str]) -> tuple[int, str, bytes, float]:
    """The CLI with stderr on a 100x30 pty: exit code, stdout, what the terminal got, wall."""
    with Terminal(cols=100, rows=30) as term:
        env = {**os.environ, **env, **term.env()}
        env.pop("NO_COLOR", None)
        t0 = time.monotonic()
        proc = subprocess.run(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=term.slave,
            env=env,
            timeout=120,
        )
        wall = time.monotonic() - t0
    return proc.returncode, proc.stdout.decode(), term.output, wall


def burst(fake: Fake, calls: int) -> list[dict[str, Any]]:
    """``calls`` tool calls (2 events each) as fast as the fake agent can write them."""
    lines = []
    for i in range(calls):
        cid = f"c{i}"
        lines.append(
            {
                "type": "tool_execution_start",
                "toolCallId": cid,
                "toolName": "bash",
                "args": {"command": f"echo step-{i}"},
            }
        )
        lines.append(
            {
                "type": "tool_execution_end",
                "toolCallId": cid,
                "toolName": "bash",
                "result": {"content": [{"type": "text", "text": "ok"}]},
                "isError": False,
            }
        )
    path = fake.dir / "burst.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return [{"replay": str(path)}]


@pytest.mark.process
def test_a_burst_of_events_is_drawn_at_a_bounded_rate_and_ends_on_the_last_state(
    fake: Fake,
) -> None:
    calls = 5000  # 10k tool events
    steps = [*pi.start(), *burst(fake, calls), pi.text_end("All finished here."), *pi.end()]
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}
    code, out, term, wall = run_on_pty(["run", "do it"], env)
    text = ANSI.sub("", term.decode(errors="replace")).replace("\r", "")
    assert code == 0, text[-2000:]
    assert out == "All finished here.\n"

    # Draws: bounded by the time the run took, not by its 10k events (rich's status
    # erases its line before each redraw; a draw without lines is a redraw alone).
    draws = term.count(ERASE_LINE)
    assert 1 <= draws <= REFRESH_PER_SECOND * wall + 5, (draws, wall)
    # Each draw prints at most BURST lines, or a coalesced window's few.
    printed = [line for line in text.split("\n") if line.strip()]
    assert len(printed) <= (draws + 1) * (BURST + KEEP + 2) + 10
    assert len(printed) < calls  # main printed a line per event: 10k and more

    # What must be seen is there, in order: the start, lines left out counted, the last
    # activity (the answer) before the end, the end, and the outcome with every tool.
    assert "Started pi" in text
    left_out = [int(n.replace(",", "")) for n in re.findall(r"\(\+([\d,]+) more\)", text)]
    assert left_out and sum(left_out) <= 2 * calls
    end = text.index("Finished: completed")
    assert text.rindex("All finished here.", 0, end) > text.rindex("more)", 0, end)
    assert re.search(rf"completed .*· {calls} tools", text), text[-500:]


@pytest.mark.process
def test_a_slow_run_shows_every_line(fake: Fake) -> None:
    steps = [
        *pi.start(),
        *pi.tool_use("c1", "ls -la"),
        *pi.tool_end("c1"),
        *pi.tool_use("c2", "git status"),
        *pi.tool_end("c2"),
        pi.text_end("Done."),
        *pi.end(),
    ]
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(steps)}
    code, out, term, _ = run_on_pty(["run", "do it"], env)
    text = ANSI.sub("", term.decode(errors="replace"))
    assert code == 0 and out == "Done.\n"
    for line in ("Started pi", "$ ls -la", "$ git status", "Finished: completed"):
        assert line in text
    assert "more)" not in text


# ---- the window of one draw, alone ------------------------------------------------


def test_a_few_lines_are_all_printed_in_order() -> None:
    window = Pending()
    for i in range(BURST):
        window.add(i % 2, f"line {i}", must_show=False)
    assert window.take() == [(i % 2, f"line {i}", False) for i in range(BURST)]
    assert not window and window.take() == []


def test_a_coalesced_window_keeps_what_must_be_seen_and_each_runs_latest_line() -> None:
    window = Pending()
    window.add(0, "Started pi", must_show=True)
    for i in range(1000):
        window.add(0, f"$ step {i}", must_show=False)
        window.add(1, f"$ other {i}", must_show=False)
        if i == 500:
            window.add(1, "Error: boom", must_show=True)
    window.add(0, "Finished: completed", must_show=True)
    assert window.take() == [
        (0, "Started pi", False),
        (1, "Error: boom", False),
        (0, "(+999 more)", True),
        (0, "$ step 999", False),
        (1, "(+999 more)", True),
        (1, "$ other 999", False),
        (0, "Finished: completed", False),
    ]


def test_a_window_holds_a_bounded_number_of_lines() -> None:
    window = Pending()
    for i in range(100_000):
        window.add(i % 3, f"notice {i}", must_show=True)
    lines = window.take()
    # KEEP must-show lines, then each run's marker and latest line.
    assert len(lines) == KEEP + 3 * 2
    markers = [int(line[2:-6].replace(",", "")) for _, line, m in lines if m]
    assert sum(markers) + KEEP + 3 == 100_000
