"""Issue 39, item 8: a parent pi whose terminal closes ends its foreground job within 10 s.

The real pi TUI in tmux runs the package, whose ``subagent`` call runs ``subagents run`` in
the foreground (in pi's process group). Closing the terminal (killing the tmux session)
hangs up pi and that command together: the command stops its job as on SIGTERM, so the job
is recorded ``aborted``, with its end entry, at once, not when someone next looks."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.checks import eventually
from support.pi_parent import delegating, needs_pi_parent
from support.pi_tui import PiTui
from support.pistream import replies
from support.sessionlog import end_entries

pytestmark = [
    pytest.mark.e2e,
    needs_pi_parent,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

# The bound the issue sets.
ENDS_WITHIN = 10.0


def job_state(home: Path) -> dict[str, Any] | None:
    jobs = [p for p in (home / "jobs").glob("*") if not p.name.startswith(".")]
    if len(jobs) != 1:
        return None
    with contextlib.suppress(OSError, ValueError):
        state: dict[str, Any] = json.loads((jobs[0] / "job.json").read_text())
        return state
    return None


def test_closing_pi_s_terminal_ends_its_foreground_job_within_10_s(
    tmp_path: Path, tmux: Callable[..., str], isolated_state: Path
) -> None:
    args = {"task": "Count the files slowly", "model": "slow/mock-model"}
    with delegating(tmp_path, args) as (parent, _):
        # The child only waits (a stand-in: what is hung up is the parent and the command).
        parent.stand_in(slow=replies("never", ["sleep", "120"]))
        pi = PiTui(tmux, parent)
        pi.type("delegate it")

        def running() -> bool:
            state = job_state(isolated_state)
            return bool(state and state.get("status") == "running" and state.get("runIds"))

        assert eventually(running, 90), pi.screen
        # The child is running (its command sleeps): close the terminal.
        tmux("kill-session", "-t", "pi")
        closed = time.monotonic()
        # Read the record only (a look such as `ps` would finish a dead driver's job itself).

        def ended() -> bool:
            state = job_state(isolated_state)
            return bool(state and state.get("status") in ("aborted", "failed", "completed"))

        assert eventually(ended, ENDS_WITHIN), job_state(isolated_state)
        took = time.monotonic() - closed
        state = job_state(isolated_state)
        assert state is not None and state["status"] == "aborted", state
        assert len(end_entries(isolated_state, state["jobId"])) == 1
    assert took <= ENDS_WITHIN
