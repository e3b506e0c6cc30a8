"""The ray executor against a real Ray cluster of three nodes on this machine
(``ray.cluster_utils.Cluster``): a head without agent CLIs and two nodes that offer
``subagents-pi``. The real pi runs there against the loopback mock model where pi on a node
is the point (a parallel job's events, transcript and tool calls relayed home; a stop that
leaves no process; a repository that travels and its branch that comes back: the tests marked
``e2e``); elsewhere a shell script stands for it (support.raycluster.pi_stand_in), held by
the test's gate where a run must still be going when the test acts.

Everything stays on 127.0.0.1: every node is started with ``node_ip_address="127.0.0.1"``
and ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (set by tests/conftest.py) makes Ray pick the
loopback address for this driver too (otherwise it advertises the machine's other address).
Usage stats and the dashboard are off. One cluster serves the module; the test that kills a node runs last.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'subagents[ray]')")

from ray.cluster_utils import Cluster  # noqa: E402
from support.checks import eventually, fits, needs_pi  # noqa: E402
from support.git import git, git_repo  # noqa: E402
from support.raycluster import (  # noqa: E402
    StandIn,
    loopback_cluster,
    marked_processes,
    restarted_driver,
    wait_for_job,
)

from subagents import api  # noqa: E402
from subagents.config import Settings  # noqa: E402
from subagents.core import procs  # noqa: E402
from subagents.demo.mockmodel import MockModelServer, Script, write_pi_config  # noqa: E402
from subagents.jobs import parse_job  # noqa: E402
from subagents.launchers import reattach  # noqa: E402
from subagents.runs import RunHandle, RunMonitor, RunRequest, start  # noqa: E402
from subagents.types import (  # noqa: E402
    HostHello,
    HostPullReply,
    HostRun,
    HostStatus,
    RayClusterStatus,
    RayDown,
    RayHostStatus,
    RayNodeStatus,
    RayUnit,
)

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]
PI_UNITS = 3
FINAL = "Found: {tool_output}"
ANSWER = "Found: hello.txt"  # what the real pi answers in `work` (FINAL), and the stand-in


def real_pi(test: Any) -> Any:
    """The real pi runs on the nodes in this test: pi's own behaviour there is its subject."""
    return pytest.mark.e2e(needs_pi(test))


class RayCluster:
    def __init__(
        self,
        cluster: Cluster,
        pi_nodes: list[Any],
        node_runs: Path,
        server: MockModelServer,
        pi_env: dict[str, str],
    ) -> None:
        self.cluster = cluster
        self.pi_nodes = pi_nodes
        self.node_runs = node_runs
        # One mock model for the module (tests set its script); each node's pi is
        # configured for it through the node's own environment, as on a real cluster.
        self.server = server
        self.pi_env = pi_env

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def pi_node_ids(self) -> set[str]:
        return {n.node_id for n in self.pi_nodes}


@pytest.fixture(scope="module")
def rc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    node_runs = tmp_path_factory.mktemp("ray-node-runs")
    server = MockModelServer(Script(final_text=FINAL)).__enter__()
    pi_env = write_pi_config(tmp_path_factory.mktemp("pi-agent"), server.url)
    # The nodes' processes inherit this environment: their runs go under the test's tmp,
    # their pi talks to the mock (offline otherwise).
    env = {**pi_env, "SUBAGENTS_RAY_RUNS": str(node_runs)}
    try:
        with loopback_cluster(env, node_resources={"subagents-pi": PI_UNITS}) as (cluster, added):
            yield RayCluster(cluster, added, node_runs, server, pi_env)
    finally:
        server.close()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    (d / "hello.txt").write_text("hi\n")
    return d


@pytest.fixture
def pi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    """The runs' pi is a stand-in (support.raycluster.StandIn) answering ANSWER."""
    return StandIn(tmp_path, monkeypatch, ANSWER)


def no_unit_left(run_id: str) -> bool:
    """The run holds no unit of its backend (its placement group is gone) and no host
    has it any more."""
    from ray.util import placement_group_table

    for group in placement_group_table().values():
        if group.get("name") == f"subagents-run-{run_id}" and group.get("state") != "REMOVED":
            return False
    return not any(r["runId"] == run_id for h in hosts_status() for r in h["runs"])


