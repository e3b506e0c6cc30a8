"""Benchmark: a map of 1,000 rows of an instant child at concurrency 16, local executor
(issue 33, "Numbers").

    .venv/bin/python bench/bench_map.py [--rows 1000] [--concurrency 16]
    .venv/bin/python bench/bench_map.py --executor ray --concurrency 24

``--executor ray``: the map runs on a Ray cluster of three nodes on 127.0.0.1 (each offering
a third of ``--concurrency`` units of ``subagents-pi``, a shared filesystem), started here
(its start is not counted); the CPU figures then leave out what the Ray nodes spend.

The child answers at once (bench_jobs.py's shell stand-in for pi, sleeping 0 s), so the ideal
wall time is ~0 and the overhead per row is the map's wall time over its rows. The
driver (``subagents map`` in the foreground) is polled for its RSS every 50 ms: its growth
is the peak minus what it held once the first 5% of the rows were done (imports and
warm-up excluded). The results file is checked complete (every row once, completed).

Baseline, in the same process and on the same machine: ``subagents run --parallel`` of 8
such tasks at -j 8, repeated; its wall per run is what one run costs in a job, and the
map's per-row overhead is given as a ratio to it.

``--against SRC`` maps with another checkout's src too (e.g. the branch point's:
``git worktree add /tmp/base BASE``, then ``--against /tmp/base/src``), ``--rounds`` times
each, in turn with this checkout's, each on a cluster of its own (its nodes import that
src), and gives the ratios of the wall and the driver's CPU per row.

With ``--executor ray`` the Ray cluster's CPU per row is given too, by kind of process: the
hosts (the actors on the nodes), the supervisors (a host's keepers, supervisors and their
children, as it reaps them; its template, with the supervisors it forked and reaped), the
GCS, other workers, the rest. Wall per row times the two
cores is near the driver's CPU plus the cluster's: the machine is the bottleneck, its
processes the nodes'.

On a busy machine the wall time measures the others' load as much as ours, so the CPU time
is given too, which load hardly moves: the whole process tree's (the driver, and the
supervisors and children it reaps: ``wait4``'s rusage) per row, and the driver's own (from
its last sample) per row; the same tree CPU per run of the baseline, and their ratio. What a
row costs beyond the driver's own is its supervisor's (a Python interpreter's start and
imports, then the run) and its child's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs import child_script
from benchenv import like_installed


def cluster_cpu() -> dict[int, tuple[str, float]]:
    """The CPU seconds so far of each process this one started but the map's driver (the
    Ray cluster's: its GCS, raylets and workers, the hosts among them), with what they
    reaped (a host's supervisors and their children), by kind."""
    out: dict[int, tuple[str, float]] = {}
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            name, cmd = p.name(), " ".join(p.cmdline())
            if "subagents.cli" in cmd:
                continue
            kind = name if name in ("gcs_server", "raylet") else "other"
            t = p.cpu_times()
            if "NodeHost" in cmd or "NodeHost" in name:
                # A host: its own, and its supervisors' and their children's once reaped.
                out[-p.pid] = ("supervisors", t.children_user + t.children_system)
                out[p.pid] = ("hosts", t.user + t.system)
                continue
            if "default_worker.py" in cmd or name.startswith("ray::"):
                kind = "workers"
            elif "subagents.supervisor" in cmd or "ray_keeper.py" in cmd:
                kind = "supervisors"  # a host's template (its keeper), with what it reaped
            out[p.pid] = (kind, t.user + t.system + t.children_user + t.children_system)
    return out


def cpu_by_kind(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    spent: dict[str, float] = {}
    for pid, (kind, cpu) in after.items():
        spent[kind] = spent.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
    return spent


def run_map(
    work: Path, env: dict[str, str], rows: int, concurrency: int, ray: str | None = None
) -> dict[str, float]:
    data = work / "rows.txt"
    data.write_text("".join(f"row{i}\n" for i in range(rows)))
    out = work / "results.jsonl"
    argv = [sys.executable, "-m", "subagents.cli", "map", str(data), "--task", "do {line}"]
    argv += ["-j", str(concurrency), "--out", str(out), "-q"]
    if ray is not None:
        argv += ["--executor", "ray", "--ray-address", ray, "--ray-shared-cwd"]
    cluster_before = cluster_cpu() if ray is not None else {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    ps = psutil.Process(proc.pid)
    early: int | None = None
    peak = 0
    own = 0.0
    while True:
        with contextlib.suppress(psutil.Error):
            rss = ps.memory_info().rss
            cpu = ps.cpu_times()
            own = cpu.user + cpu.system
            peak = max(peak, rss)
            if early is None and out.exists():
                with out.open("rb") as f:
                    if sum(1 for _ in f) >= rows // 20:
                        early = rss
        done, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    cluster = cpu_by_kind(cluster_before, cluster_cpu()) if ray is not None else {}
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    complete = sorted(r["line"] for r in lines) == sorted(f"row{i}" for i in range(rows))
    complete = complete and all(r["status"] == "completed" for r in lines)
    return {
        "wall": wall,
        "per_row_ms": wall / rows * 1000,
        "rss_early_mib": (early or peak) / 2**20,
        "rss_peak_mib": peak / 2**20,
        "growth_mib": (peak - (early or peak)) / 2**20,
        "complete": float(complete),
        "exit": float(proc.returncode),
        "cpu_row_ms": (usage.ru_utime + usage.ru_stime) / rows * 1000,
        "driver_row_ms": own / rows * 1000,
        **{f"cluster_{kind}_row_ms": cpu / rows * 1000 for kind, cpu in cluster.items()},
    }


@contextlib.contextmanager
def ray_cluster(
    work: Path, env: dict[str, str], concurrency: int, wanted: bool
) -> Iterator[str | None]:
    """A Ray cluster of three nodes on 127.0.0.1 for the map (None: not wanted), its nodes
    started with the bench's environment (the child, the state directory)."""
    if not wanted:
        yield None
        return
    import ray
    from ray.cluster_utils import Cluster

    saved = dict(os.environ)
    os.environ.update(env)  # the nodes' processes take this environment
    units = -(-concurrency // 3)
    node = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "resources": {"subagents-pi": units}}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(**node)
        os.environ.clear()
        os.environ.update(saved)
        yield str(cluster.address)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        with contextlib.suppress(Exception):
            ray.shutdown()
        cluster.shutdown()


def run_parallel(work: Path, env: dict[str, str], repeat: int) -> tuple[float, float]:
    """Wall and tree CPU per run of `run --parallel` of 8 instant tasks at -j 8 (medians
    of ``repeat``)."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "subagents.cli", "run", "-q", "--parallel", "-j", "8"]
            + [f"t{i}" for i in range(8)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0, proc.returncode
        walls.append((time.perf_counter() - t0) / 8)
        cpus.append((usage.ru_utime + usage.ru_stime) / 8)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--baseline-repeat", type=int, default=5)
    ap.add_argument("--executor", choices=("local", "ray"), default="local")
    ap.add_argument(
        "--against",
        metavar="SRC",
        help="also map with another checkout's src (e.g. the branch point's), in turn with"
        " this one's, each on a cluster of its own",
    )
    ap.add_argument("--rounds", type=int, default=1, help="maps per side (with --against)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        work = Path(tmp)
        like_installed()
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            "SUBAGENTS_PI_BIN": str(child_script(work / "pi", 0)),
            "SUBAGENTS_RAY_RUNS": str(work / "node-runs"),
            # Ray on loopback only (else it advertises the machine's other address).
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        load = os.getloadavg()[0]
        base, base_cpu = run_parallel(work, env, args.baseline_repeat)
        sides = {"this checkout": env}
        if args.against:
            sides[args.against] = {**env, "PYTHONPATH": str(Path(args.against).resolve())}
        figures: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for n in range(args.rounds if args.against else 1):
            for i, (side, side_env) in enumerate(sides.items()):
                there = work / f"map-{n}-{i}"
                there.mkdir()
                side_env = {
                    **side_env,
                    "SUBAGENTS_HOME": str(there / "home"),
                    "SUBAGENTS_RAY_RUNS": str(there / "node-runs"),
                }
                with ray_cluster(there, side_env, args.concurrency, args.executor == "ray") as at:
                    figures[side].append(run_map(there, side_env, args.rows, args.concurrency, at))
                load = max(load, os.getloadavg()[0])
    where = "on 3 loopback Ray nodes" if args.executor == "ray" else "local executor"
    print(f"rows {args.rows} at -j {args.concurrency}, {where}, instant child")
    print(f"  baseline: run --parallel 8 at -j 8, per run  {base * 1000:.1f} ms")
    for side, maps in figures.items():
        print(f"{side} ({len(maps)} map{'s' if len(maps) > 1 else ''}, medians):")
        report({k: statistics.median(m.get(k, 0.0) for m in maps) for k in maps[0]}, base, base_cpu)
    if args.against:
        ours, theirs = figures.values()
        for key, what in (("per_row_ms", "wall"), ("driver_row_ms", "driver CPU")):
            ratio = statistics.median(o[key] / t[key] for o, t in zip(ours, theirs, strict=True))
            print(
                f"  {what} per row, this checkout / {args.against}: {ratio:.2f} (median of rounds)"
            )
    print(f"  load average (1 min, highest seen)  {load:.1f} on {os.cpu_count()} cores")


def report(figures: dict[str, float], base: float, base_cpu: float) -> None:
    print(f"  map wall                 {figures['wall']:.1f} s (exit {figures['exit']:.0f})")
    print(f"  overhead per row         {figures['per_row_ms']:.1f} ms (ideal wall ~0)")
    print(
        f"  driver RSS               {figures['rss_early_mib']:.1f} MiB after 5% of rows,"
        f" peak {figures['rss_peak_mib']:.1f} MiB: growth {figures['growth_mib']:.1f} MiB"
    )
    print(f"  results file complete    {bool(figures['complete'])}")
    print(f"  ratio map row / parallel run  {figures['per_row_ms'] / (base * 1000):.2f}")
    print(
        f"  CPU per row               {figures['cpu_row_ms']:.1f} ms (the driver's own"
        f" {figures['driver_row_ms']:.1f} ms); per parallel run {base_cpu * 1000:.1f} ms:"
        f" ratio {figures['cpu_row_ms'] / (base_cpu * 1000):.2f}"
    )
    cluster = {k[8:-7]: v for k, v in figures.items() if k.startswith("cluster_")}
    if cluster:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(cluster.items(), key=lambda kv: -kv[1]))
        print(f"  the cluster's CPU per row {sum(cluster.values()):.1f} ms: {parts}")


if __name__ == "__main__":
    main()
