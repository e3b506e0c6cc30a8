"""The ray launcher's tests' shared setup: a real Ray cluster of three nodes on this machine,
on the loopback interface only, and a job's driver started again after it was killed.

Nothing of Ray's may be reachable beyond 127.0.0.1: every node is started with
``node_ip_address="127.0.0.1"``, and ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (set by
tests/conftest.py before any test imports Ray) makes Ray pick the loopback address for the
driver too. Usage stats and the dashboard are off.

The nodes are started lean, for the suite's CPU (two cores, the rest of the suite beside them):
no autoscaler monitor (no autoscaling here), no log monitor (the driver does not take the
workers' output: ``log_to_driver=False``) and no idle worker prestarted for the driver (it runs
no task: the hosts are actors, started when a run needs one). What the launcher uses is all
there: the GCS, each node's raylet and agents, the placement groups and named actors."""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from support.checks import eventually
from support.cli import cli
from support.environ import overlay
from support.gate import gate
from support.pistream import text_end

LOOPBACK = "127.0.0.1"
# Read by each raylet as it starts (Ray's RAY_<system config> variables): no Python worker
# started ahead for the first driver, which would sit idle (about a CPU-second per cluster).
LEAN = {"RAY_prestart_worker_first_driver": "0"}


@contextlib.contextmanager
def loopback_cluster(
    env: Mapping[str, str],
    *,
    node_resources: dict[str, float],
    head_resources: dict[str, float] | None = None,
    nodes: int = 2,
) -> Iterator[tuple[Any, list[Any]]]:
    """A head and ``nodes`` more nodes (one CPU each) on 127.0.0.1, this process connected
    to it (namespace ``subagents``); yields the ``Cluster`` and the nodes added to the head.

    ``env``: what the nodes' processes inherit (their runs' directory, their pi's
    configuration, as on a real cluster), set while they start and taken back then."""
    import ray
    from ray.cluster_utils import Cluster

    check_loopback(ray)
    with overlay({**env, **LEAN}):
        common: dict[str, Any] = {
            "node_ip_address": LOOPBACK,
            "num_cpus": 1,
            "include_log_monitor": False,
        }
        head = {**common, "include_dashboard": False, "no_monitor": True}
        if head_resources:
            head["resources"] = head_resources
        cluster = Cluster(initialize_head=True, head_node_args=head)
        added = [cluster.add_node(**common, resources=node_resources) for _ in range(nodes)]
    try:
        ray.init(address=cluster.address, namespace="subagents", log_to_driver=False)
        found = ray.nodes()
        assert len(found) == nodes + 1, found
        assert {n["NodeManagerAddress"] for n in found} == {LOOPBACK}
        yield cluster, added
    finally:
        ray.shutdown()
        cluster.shutdown()


def check_loopback(ray: Any) -> None:
    """Fail at once unless Ray takes 127.0.0.1 for this machine's address. Otherwise the head
    advertises the machine's other address while it listens on the loopback one, and
    ``ray.init`` retries connecting to it for ever (Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER
    once, when it is first imported: tests/conftest.py sets it)."""
    taken = ray.util.get_node_ip_address()
    assert taken == LOOPBACK, (
        f"Ray takes {taken} for this machine's address, not {LOOPBACK}: it was imported before"
        " RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set (tests/conftest.py sets it)"
    )


class Restarted:
    """A job's driver started again (``python -m subagents.jobs.driver JOB_DIR``), its stderr
    kept for the failure message."""

    def __init__(self, job_dir: Path, stderr: Path) -> None:
        self.job_dir = job_dir
        self.stderr_path = stderr
        with stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "subagents.jobs.driver", str(job_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )

    def says(self) -> str:
        text = self.stderr_path.read_text(errors="replace")[-3000:]
        return f"the restarted driver (exit {self.proc.poll()}) said: {text or '(nothing)'}"

    def recorded(self) -> bool:
        state = json.loads((self.job_dir / "job.json").read_text())
        return bool((state.get("driver") or {}).get("pid") == self.proc.pid)


@contextlib.contextmanager
def restarted_driver(job_dir: Path, stderr: Path) -> Iterator[Restarted]:
    """The job's driver started again, yielded once the job records it as its driver.

    Until then a reader finds the job's driver dead and ends the job as soon as its running
    runs end, as it should; the restart is only a restart once the new driver is the job's.
    Killed on the way out if still running."""
    driver = Restarted(job_dir, stderr)
    try:
        assert eventually(lambda: driver.recorded() or driver.proc.poll() is not None, 120), (
            driver.says()
        )
        assert driver.proc.poll() is None, driver.says()
        yield driver
    finally:
        if driver.proc.poll() is None:
            driver.proc.kill()
            driver.proc.wait()


def wait_for_job(job_id: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``subagents wait --json --timeout TIMEOUT JOB_ID``, another process."""
    return cli(["wait", "--json", "--timeout", str(timeout), job_id], timeout=timeout + 60)


def marked_processes(mark: str) -> list[psutil.Process]:
    """This user's processes whose environment carries ``SUBAGENTS_TEST_MARK=mark`` (a run's
    child and helpers, wherever Ray started them)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SUBAGENTS_TEST_MARK") == mark:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def pi_stand_in(
    path: Path,
    *,
    sleep: float = 0,
    count: Path | None = None,
    gate: Path | None = None,
    text: str = "done",
) -> Path:
    """A shell script that stands for pi where pi's own behaviour is not what a test is about
    (what it does is in the script: the caller's environment does not reach a node). It notes
    its pid in ``count`` (if given), waits while the test holds ``gate`` (support.gate's lock,
    if given; a run that must still be going when the test acts), sleeps ``sleep`` seconds, and
    answers ``text`` as pi does. Asked its version (once per binary, to choose pi's mode), it
    gives one before pi's rpc mode."""
    final = json.dumps(text_end(text)["emit"])  # pi's final answer, as the fakes give it
    lines = ["#!/bin/sh", 'case "$1" in --version) echo 0.73.1; exit 0;; esac']
    if count is not None:
        lines.append(f"echo $$ >> {shlex.quote(str(count))}")
    if gate is not None:
        lines.append(f"flock -s {shlex.quote(str(gate))} true")
    if sleep:
        lines.append(f"sleep {sleep}")
    lines.append(f"echo {shlex.quote(final)}")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


def started_count(count: Path) -> int:
    """How many stand-ins noted their start in ``count``."""
    return len(count.read_text().splitlines()) if count.exists() else 0


class StandIn:
    """The runs' pi (``SUBAGENTS_PI_BIN``, as the caller resolves it) is ``pi_stand_in``
    answering ``text``, each start noted in ``starts``; in the ``held`` block it waits on
    the test's gate."""

    def __init__(self, where: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
        self.where = where
        self.monkeypatch = monkeypatch
        self.text = text
        self.starts = where / "starts"
        self._use(held=False)

    def _use(self, *, held: bool) -> None:
        # One script each way: a running script is not rewritten under it.
        script = self.where / ("pi-held" if held else "pi")
        hold = self.where / "gate" if held else None
        pi_stand_in(script, count=self.starts, gate=hold, text=self.text)
        self.monkeypatch.setenv("SUBAGENTS_PI_BIN", str(script))

    @contextlib.contextmanager
    def held(self) -> Iterator[Callable[[], None]]:
        """Runs started in the block wait on the test's gate until the yielded function lets
        it go (or the block ends: a run still waiting then answers)."""
        with gate(self.where) as release:
            self._use(held=True)
            try:
                yield release
            finally:
                self._use(held=False)

    def started(self) -> int:
        return started_count(self.starts)