def leftover_runs(node_runs: Path) -> list[Path]:
    """What the nodes keep of runs (``<node id>/<run id>``; ``repo.git`` is their cache)."""
    return [
        run
        for node in node_runs.iterdir()
        if node.is_dir() and node.name != "repo.git"
        for run in node.iterdir()
    ]


def hosts_status() -> list[dict[str, Any]]:
    names = [n for n in ray.util.list_named_actors() if n.startswith("subagents-host-")]
    return [ray.get(ray.get_actor(n, namespace="subagents").status.remote()) for n in names]


def start_ray_run(rc: RayCluster, work: Path, env: dict[str, str], mark: str) -> RunHandle:
    req = RunRequest(
        task="List the files.",
        backend="pi",
        model="mock/mock-model",
        cwd=str(work),
        env={**env, "SUBAGENTS_TEST_MARK": mark},
    )
    return start(req, Settings(executor="ray", ray_address=rc.address, ray_shared_cwd=True))


def started(handle: RunHandle) -> bool:
    """The run's child was spawned on a node and the caller heard of it."""
    try:
        events = (handle.run_dir / "events.jsonl").read_text()
    except FileNotFoundError:
        return False
    return '"run_started"' in events and node_of(handle) is not None


def node_of(handle: RunHandle) -> str | None:
    where = handle.launched.where()
    return None if where is None else where.get("node")


@real_pi
def test_parallel_job_spreads_over_the_pi_nodes(
    rc: RayCluster, work: Path, tmp_path: Path, isolated_state: Path
) -> None:
    n = 6
    seen: list[tuple[int, str, int]] = []  # (run index, event type, results on disk then)
    lock = threading.Lock()
    # The model answers once every run has started (its answers wait on this), so the runs
    # overlap and their progress shows while they run, however slowly the nodes start them.
    all_started = threading.Event()

    def on_event(index: int, event: dict[str, Any]) -> None:
        done = len(list((isolated_state / "runs").glob("*/result.json")))
        with lock:
            seen.append((index, str(event.get("type")), done))
            if sum(t == "run_started" for _, t, _ in seen) == n:
                all_started.set()

    rc.server.script = Script(final_text=FINAL, hold=all_started)
    env = rc.pi_env
    spec = parse_job(
        {
            "mode": "parallel",
            "concurrency": n,
            "tasks": [
                {"task": f"List the files ({i}).", "model": "mock/mock-model"} for i in range(n)
            ],
        }
    )
    job = api.prepare_job(
        spec,
        cwd=work,
        tools=["bash", "read"],
        extra_env=env,
        executor="ray",
        ray_address=rc.address,
        ray_shared_cwd=True,
    )
    try:
        result = api.drive(job, on_event=on_event)
    finally:
        all_started.set()  # (however the job ended, the mock's handlers let go)
    assert result["status"] == "completed", json.dumps(result, indent=1)[:3000]
    runs = result["runs"]
    assert [r["finalText"] for r in runs] == [ANSWER] * n
    nodes = [r["executor"]["node"] for r in runs]
    assert all(r["executor"]["kind"] == "ray" for r in runs)
    # SPREAD over two nodes of three units each: both take runs, the head none.
    assert set(nodes) == rc.pi_node_ids()
    for r in runs:
        run_dir = isolated_state / "runs" / r["runId"]
        # The caller's run dir is the source of truth: every artifact is here.
        on_disk = json.loads((run_dir / "result.json").read_text())
        assert on_disk["executor"] == r["executor"]
        assert r["paths"]["events"] == str((run_dir / "events.jsonl").resolve())
        events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[-1]["type"] == "run_finished"
        assert any(e["type"] == "tool_call" for e in events)
        assert "hello.txt" in (run_dir / "raw.jsonl").read_text()
        assert (run_dir / "transcript.md").read_text()
        times = (run_dir / "transcript.times").read_bytes()  # relayed too, whole records
        assert times and len(times) % 28 == 0 and times.startswith(b"000000000000 ")
        assert eventually(lambda rid=r["runId"]: no_unit_left(rid), 60)
    # Progress arrived while the runs ran: each run's start was seen before all had ended.
    for i in range(n):
        assert any(idx == i and t == "run_started" and done < n for idx, t, done in seen), i
    # The nodes' copies are gone once the caller has everything.
    assert eventually(lambda: not leftover_runs(rc.node_runs), 30)


