"""pi's TUI in a real terminal (tmux, capture-pane), as the pi package's screen tests see it."""

from __future__ import annotations

import time
from collections.abc import Callable

from support.checks import on_screen
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
        assert on_screen(self.drawn, 60), self.screen

    def drawn(self) -> bool:
        """pi's footer spans the window: its line ending in the model's name ends at the
        window's edge. pi draws the whole screen top to bottom, the footer near its end, so
        once it is there at this width, what is above it is drawn at this width too (tmux
        rewraps what was drawn wider into shorter lines, never into one of this width)."""
        return any(
            len(ln) == self.cols and ln.endswith("mock-model") for ln in self.capture().splitlines()
        )

    def resize(self, cols: int) -> None:
        """The window made ``cols`` wide, as a person drags it; back once pi has drawn
        everything again at that width (a change of width redraws the whole session)."""
        self.tmux("resize-window", "-t", "pi", "-x", str(cols))
        self.cols = cols
        assert on_screen(self.drawn, 30), self.screen

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
