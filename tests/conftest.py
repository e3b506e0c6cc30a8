from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from support.clienv import shared_cli_env
from support.fake import Fake
from support.spawns import SpawnGuard
from support.warm import Servers

from subagents.testing.fakeagent import write_launcher

# Ray stays on 127.0.0.1 in every test: Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when
# it is first imported, and without it takes this machine's other address for the address a
# loopback head advertises, where nothing listens (the driver's ray.init then retries for
# ever). Set here, before any test module can import Ray: an xdist worker imports every
# module it collects, so a module setting it for itself comes too late after one that does not.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

FIXTURES = Path(__file__).parent / "fixtures"
STREAMS = FIXTURES / "streams"

# The tiers (pyproject's markers; README "Testing"): a test that starts a process says so
# (`process`, or `e2e`/`browser`/`ray`, which imply it), and the guard fails one that does not,
# so `-m "not process"` stays the fast tier.
IMPLY_PROCESS = ("e2e", "browser", "ray")
SUITE_RUNTIME = pytest.StashKey[Path]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(m) for m in IMPLY_PROCESS):
            item.add_marker(pytest.mark.process)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup`` (scripts/test), a grouped test must carry its group in its
    id, or xdist spreads the group over the workers (pytest-xdist#1386: what pytest 9.2 does
    to xdist 3.8), each starting its own Ray cluster or chromium: fail such a test at once."""
    if not getattr(item.config.option, "loadgroup", False):
        return
    if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]:
        pytest.fail(
            "its xdist_group is not applied (pytest-xdist#1386): install pyproject.toml's pins",
            pytrace=False,
        )


def pytest_configure(config: pytest.Config) -> None:
    # A scripted `subagents run` or `continue` goes through a warm command server
    # (cli/warmserver.py), as a parent agent's does; the suite's servers are its own: a runtime
    # dir made here, in the one process that is not an xdist worker (the workers inherit it),
    # and stopped at its end (pytest_unconfigure). test_warm.py's tests each make their own.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("SUBAGENTS_WARM", None)
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="sa-suite-")  # (short: a socket)
        os.environ["SUBAGENTS_WARM_IDLE"] = "120"  # (a suite killed leaves none for long)
        config.stash[SUITE_RUNTIME] = Path(os.environ["XDG_RUNTIME_DIR"])
    # A property test's input generation is timed by hypothesis's too_slow health check, which
    # fails a test on a loaded machine: the suite never depends on timing.
    settings.register_profile("suite", suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("suite")
    config.pluginmanager.register(SpawnGuard(), "subagents-spawn-guard")
    # What every real CLI a test starts inherits (support/clienv.py): set for the session.
    os.environ.update(shared_cli_env())
    # Each test's wall and CPU time (its processes' included), when asked: support/cputimes.py.
    # Not in xdist's controller: its workers run the tests.
    out = os.environ.get("SUBAGENTS_TEST_CPU")
    if out and (os.environ.get("PYTEST_XDIST_WORKER") or not config.getoption("numprocesses", 0)):
        from support.cputimes import CpuTimes

        config.pluginmanager.register(CpuTimes(Path(out)), "subagents-cputimes")


def pytest_unconfigure(config: pytest.Config) -> None:
    runtime = config.stash.get(SUITE_RUNTIME, None)
    if runtime is not None:
        try:
            Servers(runtime).stop()
        finally:
            shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own SUBAGENTS_HOME and config dir; nothing leaks between tests."""
    home = tmp_path / "state"
    monkeypatch.setenv("SUBAGENTS_HOME", str(home))
    monkeypatch.setenv("SUBAGENTS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SUBAGENTS_DEPTH", raising=False)
    monkeypatch.delenv("SUBAGENTS_CHILD", raising=False)
    return home


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    d = tmp_path / "fake"
    d.mkdir()
    return Fake(d, write_launcher(d))


@pytest.fixture
def warm_owner() -> Iterator[object]:
    """A job that wants supervisors started ahead (launchers/spares.py: spares, a template);
    let go at the test's end, when nothing it held may be left."""
    from subagents.launchers.spares import SPARES

    me = object()
    yield me
    SPARES.want(me, 0)
    assert SPARES.pids() == []
    assert SPARES.template_pid() is None


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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB filesystem (tmpfs), where the machine lets this test mount one."""
    where = tmp_path / "small"
    where.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): {exc}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


# The web dashboard's tests (support/webserver.py): its app served, and one chromium a module.
@pytest.fixture
def web(isolated_state: Path) -> Iterator[Any]:
    from support.webserver import web_server

    with web_server(isolated_state) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from support.webserver import chromium

    with chromium() as driver:
        yield driver


# The map tests' pi (tests/mapchild.py): a fake that answers each row and logs its start.
MAP_CHILD = Path(__file__).parent / "mapchild.py"


@pytest.fixture
def child(tmp_path: Path) -> dict[str, str]:
    """The env that makes tests/mapchild.py every row's pi."""
    launcher = tmp_path / "map-pi"
    launcher.write_text(f"#!{sys.executable}\nexec(open({str(MAP_CHILD)!r}).read())\n")
    launcher.chmod(0o755)
    return {"SUBAGENTS_PI_BIN": str(launcher), "MAP_LOG": str(tmp_path / "starts.log")}