@real_pi
def test_stop_mid_run_leaves_no_process_on_any_node(
    rc: RayCluster, work: Path, tmp_path: Path
) -> None:
    mark = uuid.uuid4().hex
    # The model never answers within the test: the run is stopped while pi waits for it.
    rc.server.script = Script(final_text=FINAL, delay_s=120)
    asked = len(rc.server.requests)
    handle = start_ray_run(rc, work, rc.pi_env, mark)
    assert eventually(lambda: started(handle), 120), "the run did not start on a node"
    assert eventually(lambda: len(rc.server.requests) > asked, 60), "pi never asked the model"
    assert marked_processes(mark), "the child should be running"
    # Its record names the actor, the cluster, the node and the relay (this process):
    # no pid that is not the supervisor's.
    record = json.loads((handle.run_dir / "supervisor.json").read_text())
    assert set(record) == {"runner", "ray", "relay"}
    assert record["ray"]["actor"] == f"subagents-host-{node_of(handle)}"
    assert record["ray"]["node"] == node_of(handle) and record["ray"]["address"]
    assert record["relay"] == procs.identity(os.getpid())
    result = handle.stop()
    assert result["status"] == "aborted", result
    assert result["executor"] == {"kind": "ray", "node": node_of(handle)}
    assert result["executor"]["node"] in rc.pi_node_ids()
    # The supervisor on the node killed the child's whole process group.
    assert eventually(lambda: not marked_processes(mark), 30), marked_processes(mark)
    assert eventually(lambda: no_unit_left(handle.run_id), 60)


def test_no_node_offers_the_backend_fails_fast(rc: RayCluster, work: Path) -> None:
    env = {
        **os.environ,
        # Any executable passes the caller's checks; no node advertises subagents-claude.
        "SUBAGENTS_CLAUDE_BIN": "/bin/true",
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "-m", "subagents.cli", "run", "--json", "--backend", "claude"]
    argv += ["--executor", "ray", "--ray-address", rc.address, "--ray-shared-cwd"]
    argv += ["--cwd", str(work), "hi"]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "failed"
    assert "no Ray node offers subagents-claude" in result["errorMessage"]
    assert "ray start" in result["errorMessage"]


def test_a_new_driver_reattaches_to_a_running_run(rc: RayCluster, work: Path, pi: StandIn) -> None:
    mark = uuid.uuid4().hex
    with pi.held() as release:
        first = start_ray_run(rc, work, rc.pi_env, mark)
        assert eventually(lambda: started(first), 120)
        # The driver that started it goes away; the run goes on in its detached actor.
        first.launched.detach()  # type: ignore[attr-defined]
        assert not first.launched.alive()
        assert not (first.run_dir / "result.json").exists()
        again = reattach(first.run_dir)
        assert again is not None
        release()  # the run ends under its new relay
        result = RunMonitor(first.run_dir, again).wait(timeout=180)
    assert result is not None and result["status"] == "completed", result
    assert result["finalText"] == ANSWER
    events = [json.loads(x) for x in (first.run_dir / "events.jsonl").read_text().splitlines()]
    # Taken up exactly where the first relay stopped: no event lost, none twice.
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count("run_started") == 1
    assert events[-1]["type"] == "run_finished"


