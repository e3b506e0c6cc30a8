"""The ray launcher at scale and under faults, on a real Ray cluster of three nodes on this
machine, each offering ``subagents-pi`` (8 units): a shell script stands for pi (it waits on
the test's gate or sleeps, then answers as pi does), so what is measured is the launcher, not a
model.

- many runs at concurrency 24 complete, each naming its node, and leave nothing behind
  (no unit held, no run on a host, no run directory on a node, no process but the pool's
  warm spares), with the caller's memory bounded. The size is ``SUBAGENTS_RAY_SCALE_RUNS``
  (default 120; the issue's 300 runs: ``SUBAGENTS_RAY_SCALE_RUNS=300``);
- a job's driver killed mid-job and started again takes its runs up: each ran once;
- a node killed under a ``--json`` job fails exactly its runs, with stdout still one JSON
  document and nothing of Ray's on stdout or stderr.

Everything stays on 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, set by
tests/conftest.py), usage stats off.
The node-killing test runs last: it takes a node away.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'subagents[ray]')")

from ray.cluster_utils import Cluster  # noqa: E402
from support.checks import eventually  # noqa: E402
from support.gate import gate  # noqa: E402
from support.raycluster import (  # noqa: E402
    loopback_cluster,
    pi_stand_in,
    restarted_driver,
    started_count,
    wait_for_job,
)

from subagents import api, service  # noqa: E402
from subagents.config import Settings  # noqa: E402
from subagents.jobs import parse_job  # noqa: E402
from subagents.runs import RunRequest, start  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

LOOPBACK = "127.0.0.1"
UNITS = 8
SCALE_RUNS = int(os.environ.get("SUBAGENTS_RAY_SCALE_RUNS", "120"))
SCALE_CONCURRENCY = 24


class Scale:
    def __init__(self, cluster: Cluster, nodes: list[Any], node_runs: Path) -> None:
        self.cluster = cluster
        self.nodes = nodes
        self.node_runs = node_runs

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def node_ids(self) -> set[str]:
        return {n.node_id for n in self.nodes}


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scale]:
    node_runs = tmp_path_factory.mktemp("ray-scale-node-runs")
    units = {"subagents-pi": UNITS}
    env = {"SUBAGENTS_RAY_RUNS": str(node_runs)}
    with loopback_cluster(env, head_resources=units, node_resources=units) as (cluster, added):
        yield Scale(cluster, [cluster.head_node, *added], node_runs)


@pytest.fixture(autouse=True)
def limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_MAX_PARALLEL_TASKS", "1000")
    monkeypatch.setenv("SUBAGENTS_MAX_SPAWNS_PER_JOB", "1000")


def use_child(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    sleep: float = 0,
    count: Path | None = None,
    gate: Path | None = None,
) -> None:
    """The runs' pi is a stand-in (support.raycluster.pi_stand_in)."""
    script = pi_stand_in(tmp_path / "pi", sleep=sleep, count=count, gate=gate)
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(script))


def units_held() -> list[str]:
    from ray.util import placement_group_table

    return [
        str(g.get("name"))
        for g in placement_group_table().values()
        if str(g.get("name") or "").startswith("subagents-run-") and g.get("state") != "REMOVED"
    ]


def hosts() -> list[dict[str, Any]]:
    names = [n for n in ray.util.list_named_actors() if n.startswith("subagents-host-")]
    return [ray.get(ray.get_actor(n, namespace="subagents").status.remote()) for n in names]


def leftover_runs(node_runs: Path) -> list[Path]:
    return [
        run
        for node in node_runs.iterdir()
        if node.is_dir() and node.name != "repo.git"
        for run in node.iterdir()
    ]


