"""The session log and the Claude Code hook as tests read and drive them: the end entries
a job left, a job result and its entry, ``subagents notices --claude-hook``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from subagents.lifecycle import sessionlog
from support.cli import invoke


def end_entries(home: Path, job_id: str) -> list[dict[str, Any]]:
    out = []
    for log in (home / "sessions").glob("*.jsonl"):
        for line in log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("jobId") == job_id and entry.get("eventType") != "subagent:start":
                    out.append(entry)
    return out


SUBAGENTS = str(Path(sys.executable).parent / "subagents")


CLAUDE_ID = "6a0ecfc5-d5f9-4431-b6aa-bcd88b65e383"


def sub(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, here: bool = False
) -> subprocess.CompletedProcess[str]:
    """``subagents ARGS`` as Claude Code runs it (the console script), or ``here``: the same
    command in this process (``support.cli.invoke``), where the process is not the point."""
    if here:
        return invoke(list(args), env, input=stdin)
    return subprocess.run(
        [SUBAGENTS, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def job_result(job_id: str, answer: str, cost: float | None = 0.0125) -> dict[str, Any]:
    return {
        "jobId": job_id,
        "mode": "single",
        "status": "completed",
        "durationMs": 3400,
        "usage": {"input": 20, "output": 10, "totalTokens": 30, "cost": cost},
        "runs": [{"agent": "scout", "backend": "pi", "status": "completed", "finalText": answer}],
    }


def end_entry(job_id: str, answer: str, cost: float | None = 0.0125) -> dict[str, Any]:
    return sessionlog.entry_for_job(job_result(job_id, answer, cost))


def hook(home: Path, prompt: str = "hi", *, here: bool = False) -> subprocess.CompletedProcess[str]:
    payload = {"session_id": CLAUDE_ID, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    return sub("notices", "--claude-hook", stdin=json.dumps(payload), here=here)


def claude_monitor(claude_pid: int) -> subprocess.Popen[str]:
    """The plugin's monitor for the test session, as Claude Code (``claude_pid``) starts it:
    its lines on ``stdout``."""
    return subprocess.Popen(
        [SUBAGENTS, "claude-code", "monitor"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CLAUDE_CODE_SESSION_ID": CLAUDE_ID, "CLAUDE_PID": str(claude_pid)},
    )