def bg_ray_job_whose_driver_died(
    rc: RayCluster, work: Path, home: Path, pi: StandIn
) -> tuple[str, str, int]:
    """A background ray job whose driver was SIGKILLed mid-run (its relay died with it):
    (job id, run id, the child's pid, alive on its node). Its child is ``pi``, held."""
    argv = [sys.executable, "-m", "subagents.cli", "run", "--bg", "--json"]
    argv += ["--executor", "ray", "--ray-address", rc.address, "--ray-shared-cwd"]
    argv += ["--cwd", str(work), "--model", "mock/mock-model", "List the files."]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    job_id = json.loads(p.stdout)["jobId"]
    job_file = home / "jobs" / job_id / "job.json"

    def child_pid() -> int | None:
        ids = json.loads(job_file.read_text()).get("runIds") or []
        return child_of(home / "runs" / str(ids[0] if ids else "-"))

    assert eventually(lambda: child_pid() is not None, 120), "the run did not start"
    assert eventually(lambda: pi.started() == 1, 60), "the child did not start"
    child = child_pid()
    assert child is not None
    state = json.loads(job_file.read_text())
    os.kill(state["driver"]["pid"], signal.SIGKILL)
    # The nodes are on this machine, so the child's process group can be watched here.
    time.sleep(1)
    assert procs.killpg(child, 0), "the run goes on on its node"
    return job_id, state["runIds"][0], child


def test_stop_after_the_driver_died_brings_the_run_back(
    rc: RayCluster,
    work: Path,
    isolated_state: Path,
    pi: StandIn,
) -> None:
    """`subagents stop` (another process) finds the detached actor by name, aborts the run
    on its node, and relays its result home."""
    with pi.held():
        job_id, run_id, child = bg_ray_job_whose_driver_died(rc, work, isolated_state, pi)
        s = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "stop", job_id],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert s.returncode == 0 and f"{job_id}: aborted" in s.stdout, s.stdout + s.stderr
        result = json.loads((isolated_state / "runs" / run_id / "result.json").read_text())
        assert result["status"] == "aborted", result
        assert result["executor"]["kind"] == "ray"
        assert result["executor"]["node"] in rc.pi_node_ids()
        assert eventually(lambda: not procs.killpg(child, 0), 30)
        assert eventually(lambda: no_unit_left(run_id), 60)


def test_a_run_orphaned_by_its_driver_is_ended_on_its_node(
    rc: RayCluster,
    work: Path,
    isolated_state: Path,
    pi: StandIn,
) -> None:
    """Whoever finds the job's driver dead (`subagents wait`) records the job's end, as for
    a local run, and ends the run on its node: no actor keeps its unit, no child lingers."""
    with pi.held():
        job_id, run_id, child = bg_ray_job_whose_driver_died(rc, work, isolated_state, pi)
        w = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "wait", "--json", job_id],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert w.returncode == 1, w.stdout + w.stderr
        result = json.loads((isolated_state / "runs" / run_id / "result.json").read_text())
        assert result["status"] == "failed", result
        assert (
            f"its run on Ray node {result['executor']['node']} was ended" in result["errorMessage"]
        ), result
        assert eventually(lambda: not procs.killpg(child, 0), 30)
        assert eventually(lambda: no_unit_left(run_id), 60)


def test_a_restarted_driver_reattaches_to_its_runs(
    rc: RayCluster,
    work: Path,
    isolated_state: Path,
    pi: StandIn,
) -> None:
    """The job's driver dies and is started again: it follows the run its predecessor
    started (found by the actor's name) instead of starting it anew, and the job completes.
    The run goes on until the new driver is the job's (the test's gate)."""
    with pi.held() as release:
        job_id, run_id, child = bg_ray_job_whose_driver_died(rc, work, isolated_state, pi)
        job_dir = isolated_state / "jobs" / job_id
        with restarted_driver(job_dir, work.parent / "driver.stderr") as driver:
            release()
            w = wait_for_job(job_id, 180)
            assert driver.proc.wait(timeout=60) == 0, f"{w.stdout}{w.stderr}\n{driver.says()}"
    assert w.returncode == 0, w.stdout + w.stderr
    job = json.loads(w.stdout)
    assert [r["runId"] for r in job["runs"]] == [run_id]
    (result,) = job["runs"]
    assert result["status"] == "completed" and result["finalText"] == ANSWER
    assert result["executor"]["node"] in rc.pi_node_ids()
    assert pi.started() == 1, "the run was started again"
    run_dir = isolated_state / "runs" / run_id
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert not procs.killpg(child, 0)
    assert eventually(lambda: no_unit_left(run_id), 60)


