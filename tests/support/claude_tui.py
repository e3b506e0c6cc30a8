"""The real Claude Code TUI (2.1.330) in a tmux pane, with the plugin and the loopback mock
model: what tests type into it, what it shows, and what it handed the model."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from support.checks import on_screen
from support.claude import PLUGIN_SERVER_ENV, strings

REPO = Path(__file__).resolve().parent.parent.parent
PLUGIN = REPO / "integrations" / "claude-code"
TOOL = "mcp__plugin_subagents_subagents__subagent"
PI_PRICE = (3.0, 15.0)  # dollars per million tokens: pi reports a cost with float noise
SCREEN_WAIT = 120.0
PROMPT_MARK = "\u276f"  # the prompt box's mark
STATUS_EVERY = 5  # seconds between the status line's ticks
# How long a key's effect is waited for before the key is pressed again: a lost key costs a
# second, not five; one pressed again after a key that was taken (the screen slow to show
# it) lands in the empty prompt box, where Enter does nothing.
AGAIN = (1, 2, 3, *[5] * 9)
# A test module's marks: end to end, and skipped without the real CLIs.
TUI_MARKS = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        any(shutil.which(cmd) is None for cmd in ("claude", "pi", "tmux")),
        reason="needs claude, pi and tmux",
    ),
]


class ClaudeTUI:
    """``claude`` in a 120x40 tmux pane named ``cc``, in a fresh HOME that trusts the work
    directory and the mock's API key (no first-run dialogs)."""

    def __init__(
        self,
        tmux: Callable[..., str],
        tmp_path: Path,
        url: str,
        *args: str,
        path: str | None = None,
    ) -> None:
        self.tmux = tmux
        self.work = tmp_path / "work"
        self.work.mkdir()
        (self.work / "a.txt").write_text("a\n")
        (self.work / "b.py").write_text("b = 1\n")
        claude_home = tmp_path / "claude"
        env = {
            **mm.write_pi_config(tmp_path / "pi", url, price=PI_PRICE),
            **mm.write_claude_config(claude_home, url, max_retries=0),
            "PATH": path or f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "SUBAGENTS_HOME": os.environ["SUBAGENTS_HOME"],
            **PLUGIN_SERVER_ENV,
        }
        settings = claude_home / ".claude" / "settings.json"
        status_line = {"type": "command", "command": "subagents claude-code statusline"}
        settings.write_text(
            json.dumps(
                {
                    **json.loads(settings.read_text()),
                    # Each tick cancels a status line command still running: the interval
                    # must outlast the command (a Python process: over 1 s under load).
                    "statusLine": {**status_line, "refreshInterval": STATUS_EVERY},
                }
            )
        )
        state = claude_home / ".claude.json"
        config = json.loads(state.read_text())
        config["customApiKeyResponses"] = {"approved": ["x"], "rejected": []}
        config["projects"] = {str(self.work): {"hasTrustDialogAccepted": True}}
        state.write_text(json.dumps(config))
        # Through env(1): tmux 3.3 takes no PATH from new-session -e.
        argv = [
            "env", *(f"{k}={v}" for k, v in env.items()),
            "claude", "--plugin-dir", str(PLUGIN), "--model", mm.CLAUDE_MODEL, *args,
        ]  # fmt: skip
        tmux(
            "new-session", "-d", "-s", "cc", "-x", "120", "-y", "40", "-c", str(self.work),
            "--", *argv,
        )  # fmt: skip
        self.screen = ""
        assert self.shows(PROMPT_MARK), self.screen  # the prompt is up
        if path is not None:
            return
        # The plugin's MCP server connects in the background: wait until /mcp says it did.
        self.type("/mcp")
        assert self.shows("✔ plugin:subagents:subagents"), self.screen
        self.press("Escape")
        assert on_screen(lambda: "MCP servers" not in self.capture(), SCREEN_WAIT), self.screen

    def capture(self) -> str:
        self.screen = self.tmux("capture-pane", "-p", "-J", "-t", "cc", "-S", "-200")
        return self.screen

    def shows(self, *texts: str, timeout: float = SCREEN_WAIT) -> bool:
        return on_screen(lambda: all(t in self.capture() for t in texts), timeout)

    def shows_match(self, pattern: str, timeout: float = SCREEN_WAIT) -> re.Match[str] | None:
        found: list[re.Match[str]] = []

        def look() -> bool:
            match = re.search(pattern, self.capture())
            if match:
                found.append(match)
            return match is not None

        on_screen(look, timeout)
        return found[0] if found else None

    def input_line(self) -> str:
        """The prompt box's line (the last line starting with the prompt mark)."""
        lines = [ln for ln in self.capture().splitlines() if ln.startswith(PROMPT_MARK)]
        return lines[-1] if lines else ""

    def type(self, text: str) -> None:
        """Type ``text`` into the prompt box and submit it. Keys typed in one burst read as a
        paste, whose Enter may be taken into it: Enter again until the box is empty."""
        self.tmux("send-keys", "-t", "cc", "-l", text)
        assert on_screen(lambda: text in self.input_line(), SCREEN_WAIT), self.screen
        for wait in AGAIN:
            self.tmux("send-keys", "-t", "cc", "Enter")
            if on_screen(lambda: text not in self.input_line(), wait):
                return
        raise AssertionError(f"the prompt was not submitted:\n{self.screen}")

    def press(self, key: str) -> None:
        self.tmux("send-keys", "-t", "cc", key)

    def answer(self, dialog: str, key: str = "Enter") -> None:
        """Press ``key`` until the dialog holding ``dialog`` is gone (a key pressed while
        it is still being drawn may be lost)."""
        for wait in AGAIN:
            self.press(key)
            if on_screen(lambda: dialog not in self.capture(), wait):
                return
        raise AssertionError(f"the dialog stayed:\n{self.screen}")


def claude_requests(server: MockModelServer) -> list[dict[str, Any]]:
    """Claude's turns: the requests that offer the plugin's tool (not pi's, nor a title)."""
    return [r for r in server.requests if any(t.get("name") == TOOL for t in r.get("tools") or [])]


def tool_results(server: MockModelServer) -> list[str]:
    """What the model was handed for each call of the plugin's tool, in order."""
    out = []
    for request in claude_requests(server):
        for block in request["messages"][-1].get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append("\n".join(strings(block.get("content"))))
    return list(dict.fromkeys(out))


def tui_session(
    tmux: Callable[..., str], tmp_path: Path
) -> Iterator[Callable[..., tuple[ClaudeTUI, MockModelServer]]]:
    """The body of a ``claude_tui`` fixture: ``start(script, *claude_args)`` serves ``script``
    from the mock model and starts claude on it; both end with the fixture."""
    servers: list[MockModelServer] = []

    def start(
        script: Script, *args: str, path: str | None = None
    ) -> tuple[ClaudeTUI, MockModelServer]:
        server = MockModelServer(script).__enter__()
        servers.append(server)
        return ClaudeTUI(tmux, tmp_path, server.url, *args, path=path), server

    yield start
    tmux("kill-session", "-t", "cc")  # claude ends its MCP server and monitor with it
    for server in servers:
        server.__exit__(None, None, None)
