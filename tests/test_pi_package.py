"""The pi package (integrations/pi) end to end: the real pi 0.87 as the parent, loading the
package with ``-e``, scripted by the mock model to call the ``subagent`` tool; the tool runs
the real ``subagents`` CLI, whose children are real pi runs against the same mock (or a
second, broken or slow, mock as their own provider).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from subagents.demo.mockmodel import MockModelServer, Script, pi_argv, write_pi_config

REPO = Path(__file__).resolve().parent.parent
EXTENSION = REPO / "integrations" / "pi" / "index.ts"
SUBAGENTS = Path(sys.executable).with_name("subagents")
CHILD_ANSWER = "Hello from the mock model."


def _pi_version() -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            ["pi", "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return tuple(int(x) for x in out.stdout.strip().split("."))
    except ValueError:
        return None


_VERSION = _pi_version()
pytestmark = pytest.mark.skipif(
    _VERSION is None or _VERSION < (0, 87) or not SUBAGENTS.exists(),
    reason="needs pi >= 0.87 on PATH (with Node >= 22) and the subagents CLI in the venv",
)


def add_provider(agent_dir: Path, name: str, base_url: str) -> None:
    """A second provider in the parent's models.json: children given ``name/mock-model``
    talk to another mock server."""
    path = agent_dir / "models.json"
    models = json.loads(path.read_text())
    models["providers"][name] = {**models["providers"]["mock"], "baseUrl": base_url + "/v1"}
    path.write_text(json.dumps(models))


class Parent:
    """A pi parent against ``server``, with the package loaded and a session directory."""

    def __init__(self, tmp: Path, server: MockModelServer) -> None:
        self.tmp = tmp
        self.work = tmp / "project"
        self.work.mkdir(exist_ok=True)
        self.agent_dir = tmp / "pi-agent"
        self.sessions = tmp / "sessions"
        self.env = {
            **os.environ,
            **write_pi_config(self.agent_dir, server.url, retry={"enabled": False}),
            "SUBAGENTS_BIN": str(SUBAGENTS),
        }
        self.env.pop("PI_SUBAGENTS_CHILD", None)

    def run(self, prompt: str, *extra: str) -> list[dict[str, Any]]:
        argv = pi_argv(prompt)
        argv.remove("--no-session")
        argv[-1:-1] = ["--session-dir", str(self.sessions), "-e", str(EXTENSION), *extra]
        p = subprocess.run(
            argv,
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]

    def session_file(self) -> Path:
        files = list(self.sessions.rglob("*.jsonl"))
        assert len(files) == 1, files
        return files[0]

    def agent_events(self) -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in self.session_file().read_text().splitlines() if x]
        return [
            e["data"] for e in lines if e["type"] == "custom" and e["customType"] == "agent_event"
        ]


def tool_end(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "tool_execution_end")


START_FIELDS = {"eventType", "jobId", "requestedBy", "agentName", "mode", "pid", "startedAt"}
END_FIELDS = START_FIELDS | {
    "completedAt",
    "durationMs",
    "model",
    "usage",
    "status",
    "summary",
    "runDir",
}
PI_USAGE = {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}


def test_parent_pi_delegates_with_live_progress_result_and_lifecycle_entries(
    tmp_path: Path,
) -> None:
    args = {"task": "say hello", "model": "mock/mock-model"}
    with MockModelServer(Script(tool_name="subagent", tool_args=args)) as server:
        parent = Parent(tmp_path, server)
        events = parent.run("delegate it")

    # Live progress: the engine's humanized lines, the same words as the run's transcript.
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    texts = [u["partialResult"]["content"][0]["text"] for u in updates]
    assert texts[0] == "Started pi (mock/mock-model)"
    assert CHILD_ANSWER in texts
    assert texts[-1].startswith("Finished: completed")
    details = updates[-1]["partialResult"]["details"]
    run_id = details["runIds"][0]
    assert details["jobId"] and details["runs"][0]["usage"]["totalTokens"] == 15
    transcript = (
        Path(os.environ["SUBAGENTS_HOME"]) / "runs" / run_id / "transcript.md"
    ).read_text()
    assert all(t in transcript for t in texts)

    # The result: the child's answer, its usage in pi's shape; the parent's next turn saw it.
    end = tool_end(events)
    assert end["isError"] is False
    assert end["result"]["content"][0]["text"] == CHILD_ANSWER
    assert set(end["result"]["details"]["usage"]) == PI_USAGE
    assert end["result"]["details"]["usage"]["totalTokens"] == 15
    finals = [
        e["message"]
        for e in events
        if e["type"] == "message_end" and e["message"].get("role") == "assistant"
    ]
    assert CHILD_ANSWER in finals[-1]["content"][0]["text"]

    # Lifecycle entries in pi's own session file, written by pi's writer.
    start, done = parent.agent_events()
    assert set(start) >= START_FIELDS and start["eventType"] == "subagent:start"
    assert set(done) >= END_FIELDS and done["eventType"] == "subagent:complete"
    assert start["jobId"] == done["jobId"] == details["jobId"]
    assert done["status"] == "completed" and done["mode"] == "single"
    assert done["model"] == "mock-model" and done["usage"]["totalTokens"] == 15
    assert done["summary"] == CHILD_ANSWER
    assert Path(done["runDir"], "result.json").exists()


def test_failing_child_makes_the_call_an_error_with_the_diagnostics(tmp_path: Path) -> None:
    args = {"task": "say hello", "model": "broken/mock-model"}
    with (
        MockModelServer(Script(tool_name="subagent", tool_args=args)) as server,
        MockModelServer(Script(error_status=500, error_times=-1)) as broken,
    ):
        parent = Parent(tmp_path, server)
        add_provider(parent.agent_dir, "broken", broken.url)
        events = parent.run("delegate it")
    end = tool_end(events)
    assert end["isError"] is True
    text = end["result"]["content"][0]["text"]
    assert "## Error" in text and "500 mock server error" in text
    entries = parent.agent_events()
    assert [e["eventType"] for e in entries] == ["subagent:start", "subagent:error"]
    assert entries[1]["status"] == "failed" and "500 mock server error" in entries[1]["summary"]


def test_background_job_end_is_recorded_once_when_the_session_resumes(tmp_path: Path) -> None:
    args = {"task": "take your time", "model": "slow/mock-model", "background": True}
    with (
        MockModelServer(Script(tool_name="subagent", tool_args=args)) as server,
        MockModelServer(Script(delay_s=120)) as slow,  # the child waits until stopped
    ):
        parent = Parent(tmp_path, server)
        add_provider(parent.agent_dir, "slow", slow.url)
        events = parent.run("start it in the background")
        end = tool_end(events)
        assert end["isError"] is False
        job_id = end["result"]["details"]["jobId"]
        assert f"Started background subagent job {job_id}" in end["result"]["content"][0]["text"]
        # pi (print mode) has exited; the job runs on without it. End it while pi is away.
        assert [e["eventType"] for e in parent.agent_events()] == ["subagent:start"]
        stop = subprocess.run(
            [str(SUBAGENTS), "stop", job_id], capture_output=True, text=True, timeout=60
        )
        assert stop.returncode == 0, stop.stderr
        session = str(parent.session_file())
        parent.run("anything new?", "--session", session)
        parent.run("and now?", "--session", session)
    entries = parent.agent_events()
    assert [e["eventType"] for e in entries] == ["subagent:start", "subagent:aborted"]
    assert entries[1]["jobId"] == job_id and entries[1]["status"] == "aborted"
    lines = [json.loads(x) for x in parent.session_file().read_text().splitlines()]
    notices = [e for e in lines if e["type"] == "custom_message"]
    assert len(notices) == 1 and job_id in str(notices[0]["content"])