def child_of(run_dir: Path) -> int | None:
    """The run's child's pid, once its ``run_started`` event has come home."""
    events = run_dir / "events.jsonl"
    lines = [json.loads(x) for x in events.read_text().splitlines()] if events.exists() else []
    return next((e["pid"] for e in lines if e["type"] == "run_started"), None)


def test_ctrl_c_aborts_a_foreground_ray_run_on_its_node(
    rc: RayCluster,
    work: Path,
    isolated_state: Path,
    pi: StandIn,
) -> None:
    argv = [sys.executable, "-m", "subagents.cli", "run", "--json", "--executor", "ray"]
    argv += ["--ray-address", rc.address, "--ray-shared-cwd", "--cwd", str(work)]
    argv += ["--model", "mock/mock-model", "x"]
    with pi.held():
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            assert eventually(lambda: pi.started() == 1, 120), "the child never started"
            (run_dir,) = list((isolated_state / "runs").iterdir())
            assert eventually(lambda: child_of(run_dir) is not None, 60), "no run_started"
            child = child_of(run_dir)
            assert child is not None
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, err
        result = json.loads(out)
        assert result["status"] == "aborted" and result["executor"]["kind"] == "ray", result
        assert eventually(lambda: not procs.killpg(child, 0), 30)
        assert eventually(lambda: no_unit_left(run_dir.name), 60)


def pi_job(rc: RayCluster, cwd: Path, tasks: list[dict[str, Any]], **options: Any) -> Any:
    spec = parse_job({"mode": "parallel", "concurrency": len(tasks), "tasks": tasks})
    job = api.prepare_job(
        spec,
        cwd=cwd,
        tools=["bash", "read"],
        extra_env=rc.pi_env,
        executor="ray",
        ray_address=rc.address,
        **options,
    )
    return api.drive(job)


def test_hosts_are_pooled_and_reused_across_jobs(
    rc: RayCluster,
    work: Path,
    isolated_state: Path,
    pi: StandIn,
) -> None:
    """Each node has one host actor, made on first use: two jobs of four runs each run
    on the same hosts (the same processes), and leave them holding nothing. Each job's runs
    are held (the test's gate) until all four run: more than a node's three units, so both
    nodes take some."""
    tasks = [{"task": f"List the files ({i}).", "model": "mock/mock-model"} for i in range(4)]

    def held_job(running: int) -> Any:
        """The job, its runs let go once ``running`` stand-ins have started in all. (The
        gate is let go before the pool waits for the job, should the test fail.)"""
        with ThreadPoolExecutor(1) as pool, pi.held() as release:
            job = pool.submit(pi_job, rc, work, tasks, ray_shared_cwd=True)
            assert eventually(lambda: pi.started() == running or job.done(), 120)
            release()
            return job.result(timeout=180)

    pids: list[dict[str, int]] = []
    for k in range(1, 3):
        result = held_job(4 * k)
        assert result["status"] == "completed", json.dumps(result, indent=1)[:3000]
        assert {r["executor"]["node"] for r in result["runs"]} <= rc.pi_node_ids()
        for r in result["runs"]:
            assert eventually(lambda rid=r["runId"]: no_unit_left(rid), 30)
        pids.append({h["node"]: h["pid"] for h in hosts_status()})
    assert pids[0] == pids[1], "the second job ran on new hosts"
    assert set(pids[1]) == rc.pi_node_ids()  # one host per node that ran runs, no more
    for pid in pids[1].values():
        assert psutil.pid_exists(pid)
    assert all(h["runs"] == [] for h in hosts_status())


