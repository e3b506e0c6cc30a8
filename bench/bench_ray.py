"""Benchmark: 50 short runs on the ray executor over 3 local Ray nodes vs the local executor
(issue 17: "overhead per run").

    .venv/bin/python bench/bench_ray.py [--runs 50] [--concurrency 8] [--child-seconds 0.5]

Needs the ray extra (pip install -e '.[ray]'). A ``ray.cluster_utils.Cluster`` of three
nodes, each offering ``subagents-pi`` (3 units), is started on 127.0.0.1 only; the child is
a shell script that sleeps ``--child-seconds`` and answers like pi. Both executors run the
same parallel job through the same in-process job path (``api.prepare_job`` + ``api.drive``),
one after the other in this process; connecting to the cluster is timed apart. Overhead per
run is wall x concurrency / runs - child time, as in bench_jobs.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_jobs import child_script  # noqa: E402
from benchenv import like_installed  # noqa: E402

# Ray on loopback only (it advertises the machine's other address otherwise); no usage stats.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


def run_job(runs: int, concurrency: int, work: Path, executor: str, address: str | None) -> float:
    from subagents import api
    from subagents.jobs import parse_job

    spec = parse_job(
        {
            "mode": "parallel",
            "concurrency": concurrency,
            "tasks": [{"task": f"t{i}"} for i in range(runs)],
        }
    )
    t0 = time.perf_counter()
    job = api.prepare_job(
        spec, cwd=work, executor=executor, ray_address=address, ray_shared_cwd=True
    )
    result = api.drive(job)
    wall = time.perf_counter() - t0
    assert result["status"] == "completed", result
    assert len(result["runs"]) == runs
    if executor == "ray":
        nodes = {r["executor"]["node"] for r in result["runs"]}
        print(f"  ray: runs spread over {len(nodes)} nodes")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--child-seconds", type=float, default=0.5)
    args = ap.parse_args()
    like_installed()
    import ray
    from ray.cluster_utils import Cluster

    with tempfile.TemporaryDirectory(prefix="subagents-bench-ray-") as tmp:
        work = Path(tmp)
        os.environ.update(
            {
                "SUBAGENTS_HOME": str(work / "home"),
                "SUBAGENTS_CONFIG_DIR": str(work / "config"),
                "SUBAGENTS_PI_BIN": str(child_script(work / "child", args.child_seconds)),
                "SUBAGENTS_MAX_PARALLEL_TASKS": str(args.runs),
                "SUBAGENTS_MAX_SPAWNS_PER_JOB": str(args.runs),
                "SUBAGENTS_RAY_RUNS": str(work / "node-runs"),
            }
        )
        node = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "resources": {"subagents-pi": 3}}
        t0 = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
        for _ in range(2):
            cluster.add_node(**node)
        up = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            ray.init(address=cluster.address, namespace="subagents", log_to_driver=False)
            connect = time.perf_counter() - t0
            assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
            local = run_job(args.runs, args.concurrency, work, "local", None)
            on_ray = run_job(args.runs, args.concurrency, work, "ray", cluster.address)
            local = run_job(args.runs, args.concurrency, work, "local", None)
            on_ray = run_job(args.runs, args.concurrency, work, "ray", cluster.address)
        finally:
            ray.shutdown()
            cluster.shutdown()
    ideal = args.runs * args.child_seconds / args.concurrency

    def per_run(wall: float) -> float:
        return (wall * args.concurrency / args.runs - args.child_seconds) * 1000

    print(
        f"{args.runs} runs of a {args.child_seconds}s child at concurrency {args.concurrency} "
        f"on {os.cpu_count()} cores (ideal {ideal:.2f}s); cluster of 3 nodes up in {up:.1f}s, "
        f"connect {connect:.2f}s (not counted below)\n"
        f"  local executor: wall {local:.2f}s, overhead per run {per_run(local):.0f} ms\n"
        f"  ray executor:   wall {on_ray:.2f}s, overhead per run {per_run(on_ray):.0f} ms\n"
        f"  ray / local wall: {on_ray / local:.2f}; ray's extra per run: "
        f"{per_run(on_ray) - per_run(local):.0f} ms"
    )


if __name__ == "__main__":
    main()
