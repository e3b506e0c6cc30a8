"""pi's TUI in a real terminal (tmux, capture-pane), as the pi package's screen tests see it."""

from __future__ import annotations

import time
from collections.abc import Callable

from support.checks import eventually
from support.pi_parent import EXTENSION, Parent

COLS, ROWS = 120, 40


class PiTui:
    """pi's TUI in a tmux window named ``pi`` (120x40 unless told); ``shows`` captures the
    screen (and the scrollback) into ``screen`` and says whether every text is in it."""

    def __init__(
        self, tmux: Callable[..., str], parent: Parent, cols: int = COLS, rows: int = ROWS
    ) -> None:
        self.tmux = tmux
        self.parent = parent
        self.cols = cols
        self.screen = ""
        argv = ["pi", "--provider", "mock", "--model", "mock-model"]
        argv += ["--session-dir", str(parent.sessions), "-e", str(EXTENSION)]
        tmux(
            "new-session", "-d", "-s", "pi", "-x", str(cols), "-y", str(rows),
            "-c", str(parent.work), "--", *argv, env=parent.env,
        )  # fmt: skip
        tmux("set-option", "-w", "-t", "pi", "remain-on-exit", "on")
        assert eventually(lambda: self.shows("mock-model"), 60), self.screen

    def capture(self) -> str:
        self.screen = self.tmux("capture-pane", "-p", "-t", "pi", "-S", "-200")
        return self.screen

    def shows(self, *texts: str) -> bool:
        screen = self.capture()
        return all(t in screen for t in texts)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "pi", "-l", text)
        time.sleep(0.3)  # the editor takes the text in before Enter
        self.keys("Enter")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "pi", *keys)

    def line(self, *texts: str) -> str:
        """The (last) screen line holding every text, "" if none does."""
        found = [ln for ln in self.capture().splitlines() if all(t in ln for t in texts)]
        return found[-1] if found else ""