def supervisors_beyond_spares() -> list[str]:
    """Processes under a host beyond its warm spares' keepers and supervisors (and its
    template's keeper)."""
    extra = []
    for host in hosts():
        try:
            kids = psutil.Process(host["pid"]).children(recursive=True)
        except psutil.Error:
            continue
        keepers = []
        for kid in kids:
            try:
                cmdline = kid.cmdline()
            except psutil.ZombieProcess:
                extra.append(f"zombie {kid.pid}")  # not reaped yet
                continue
            except psutil.Error:
                continue
            if "ray_keeper.py" in " ".join(cmdline):
                keepers.append(cmdline)
        # The host's template (ray_forks.py), at most one, stays while its runs come.
        templates = [k for k in keepers if "--template" in k]
        if len(templates) > 1:
            extra.append(f"{len(templates)} templates")
        keepers = [k for k in keepers if k not in templates]
        spares = [k for k in keepers if k[4:5] == ["-"]]
        extra += [" ".join(k) for k in keepers if k not in spares]
        if len(spares) > host["spares"] + 1:  # (one may be starting)
            extra.append(f"{len(spares)} spare keepers for {host['spares']} spares")
    return extra


def spec(runs: int, concurrency: int, task: str = "t") -> Any:
    return parse_job(
        {
            "mode": "parallel",
            "concurrency": concurrency,
            "tasks": [{"task": f"{task}{i}"} for i in range(runs)],
        }
    )


