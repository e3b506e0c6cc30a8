from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from subagents.config import Settings
from subagents.runs import RunHandle, RunRequest, start
from subagents.testing.fakeagent import SCRIPT_ENV, write_launcher, write_script

sys.path.insert(0, str(Path(__file__).parent))

FIXTURES = Path(__file__).parent / "fixtures"
STREAMS = FIXTURES / "streams"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own SUBAGENTS_HOME and config dir; nothing leaks between tests."""
    home = tmp_path / "state"
    monkeypatch.setenv("SUBAGENTS_HOME", str(home))
    monkeypatch.setenv("SUBAGENTS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SUBAGENTS_DEPTH", raising=False)
    monkeypatch.delenv("SUBAGENTS_CHILD", raising=False)
    return home


@dataclass
class Fake:
    """A fake pi: ``run(steps)`` starts a real supervisor whose child plays ``steps``."""

    dir: Path
    launcher: Path
    grace: float = 0.25
    kill_grace: float = 1.0
    counter: int = 0

    def env(self, steps: list[dict[str, Any]]) -> dict[str, str]:
        self.counter += 1
        script = write_script(self.dir, steps, name=f"script{self.counter}.json")
        return {SCRIPT_ENV: str(script)}

    def start(
        self, steps: list[dict[str, Any]], timeout: float | None = None, **kw: Any
    ) -> RunHandle:
        env = {**os.environ, "SUBAGENTS_PI_BIN": str(self.launcher)}
        req = RunRequest(
            task="do it",
            backend="pi",
            cwd=str(self.dir),
            env=self.env(steps),
            timeout=timeout,
            **kw,
        )
        return start(req, Settings(grace=self.grace, kill_grace=self.kill_grace), env=env)

    def run(
        self, steps: list[dict[str, Any]], timeout: float | None = None, **kw: Any
    ) -> dict[str, Any]:
        handle = self.start(steps, timeout=timeout, **kw)
        result = handle.wait(timeout=60)
        assert result is not None, "run did not finish within 60 s"
        return result


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    d = tmp_path / "fake"
    d.mkdir()
    return Fake(d, write_launcher(d))


def eventually(predicate: Callable[[], object], timeout: float = 30.0) -> bool:
    """Whether ``predicate`` comes true within ``timeout`` (a generous bound, not a timing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def fits(record: Mapping[str, Any], shape: Any) -> None:
    """``record`` has every key ``shape`` (a TypedDict) requires, and none it does not declare."""
    required, optional = set(shape.__required_keys__), set(shape.__optional_keys__)
    keys = set(record)
    assert not required - keys, f"{shape.__name__} lacks {sorted(required - keys)}"
    assert not keys - required - optional, f"{shape.__name__}: {sorted(keys - required - optional)}"


def pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def reap_group() -> Iterator[list[int]]:
    """Process groups a test created; any left alive fail the test and are killed."""
    from subagents.core.procs import group_alive

    groups: list[int] = []
    yield groups
    # A member's zombie does not count: init may be slow to reap (or never reap) a killed
    # grandchild.
    leftover = [pgid for pgid in groups if group_alive(pgid)]
    for pgid in leftover:
        os.killpg(pgid, signal.SIGKILL)
    assert not leftover, f"process groups still alive: {leftover}"


needs_pi = pytest.mark.skipif(shutil.which("pi") is None, reason="the real pi CLI is not installed")


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``: its stdout; a failure raises."""
    import subprocess

    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def git_repo(path: Path, files: dict[str, str]) -> Path:
    """A new git repository at ``path`` (branch main, a committer set) whose first commit
    holds ``files`` (relative path -> text)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "me@example.com")
    git(path, "config", "user.name", "Me")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture
def tmux(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., str]]:
    """``tmux(*args)`` on a private tmux server (its own socket dir), killed afterwards. The
    server starts with the test's environment (the first command starts it)."""
    sock_dir = Path(f"/tmp/sa-tmux-{os.getpid()}-{tmp_path.name[-6:]}")
    sock_dir.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("TMUX_TMPDIR", str(sock_dir))
    monkeypatch.delenv("TMUX", raising=False)

    def run(*args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run(
            ["tmux", *args], capture_output=True, text=True, timeout=30, check=False, env=env
        ).stdout

    yield run
    run("kill-server")
    shutil.rmtree(sock_dir, ignore_errors=True)


# The web dashboard's tests (webserver.py): its app served, and one chromium a module.
@pytest.fixture
def web(isolated_state: Path) -> Iterator[Any]:
    from webserver import web_server

    with web_server(isolated_state) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from webserver import chromium

    with chromium() as driver:
        yield driver
