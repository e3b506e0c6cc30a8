"""Off a terminal the progress lines skip rich, and read exactly as rich printed them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from subagents.cli.display import Display

CALL = {"type": "tool_call", "toolCallId": "c1", "toolName": "bash"}


def _console(buf: io.StringIO) -> Console:
    return Console(file=buf, highlight=False, soft_wrap=True)


@pytest.mark.parametrize("labels", [["scout"], ["scout", "worker"]])
@pytest.mark.parametrize(
    "command",
    ["ls -la src", "printf 'a\\tb'\tx", "bash -lc 'cd /w && npm test'", "echo ✓ ünïcode ⚠"],
)
def test_plain_lines_are_what_rich_printed(labels: list[str], command: str) -> None:
    event = {**CALL, "args": {"command": command}}
    out = io.StringIO()
    display = Display(labels=labels, console=_console(out))
    assert not display.live_mode
    display.event(0, event)
    # What the display printed through rich before: the same formatter's line, as a Text.
    expected = io.StringIO()
    line = Display(labels=labels, console=_console(io.StringIO())).runs[0].fmt.line(event)
    assert line
    prefix = "[1] scout: " if len(labels) > 1 else ""
    _console(expected).print(Text(prefix) + Text(line))
    assert out.getvalue() == expected.getvalue()
    assert out.getvalue().strip()


def test_a_quiet_display_prints_nothing() -> None:
    out = io.StringIO()
    Display(enabled=False, console=_console(out)).event(0, {**CALL, "args": {"command": "ls"}})
    assert out.getvalue() == ""
