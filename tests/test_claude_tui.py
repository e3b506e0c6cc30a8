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
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.checks import eventually
from support.claude import last_user_text, strings

from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "integrations" / "claude-code"
TOOL = "mcp__plugin_subagents_subagents__subagent"
PI_PRICE = (3.0, 15.0)  # dollars per million tokens: pi reports a cost with float noise
SCREEN_WAIT = 120.0
PROMPT_MARK = "\u276f"  # the prompt box's mark
STATUS_EVERY = 5  # seconds between the status line's ticks

pytestmark = [
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
            "ENABLE_TOOL_SEARCH": "false",  # offer MCP tools at once (a mock cannot search)
            "MCP_CONNECTION_NONBLOCKING": "false",  # the plugin's server is up before prompt 1
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
        assert eventually(lambda: "MCP servers" not in self.capture(), SCREEN_WAIT), self.screen

    def capture(self) -> str:
        self.screen = self.tmux("capture-pane", "-p", "-J", "-t", "cc", "-S", "-200")
        return self.screen

    def shows(self, *texts: str, timeout: float = SCREEN_WAIT) -> bool:
        return eventually(lambda: all(t in self.capture() for t in texts), timeout)

    def shows_match(self, pattern: str, timeout: float = SCREEN_WAIT) -> re.Match[str] | None:
        found: list[re.Match[str]] = []

        def look() -> bool:
            match = re.search(pattern, self.capture())
            if match:
                found.append(match)
            return match is not None

        eventually(look, timeout)
        return found[0] if found else None

    def input_line(self) -> str:
        """The prompt box's line (the last line starting with the prompt mark)."""
        lines = [ln for ln in self.capture().splitlines() if ln.startswith(PROMPT_MARK)]
        return lines[-1] if lines else ""

    def type(self, text: str) -> None:
        """Type ``text`` into the prompt box and submit it. Keys typed in one burst read as a
        paste, whose Enter may be taken into it: Enter again until the box is empty."""
        self.tmux("send-keys", "-t", "cc", "-l", text)
        assert eventually(lambda: text in self.input_line(), SCREEN_WAIT), self.screen
        for _ in range(10):
            self.tmux("send-keys", "-t", "cc", "Enter")
            if eventually(lambda: text not in self.input_line(), 5):
                return
        raise AssertionError(f"the prompt was not submitted:\n{self.screen}")

    def press(self, key: str) -> None:
        self.tmux("send-keys", "-t", "cc", key)

    def answer(self, dialog: str, key: str = "Enter") -> None:
        """Press ``key`` until the dialog holding ``dialog`` is gone (a key pressed while
        it is still being drawn may be lost)."""
        for _ in range(10):
            self.press(key)
            if eventually(lambda: dialog not in self.capture(), 5):
                return
        raise AssertionError(f"the dialog stayed:\n{self.screen}")


@pytest.fixture
def claude_tui(
    tmux: Callable[..., str], tmp_path: Path
) -> Iterator[Callable[..., tuple[ClaudeTUI, MockModelServer]]]:
    """``start(script, *claude_args)``: the mock model serving ``script``, and claude on it."""
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


def open_gate(fifo: Path) -> None:
    """Let a ``cat`` of ``fifo`` end: a writer opens it once a reader waits, and closes it."""

    def opened() -> bool:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # (ENXIO: no reader yet)
            return False
        return True

    eventually(opened, SCREEN_WAIT)


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


NOISY_COST = re.compile(r"\$\d+\.\d{7,}")  # float noise: 0.00020999999999999998


def test_a_background_job_shows_its_end_wakes_the_session_and_lists_with_its_task(
    claude_tui: Callable[..., tuple[ClaudeTUI, MockModelServer]], tmp_path: Path
) -> None:
    task = {
        "task": "list the files",
        "backend": "pi",
        "model": mm.OPENCODE_MODEL,
        "timeout": 120,
        "background": True,
    }
    # The job's tool call waits on a pipe (`cat` of a FIFO) until the test has seen the status
    # line show it: however slow the machine, the job is running when the line ticks.
    gate = tmp_path / "go"  # (claude, and so pi, works in tmp_path / "work")
    os.mkfifo(gate)
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
        rf"Monitor event: ✓ job {job_id} · pi · [^\n]*\"pi listed: a\.txt, b\.py\""
    )
    assert end, cc.screen
    line = end.group(0)
    assert re.search(r" · \d+ tokens · \$0\.000\d{1,2} · ", line), line
    # ...and wakes the session: the model gets the end without a user prompt, and answers.
    assert eventually(lambda: len(claude_requests(server)) > turns, SCREEN_WAIT), cc.capture()
    woken = last_user_text(claude_requests(server)[turns])
    assert "<task-notification>" in woken and f"✓ job {job_id} · pi · " in woken, woken
    assert "Start a background" not in woken  # no prompt of the user's in that turn
    assert eventually(
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


def test_a_parallel_call_shows_progress_for_every_run(
    claude_tui: Callable[..., tuple[ClaudeTUI, MockModelServer]],
) -> None:
    tasks = [
        {"task": "first", "backend": "pi", "model": mm.OPENCODE_MODEL},
        {"task": "second", "backend": "pi", "model": mm.OPENCODE_MODEL},
    ]
    script = Script(
        command="sleep 8; ls",  # each pi run works a while: its progress is on screen meanwhile
        final_text="pi listed: {tool_output}",
        per_api={
            mm.ANTHROPIC: Script(
                tool_name=TOOL, tool_args={"tasks": tasks}, final_text="Both done."
            )
        },
    )
    cc, server = claude_tui(script, f"--allowedTools={TOOL}")
    cc.type("Run two pi jobs side by side.")
    # One progress message says what both runs do.
    both = cc.shows_match(r"\[1\] \$ sleep 8; ls · \[2\] \$ sleep 8; ls")
    assert both, cc.screen
    assert cc.shows("Both done."), cc.screen
    # The model's view: both answers first, then the status line; costs rounded.
    (result,) = tool_results(server)
    assert not NOISY_COST.search(result), result
    view = json.loads(result.split("\n\n<system-reminder>")[0])
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
        assert eventually(lambda n=n: cc.capture().count("Hello there.") == n, SCREEN_WAIT), (
            cc.screen
        )
    # Said once; no hook fails on each prompt, and the monitor does not end with a notice.
    assert cc.screen.count("is not on your PATH") == 1, cc.screen
    assert "hook failed" not in cc.screen and "Monitor" not in cc.screen, cc.screen
    assert "1 monitor" in cc.screen, cc.screen  # it waits, silent