def test_many_runs_complete_each_on_its_node_leaving_nothing(
    sc: Scale, tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_child(monkeypatch, tmp_path, 0.2)
    work = tmp_path / "work"
    work.mkdir()
    temp_before = {p.name for p in Path(tempfile.gettempdir()).glob("subagents-*")}
    threads_before = threading.active_count()
    rss: list[int] = []
    done = 0
    lock = threading.Lock()

    def on_event(index: int, event: dict[str, Any]) -> None:
        nonlocal done
        if event.get("type") == "run_finished":
            with lock:
                done += 1
                if done in (SCALE_RUNS // 3, SCALE_RUNS):
                    rss.append(psutil.Process().memory_info().rss)

    job = api.prepare_job(
        spec(SCALE_RUNS, SCALE_CONCURRENCY),
        cwd=work,
        executor="ray",
        ray_address=sc.address,
        ray_shared_cwd=True,
    )
    t0 = time.monotonic()
    result = api.drive(job, on_event=on_event)
    wall = time.monotonic() - t0
    assert result["status"] == "completed", [
        r.get("errorMessage") for r in result["runs"] if r["status"] != "completed"
    ][:5]
    nodes = [r["executor"]["node"] for r in result["runs"]]
    assert all(r["executor"]["kind"] == "ray" for r in result["runs"])
    assert set(nodes) == sc.node_ids(), "every node took runs"
    print(
        f"{SCALE_RUNS} runs at {SCALE_CONCURRENCY}: {wall:.1f}s; per node",
        {n[:8]: nodes.count(n) for n in set(nodes)},
    )
    # Nothing left behind: no unit, no run on a host, no run directory on a node, no
    # process but the pool's spares, no temp directory of ours, no relay thread.
    assert eventually(lambda: units_held() == [], 30), units_held()
    assert eventually(lambda: all(h["runs"] == [] for h in hosts()), 30), hosts()
    assert len(hosts()) == 3  # the pool: one host per node, no actor per run
    assert all(n.startswith("subagents-host-") for n in ray.util.list_named_actors())
    assert eventually(lambda: not leftover_runs(sc.node_runs), 30), leftover_runs(sc.node_runs)
    assert eventually(lambda: supervisors_beyond_spares() == [], 30), supervisors_beyond_spares()

    def new_temp() -> set[str]:
        # (The temp dir is every xdist worker's: another test's own, a worktree's or a gate's,
        # may be there for a moment; one this job left stays.)
        now = {p.name for p in Path(tempfile.gettempdir()).glob("subagents-*")}
        return {n for n in now - temp_before if not n.startswith("subagents-ray-")}

    assert eventually(lambda: not new_temp(), 30), new_temp()
    assert eventually(lambda: threading.active_count() <= threads_before + 2, 30)
    # The caller's memory: what two thirds of the runs added is small (no per-run leak).
    assert len(rss) == 2 and rss[1] - rss[0] < 64 << 20, rss


def test_a_restarted_driver_takes_its_runs_up(
    sc: Scale, tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background job's driver is killed with its first runs running on the nodes and
    the rest still to start; a new driver follows the running ones where they are (found
    by name on their hosts) and starts the rest: every run ran exactly once, and the job
    completes. The first runs go on until the new driver is the job's (the test's gate)."""
    work = tmp_path / "work"
    work.mkdir()
    count = tmp_path / "starts"
    runs, width = 12, 6
    with gate(tmp_path) as release:
        use_child(monkeypatch, tmp_path, count=count, gate=tmp_path / "gate")
        job = api.prepare_job(
            spec(runs, width),
            cwd=work,
            executor="ray",
            ray_address=sc.address,
            ray_shared_cwd=True,
            background=True,
        )
        service.start_background(job)
        job_dir = job.store.dir / job.job_id

        def recorded() -> list[str]:
            state = json.loads((job_dir / "job.json").read_text())
            return [r for r in state.get("runIds") or [] if r]

        # The first wave runs on the nodes and the job has recorded it (a run the driver
        # launched but had not yet recorded when it died is the job's business: issue 27).
        assert eventually(lambda: started_count(count) == width and len(recorded()) == width, 120)
        first = recorded()
        driver = json.loads((job_dir / "job.json").read_text())["driver"]["pid"]
        os.kill(driver, signal.SIGKILL)
        with restarted_driver(job_dir, tmp_path / "driver.stderr") as again:
            release()  # the first wave ends under the new driver; the rest pass at once
            w = wait_for_job(job.job_id, 240)
            assert again.proc.wait(timeout=60) == 0, f"{w.stdout[-2000:]}{w.stderr}\n{again.says()}"
    assert w.returncode == 0, w.stdout[-2000:] + w.stderr
    state = json.loads(w.stdout)
    assert [r["status"] for r in state["runs"]] == ["completed"] * runs
    assert [r["runId"] for r in state["runs"]][:width] == first  # taken up, not redone
    for run_id in first:
        events = (isolated_state / "runs" / run_id / "events.jsonl").read_text()
        assert events.count('"run_started"') == 1
    assert started_count(count) == runs, "a run was started twice"
    assert eventually(lambda: units_held() == [], 30), units_held()


def test_a_run_waiting_for_a_unit_is_stopped_at_once(
    sc: Scale, tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every unit of the cluster is held: one more run waits for one (its placement group
    pending, no node named), and stopping it ends it as aborted within seconds, its
    pending unit withdrawn, while the others run on."""
    use_child(monkeypatch, tmp_path, 120)
    work = tmp_path / "work"
    work.mkdir()
    settings = Settings(executor="ray", ray_address=sc.address, ray_shared_cwd=True)
    units = UNITS * len(sc.nodes)
    handles = [start(RunRequest(task=f"t{i}", cwd=str(work)), settings) for i in range(units)]
    try:
        assert eventually(lambda: all(h.launched.where()["node"] for h in handles), 120)
        waiting = start(RunRequest(task="one too many", cwd=str(work)), settings)
        time.sleep(2)
        assert waiting.launched.where()["node"] is None and waiting.result() is None
        assert len(units_held()) == units + 1
        t0 = time.monotonic()
        result = waiting.stop()
        assert time.monotonic() - t0 < 10
        assert result["status"] == "aborted", result
        assert "before it was placed" in result["errorMessage"], result["errorMessage"]
        assert eventually(lambda: len(units_held()) == units, 30), units_held()
        assert all(h.result() is None for h in handles)  # the others run on
    finally:
        for h in handles:
            h.stop()
    assert eventually(lambda: units_held() == [], 30), units_held()


def test_a_dead_host_fails_only_its_runs_naming_its_node(
    sc: Scale, tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host's process killed under its runs: they fail naming the node (their children
    go: their supervisors saw the host die), the other nodes' runs complete, and the next
    run there makes a new host, which clears what the dead one left. The test's gate holds
    the runs until that node's have ended, so none of those can end otherwise."""
    work = tmp_path / "work"
    work.mkdir()
    settings = Settings(executor="ray", ray_address=sc.address, ray_shared_cwd=True)
    with gate(tmp_path) as release:
        use_child(monkeypatch, tmp_path, gate=tmp_path / "gate")
        handles = [start(RunRequest(task=f"t{i}", cwd=str(work)), settings) for i in range(6)]
        assert eventually(lambda: all(h.launched.where()["node"] for h in handles), 120)
        node = handles[0].launched.where()["node"]
        host = next(h for h in hosts() if h["node"] == node)
        os.kill(host["pid"], signal.SIGKILL)
        on_node = [i for i, h in enumerate(handles) if h.launched.where()["node"] == node]
        results = {i: handles[i].wait(timeout=120) for i in on_node}
        release()
        results |= {i: h.wait(timeout=120) for i, h in enumerate(handles) if i not in results}
    for i, r in sorted(results.items()):
        assert r is not None
        if i in on_node:
            assert r["status"] == "failed", r
            assert f"Ray node {node}" in r["errorMessage"], r["errorMessage"]
        else:
            assert r["status"] == "completed", r
    # As many runs as the cluster has units: every node takes some, that one too.
    use_child(monkeypatch, tmp_path, 1)
    units = UNITS * len(sc.nodes)
    again = [start(RunRequest(task=f"u{i}", cwd=str(work)), settings) for i in range(units)]
    done = [h.wait(timeout=120) for h in again]
    assert [r["status"] if r else None for r in done] == ["completed"] * units
    assert node in {r["executor"]["node"] for r in done if r}
    assert node in {h["node"] for h in hosts()}
    assert eventually(lambda: not leftover_runs(sc.node_runs), 30), leftover_runs(sc.node_runs)
    assert eventually(lambda: units_held() == [], 30), units_held()


def test_a_dead_node_fails_only_its_runs_and_json_stdout_stays_json(
    sc: Scale, tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs last: it takes a node away. Six runs over the three nodes, one node killed
    while they run: its runs fail naming it, the others complete, and the command's
    stdout is the job result alone; Ray's own messages are in $SUBAGENTS_HOME/ray.log.
    The test's gate holds the runs until the node's have ended, so none of those can end
    otherwise."""
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-m", "subagents.cli", "run", "--json", "--parallel", "-j", "6"]
    argv += ["--executor", "ray", "--ray-address", sc.address, "--ray-shared-cwd"]
    argv += ["--cwd", str(work), *[f"task {i}" for i in range(6)]]
    runs_dir = isolated_state / "runs"

    def placed() -> dict[str, str]:
        out = {}
        for run in runs_dir.glob("*/supervisor.json") if runs_dir.exists() else []:
            node = json.loads(run.read_text()).get("ray", {}).get("node")
            started = (
                '"run_started"' in (run.parent / "events.jsonl").read_text()
                if (run.parent / "events.jsonl").exists()
                else False
            )
            if node and started:
                out[run.parent.name] = node
        return out

    with gate(tmp_path) as release:
        use_child(monkeypatch, tmp_path, gate=tmp_path / "gate")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert eventually(lambda: len(placed()) == 6, 120), placed()
            where = placed()
            victim = next(
                n for n in sc.nodes if n.node_id in where.values() and n is not sc.nodes[0]
            )
            sc.cluster.remove_node(victim, allow_graceful=False)
            sc.nodes.remove(victim)
            on_victim = {rid for rid, node in where.items() if node == victim.node_id}
            ended = [runs_dir / rid / "result.json" for rid in on_victim]
            assert eventually(lambda: all(r.exists() for r in ended), 120), ended
            release()
            out, err = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 1, err
    job = json.loads(out)  # stdout is the job result, and only it
    assert on_victim
    for r in job["runs"]:
        if r["runId"] in on_victim:
            assert r["status"] == "failed", r
            assert f"the Ray node {victim.node_id}" in r["errorMessage"], r["errorMessage"]
        else:
            assert r["status"] == "completed", r
    # Nothing of Ray's reached the terminal; what it said is in the Ray log.
    for noise in ("raylet", "Raylet", "\x1b[", "core_worker", "gcs_"):
        assert noise not in err, err
    assert units_held() == [] or eventually(lambda: units_held() == [], 30), units_held()
