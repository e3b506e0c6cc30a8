"""Connecting to a Ray cluster is bounded: against an address where no head answers,
``ray.init`` retries for many minutes and, while it does, a SIGTERM to the caller did
nothing. No cluster here: two stand-ins on 127.0.0.1 that Ray hangs on, a port that refuses
every connection (a socket bound but not listening) and one that takes the connection and
never says a word."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'subagents[ray]')")

from support.checks import eventually
from support.maps import jsonl
from support.raycluster import check_loopback, marked_processes

pytestmark = pytest.mark.process

REFUSED, SILENT = "refused", "silent"


@pytest.fixture(params=[REFUSED, SILENT])
def dead_head(request: pytest.FixtureRequest) -> Iterator[str]:
    """``127.0.0.1:PORT`` where no Ray head answers."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        if request.param == SILENT:
            sock.listen(64)  # the kernel completes the handshakes; nothing is ever said
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_ray_takes_the_loopback_address_whichever_module_imported_it() -> None:
    """This module imports Ray when it is collected, before the cluster's modules: the
    suite's setting that keeps Ray on 127.0.0.1 must already hold (without it, under xdist,
    the loopback cluster's ``ray.init`` hung)."""
    import ray

    check_loopback(ray)


def cli_env(timeout: float, mark: str) -> dict[str, str]:
    return {
        **os.environ,
        "SUBAGENTS_RAY_CONNECT_TIMEOUT": str(timeout),
        # Ray would take 127.0.0.1 for this machine's other address without it.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        # Any executable passes the caller's checks: nothing is run.
        "SUBAGENTS_PI_BIN": "/bin/true",
        "SUBAGENTS_TEST_MARK": mark,
    }


def ray_argv(address: str, cwd: Path) -> list[str]:
    return ["--executor", "ray", "--ray-address", address, "--ray-shared-cwd", "--cwd", str(cwd)]


def runs_of(home: Path) -> list[dict[str, object]]:
    return [json.loads((d / "result.json").read_text()) for d in sorted((home / "runs").iterdir())]


def test_a_run_gives_up_connecting_in_one_line(dead_head: str, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    argv = [sys.executable, "-m", "subagents.cli", "run", "--backend", "pi", "-q"]
    argv += [*ray_argv(dead_head, tmp_path), "hi"]
    p = subprocess.run(argv, env=cli_env(2, mark), capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    said = (
        f"could not connect to the Ray cluster at {dead_head} within 2 s: check that it is"
        " the head's address"
    )
    ours = [line for line in p.stderr.splitlines() if "Ray cluster" in line]
    assert len(ours) == 1 and said in ours[0], p.stderr
    # Nothing half-written: the run that could not start has its result, saying why.
    (result,) = runs_of(Path(os.environ["SUBAGENTS_HOME"]))
    assert result["status"] == "failed"
    assert said in str(result["errorMessage"])
    assert not marked_processes(mark)


def test_sigterm_ends_a_map_that_is_connecting(dead_head: str, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    home = Path(os.environ["SUBAGENTS_HOME"])
    rows, out = tmp_path / "rows.txt", tmp_path / "out.jsonl"
    rows.write_text("a\nb\nc\n")
    argv = [sys.executable, "-m", "subagents.cli", "map", str(rows), "--task", "do {line}"]
    argv += [*ray_argv(dead_head, tmp_path), "--backend", "pi", "-j", "2", "--out", str(out)]
    # Ten minutes to connect: only the signal can end it within the test's bound.
    env = cli_env(600, mark)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # A row's run is made just before it connects.
        assert eventually(lambda: len(list((home / "runs").glob("*/meta.json"))) == 2, 120)
        time.sleep(1)  # well into the connect (it gives up the same way at any point)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - signalled < 120
    assert proc.returncode not in (0, None), err
    runs = runs_of(home)
    assert len(runs) == 2
    for result in runs:
        assert result["status"] == "aborted", result
        assert f"stopped while connecting to the Ray cluster at {dead_head}" in str(
            result["errorMessage"]
        )
    # No row counts as done: a resume runs every one.
    done = jsonl(out) if out.exists() else []
    assert not [r for r in done if r["status"] == "completed"], done
    assert not marked_processes(mark)


def test_ray_status_gives_up_connecting(dead_head: str) -> None:
    argv = [sys.executable, "-m", "subagents.cli", "ray", "status", "--ray-address", dead_head]
    p = subprocess.run(
        argv, env=cli_env(2, uuid.uuid4().hex), capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 1, p.stderr
    assert f"subagents: could not connect to the Ray cluster at {dead_head} within 2 s" in (
        p.stderr
    )