def ray_cli(rc: RayCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "subagents.cli", "ray", *args, "--ray-address", rc.address]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_ray_status_and_down(
    rc: RayCluster,
    work: Path,
    isolated_state: Path,
    pi: StandIn,
) -> None:
    """Another caller (a new process) finds the hosts by name; `ray down` refuses while a
    run runs, then removes them; the next run makes its node's host again."""
    assert (
        pi_job(rc, work, [{"task": "x", "model": "mock/mock-model"}], ray_shared_cwd=True)["status"]
        == "completed"
    )
    st = ray_cli(rc, "status", "--json")
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    fit_status(status)
    assert {h["node"] for h in status["hosts"]} == {h["node"] for h in hosts_status()}
    assert {n["node"] for n in status["nodes"] if n["offers"]} == rc.pi_node_ids()
    for node in status["nodes"]:
        if node["node"] in rc.pi_node_ids():
            assert node["offers"] == {"subagents-pi": PI_UNITS}
            assert node["free"] == {"subagents-pi": PI_UNITS}
    words = ray_cli(rc, "status")
    assert words.returncode == 0 and "host on node" in words.stdout, words.stdout
    # A run holds a unit while it runs: `down` refuses, then aborts it with --force.
    with pi.held():
        handle = start_ray_run(rc, work, rc.pi_env, uuid.uuid4().hex)
        assert eventually(lambda: started(handle), 120)
        busy = json.loads(ray_cli(rc, "status", "--json").stdout)
        fit_status(busy)
        assert handle.run_id in [u["runId"] for u in busy["units"]]
        assert handle.run_id in [r["runId"] for h in busy["hosts"] for r in h["runs"]]
        # What its relay pulls (read only: the relay's offsets are its own), and for a run the
        # host does not have.
        host = ray.get_actor(f"subagents-host-{node_of(handle)}", namespace="subagents")
        pulled = ray.get(host.pull.remote(handle.run_id, {}, 0))
        fits(pulled, HostPullReply)
        assert pulled["known"] and pulled["alive"] and pulled["result"] is None, pulled
        assert pulled["chunks"]["events.jsonl"].startswith(b"{"), pulled
        unknown = ray.get(host.pull.remote("nope", {}, 0))
        fits(unknown, HostPullReply)
        assert not unknown["known"] and "no longer has this run" in unknown["error"], unknown
        node = next(n for n in busy["nodes"] if n["node"] == node_of(handle))
        assert node["free"] == {"subagents-pi": PI_UNITS - 1}
        refused = ray_cli(rc, "down")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stderr.count("\n") == 1 and "1 run still running" in refused.stderr
        gone = ray_cli(rc, "down", "--force")
        assert gone.returncode == 0 and gone.stdout.startswith("removed "), gone.stderr
        result = handle.wait(timeout=120)
        assert result is not None and result["status"] == "aborted", result
        assert result["executor"]["node"] == node_of(handle)
        assert "aborted by `subagents ray down --force`" in result["errorMessage"], result
        assert eventually(lambda: hosts_status() == [], 30)
        assert eventually(lambda: no_unit_left(handle.run_id), 30)
    again = pi_job(rc, work, [{"task": "y", "model": "mock/mock-model"}], ray_shared_cwd=True)
    assert again["status"] == "completed", again
    assert len(hosts_status()) == 1
    (name,) = [n for n in ray.util.list_named_actors() if n.startswith("subagents-host-")]
    host = ray.get_actor(name, namespace="subagents")
    fits(ray.get(host.hello.remote()), HostHello)
    fits(ray.get(host.status.remote()), HostStatus)
    down = ray_cli(rc, "down", "--json")
    assert down.returncode == 0, down.stderr
    removed = json.loads(down.stdout)
    fits(removed, RayDown)
    assert len(removed["hosts"]) == 1 and removed["aborted"] == [], removed


def fit_status(status: dict[str, Any]) -> None:
    """``ray status --json`` has the keys its types say, every node, host, run and unit."""
    fits(status, RayClusterStatus)
    for node in status["nodes"]:
        fits(node, RayNodeStatus)
    for host in status["hosts"]:
        fits(host, RayHostStatus)
        for run in host["runs"]:
            fits(run, HostRun)
    for unit in status["units"]:
        fits(unit, RayUnit)


