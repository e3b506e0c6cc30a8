"""The tmux runner, with real tmux: same artifacts and result as the process runner."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import pistream as pi
from support.fake import Fake

from subagents.config import Settings
from subagents.runs import RunRequest, start

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.fixture
def tmux_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private tmux server (its own socket dir), killed afterwards."""
    sock_dir = Path(f"/tmp/sa-tmux-{os.getpid()}-{tmp_path.name[-6:]}")
    sock_dir.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("TMUX_TMPDIR", str(sock_dir))
    monkeypatch.delenv("TMUX", raising=False)
    yield sock_dir
    subprocess.run(["tmux", "kill-server"], capture_output=True, timeout=10)
    shutil.rmtree(sock_dir, ignore_errors=True)


def _run(fake: Fake, runner: str) -> dict:
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)}
    req = RunRequest(
        task="do it",
        backend="pi",
        cwd=str(fake.dir),
        env=fake.env(pi.answer("Same answer.")),
    )
    result = start(req, Settings(runner=runner), env=env).wait(timeout=60)
    assert result is not None
    return result


COMPARED = (
    "status",
    "finalText",
    "stopReason",
    "rawStopReason",
    "exitCode",
    "signal",
    "toolCalls",
    "usage",
    "model",
    "backend",
    "task",
    "errorMessage",
    "diagnostics",
)


def test_tmux_runner_gives_the_same_result_as_the_process_runner(
    fake: Fake, tmux_server: Path
) -> None:
    by_process = _run(fake, "process")
    by_tmux = _run(fake, "tmux")
    assert by_tmux["status"] == "completed"
    assert {k: by_tmux[k] for k in COMPARED} == {k: by_process[k] for k in COMPARED}
    run_dir = Path(by_tmux["paths"]["events"]).parent

    def artifacts(d: Path) -> list[str]:
        # supervisor.log is the process runner's own; dot files are a writer's temp files.
        return sorted(
            p.name for p in d.iterdir() if p.name != "supervisor.log" and not p.name.startswith(".")
        )

    assert artifacts(run_dir) == artifacts(Path(by_process["paths"]["events"]).parent)
    assert not (run_dir / "environ.json").exists()  # the caller's environment is not left on disk
    sessions = subprocess.run(
        ["tmux", "list-sessions", "-F", "#{session_name}"], capture_output=True, text=True
    )
    assert "subagents" in sessions.stdout.split()


def test_tmux_window_shows_live_progress(fake: Fake, tmux_server: Path) -> None:
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)}
    steps = [*pi.start(), *pi.tool_use(command="echo visible-in-tmux"), {"sleep": 30}]
    handle = start(
        RunRequest(task="x", backend="pi", cwd=str(fake.dir), env=fake.env(steps)),
        Settings(runner="tmux"),
        env=env,
    )
    window = handle.run_id[-8:]
    import time

    deadline = time.monotonic() + 20
    screen = ""
    while time.monotonic() < deadline and "visible-in-tmux" not in screen:
        time.sleep(0.2)
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", f"subagents:{window}"],
            capture_output=True,
            text=True,
        ).stdout
    assert "$ echo visible-in-tmux" in screen
    result = handle.stop()
    assert result["status"] == "aborted"


def test_missing_tmux_is_a_clear_error(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from subagents.errors import UsageError

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="tmux not found"):
        start(
            RunRequest(task="x", backend="pi", cwd=str(fake.dir)),
            Settings(runner="tmux"),
            env={**os.environ, "SUBAGENTS_PI_BIN": str(fake.launcher)},
        )
    # The run directory it had made holds a failed result, not a half-written run.
    (run_dir,) = (Path(os.environ["SUBAGENTS_HOME"]) / "runs").iterdir()
    import json

    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and "tmux not found" in result["errorMessage"]


def test_a_continued_run_starts_where_its_run_did(fake: Fake, tmux_server: Path) -> None:
    """`continue` has no --runner: the follow-up starts as its job's placement says (its
    job.json), here in tmux, whatever the config says now."""
    import json

    from support.cli import invoke
    from support.fake import fake_env

    p = invoke(
        ["run", "--json", "--runner", "tmux", "first"],
        fake_env(fake, [{"session": True}, *pi.answer("one")]),
    )
    assert p.returncode == 0, p.stderr
    first = json.loads(p.stdout)
    p = invoke(
        ["continue", "--json", first["runId"], "second"],
        fake_env(fake, [{"session": True}, *pi.answer("two")]),
    )
    assert p.returncode == 0, p.stderr
    second = json.loads(p.stdout)
    assert (second["continuedFrom"], second["finalText"]) == (first["runId"], "two")
    for result in (first, second):
        run_dir = Path(result["paths"]["events"]).parent
        assert json.loads((run_dir / "supervisor.json").read_text())["runner"] == "tmux"
        assert json.loads((run_dir / "meta.json").read_text())["echo"] is True