@real_pi
def test_a_repository_travels_and_its_changes_come_back_as_a_branch(
    rc: RayCluster, tmp_path: Path, isolated_state: Path
) -> None:
    """Without a shared filesystem: the run's node gets the repository (HEAD's history
    once per commit, the uncommitted changes per run), the child works in a worktree
    there, and what it changed comes back as branch subagents/<run-id>, which `apply`
    merges into the caller's working tree. The user's tree is not touched."""
    repo = git_repo(tmp_path / "repo", {"README.md": "hello\n", "src/lib.py": "x = 1\n"})
    (repo / "README.md").write_text("hello, edited\n")  # uncommitted, tracked
    (repo / "draft.txt").write_text("a draft\n")  # uncommitted, untracked
    before = {
        "status": git(repo, "status", "--porcelain"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branches": git(repo, "branch", "--list"),
    }
    rc.server.script = Script(
        command="cat ../draft.txt && echo made on the node > made.txt && pwd", final_text=FINAL
    )
    tasks = [{"task": "Make a file.", "model": "mock/mock-model", "isolate": "worktree"}] * 2
    sent_before = sum(h["packsReceived"] for h in hosts_status())
    result = pi_job(rc, repo / "src", tasks)
    assert result["status"] == "completed", json.dumps(result, indent=1)[:3000]
    for run in result["runs"]:
        # The child read the uncommitted file and worked in its node's copy of the tree.
        assert run["finalText"].startswith("Found: a draft, "), run["finalText"]
        where = run["finalText"].split(", ")[-1]
        assert where.startswith(str(rc.node_runs)) and where.endswith("/worktree/src"), where
        wt = run["worktree"]
        assert wt["branch"] == f"subagents/{run['runId']}" and wt["shipped"] is True
        assert wt["repo"] == str(repo) and wt["kept"] is True
        # Only the run's own change: the uncommitted ones it started from are its base.
        assert (wt["filesChanged"], wt["insertions"], wt["deletions"]) == (1, 1, 0)
        assert git(repo, "rev-parse", wt["branch"]).strip() == wt["commit"]
        assert "made.txt" in Path(wt["patch"]).read_text()
        assert (isolated_state / "runs" / run["runId"] / "uncommitted.patch").exists()
    # One commit, sent to each node that ran a run at most once (two runs, two nodes at most).
    nodes = {r["executor"]["node"] for r in result["runs"]}
    assert sum(h["packsReceived"] for h in hosts_status()) - sent_before <= len(nodes)
    assert git(repo, "status", "--porcelain") == before["status"]
    assert git(repo, "rev-parse", "HEAD") == before["head"]
    assert not (repo / "src" / "made.txt").exists()
    first = result["runs"][0]["runId"]
    assert api.apply_run(first, repo) == ["src/made.txt"]
    assert (repo / "src" / "made.txt").read_text() == "made on the node\n"
    assert (repo / "README.md").read_text() == "hello, edited\n"  # the user's edit stays
    # The nodes keep their cache of commits, nothing of the runs.
    assert eventually(lambda: not leftover_runs(rc.node_runs), 30), leftover_runs(rc.node_runs)
    # `rm` removes a run's branch, as for a local isolated run.
    second = result["runs"][1]["runId"]
    rm = subprocess.run(
        [sys.executable, "-m", "subagents.cli", "rm", "--branches", result["jobId"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rm.returncode == 0, rm.stderr
    assert f"subagents/{second}" not in git(repo, "branch", "--list")


def test_a_tree_that_cannot_travel_is_refused_in_one_line(
    rc: RayCluster, work: Path, tmp_path: Path
) -> None:
    base = [sys.executable, "-m", "subagents.cli", "run", "--executor", "ray"]
    base += ["--ray-address", rc.address]
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    for cwd, extra, words in (
        (work, [], "is not in a git repository, the only kind that travels"),
        (repo, [], "add --isolate worktree to send its repository"),
    ):
        p = subprocess.run(
            [*base, *extra, "--cwd", str(cwd), "hi"], capture_output=True, text=True, timeout=60
        )
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and words in p.stderr and "--ray-shared-cwd" in p.stderr


def test_what_is_too_big_to_travel_is_refused_in_one_line(
    rc: RayCluster, tmp_path: Path, isolated_state: Path
) -> None:
    """Over a limit, the run fails before anything is sent, its error naming the limit;
    the user's tree is untouched."""
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (repo / "big.bin").write_bytes(os.urandom(300_000))
    base = [sys.executable, "-m", "subagents.cli", "run", "--json", "--executor", "ray"]
    base += ["--ray-address", rc.address, "--isolate", "worktree", "--cwd", str(repo), "hi"]
    for var, words in (
        ("SUBAGENTS_RAY_MAX_PATCH_MB", "the uncommitted changes in"),
        ("SUBAGENTS_RAY_MAX_PACK_MB", "as a git pack, over the 0.0 MiB"),
    ):
        if var == "SUBAGENTS_RAY_MAX_PACK_MB":
            git(repo, "add", "big.bin")
            git(repo, "commit", "-q", "-m", "big")
        p = subprocess.run(
            base, env={**os.environ, var: "0"}, capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 1, p.stderr
        result = json.loads(p.stdout)
        assert result["status"] == "failed" and words in result["errorMessage"], result
        assert var in result["errorMessage"]
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "branch", "--list").strip() == "* main"


def test_a_map_on_the_loopback_cluster(
    rc: RayCluster, work: Path, tmp_path: Path, pi: StandIn
) -> None:
    """A map's rows run as Ray runs on the pi nodes (by a stand-in for pi)."""
    data = tmp_path / "rows.txt"
    data.write_text("alpha\nbeta\ngamma\ndelta\n")
    out = tmp_path / "results.jsonl"
    argv = [sys.executable, "-m", "subagents.cli", "map", str(data), "--task", "List files: {line}"]
    argv += ["--executor", "ray", "--ray-address", rc.address, "--ray-shared-cwd"]
    argv += ["--cwd", str(work), "--model", "mock/mock-model", "-j", "3", "--out", str(out)]
    argv += ["--json"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["map"]["completed"] == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["line"] for r in rows) == ["alpha", "beta", "delta", "gamma"]
    runs = Path(os.environ["SUBAGENTS_HOME"]) / "runs"
    for row in rows:
        assert row["status"] == "completed" and row["answer"].startswith("Found: ")
        result = json.loads((runs / row["runId"] / "result.json").read_text())
        assert result["executor"]["kind"] == "ray"
        assert result["executor"]["node"] in rc.pi_node_ids()


def test_a_dead_node_fails_exactly_its_runs(rc: RayCluster, work: Path, pi: StandIn) -> None:
    """Runs last: it takes one of the module's pi nodes away. The runs are
    held (the test's gate) until the test has looked at them all."""
    marks = [uuid.uuid4().hex for _ in range(3)]
    with pi.held():
        handles = [start_ray_run(rc, work, rc.pi_env, m) for m in marks]
        assert eventually(lambda: all(started(h) for h in handles), 120)
        assert eventually(lambda: all(marked_processes(m) for m in marks), 60)
        victim_id = node_of(handles[0])
        victim = next(n for n in rc.pi_nodes if n.node_id == victim_id)
        on_victim = [node_of(h) == victim_id for h in handles]
        rc.cluster.remove_node(victim, allow_graceful=False)
        rc.pi_nodes.remove(victim)
        results: dict[int, dict[str, Any]] = {}
        for i, h in enumerate(handles):
            if on_victim[i]:
                got = h.wait(timeout=180)
                assert got is not None, f"run {i} on the dead node never ended"
                results[i] = got
        # The others are untouched by it: still running, until stopped here.
        for i, h in enumerate(handles):
            if not on_victim[i]:
                assert h.result() is None
                results[i] = h.stop()
        for i, r in results.items():
            if on_victim[i]:
                assert r["status"] == "failed", r
                assert f"the Ray node {victim_id}" in r["errorMessage"], r["errorMessage"]
                assert r["executor"]["node"] == victim_id
            else:
                assert r["status"] == "aborted", r
        # The children on the dead node went with it (their supervisors saw their host die).
        assert eventually(lambda: not any(marked_processes(m) for m in marks), 60)
