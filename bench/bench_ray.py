"""Benchmark: the ray executor over 3 local Ray nodes against the local executor, in
alternation in one process (issues 17 and 25: "overhead per run"), and a repository that
travels to the nodes (issue 25: built and sent once per commit per node).

    .venv/bin/python bench/bench_ray.py [--runs 24] [--concurrency 6] [--child-seconds 0.5]
        [--rounds 3] [--ship-mb 50] [--ship-runs 20]

Needs the ray extra (pip install -e '.[ray]'). A ``ray.cluster_utils.Cluster`` of three
nodes, each offering ``subagents-pi`` (3 units), is started on 127.0.0.1 only; the child is
a shell script that sleeps ``--child-seconds`` and answers like pi. Both executors run the
same parallel job through the same in-process job path (``api.prepare_job`` + ``api.drive``),
local and ray in turn for ``--rounds`` rounds; the first ray job, which starts the nodes'
host actors (once per cluster, like connecting), is reported apart. Overhead per run is
wall x concurrency / runs - child time, as in bench_jobs.py; the figures are medians.

Shipping (``--ship-mb`` > 0): a git repository holding that many MiB of incompressible
files in one commit, plus an uncommitted edit; ``--ship-runs`` runs with ``--isolate
worktree`` on the nodes without a shared filesystem, against the same job isolated
locally. Reported: the packs built and sent (once per commit per node is the promise),
and the wall of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_jobs import child_script  # noqa: E402
from benchenv import like_installed  # noqa: E402

# Ray on loopback only (it advertises the machine's other address otherwise); no usage stats.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


def run_job(
    runs: int,
    concurrency: int,
    work: Path,
    executor: str,
    address: str | None,
    **options: Any,
) -> tuple[float, dict[str, Any]]:
    from subagents import api
    from subagents.jobs import parse_job

    isolate = options.pop("isolate", None)
    spec = parse_job(
        {
            "mode": "parallel",
            "concurrency": concurrency,
            "tasks": [
                {"task": f"t{i}", **({"isolate": isolate} if isolate else {})} for i in range(runs)
            ],
        }
    )
    t0 = time.perf_counter()
    job = api.prepare_job(spec, cwd=work, executor=executor, ray_address=address, **options)
    result = api.drive(job)
    wall = time.perf_counter() - t0
    assert result["status"] == "completed", [
        (r.get("status"), r.get("errorMessage"), r.get("worktree"))
        for r in result["runs"]
        if r.get("status") != "completed"
    ][:3]
    assert len(result["runs"]) == runs
    return wall, dict(result)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def big_repo(path: Path, mib: int) -> Path:
    """A repository whose one commit holds ``mib`` MiB of incompressible files, with an
    uncommitted edit on top."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "bench")
    for i in range(mib):
        (path / f"blob{i:03d}.bin").write_bytes(os.urandom(1 << 20))
    (path / "README.md").write_text("bench\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    (path / "README.md").write_text("bench, edited\n")
    return path


def packs_received() -> int:
    import ray

    names = [n for n in ray.util.list_named_actors() if n.startswith("subagents-host-")]
    hosts = [ray.get_actor(n, namespace="subagents") for n in names]
    return sum(int(ray.get(h.status.remote())["packsReceived"]) for h in hosts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--child-seconds", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ship-mb", type=int, default=50)
    ap.add_argument("--ship-runs", type=int, default=20)
    args = ap.parse_args()
    like_installed()
    import ray
    from ray.cluster_utils import Cluster

    from subagents.launchers import ray_ship

    with tempfile.TemporaryDirectory(prefix="subagents-bench-ray-") as tmp:
        work = Path(tmp)
        os.environ.update(
            {
                "SUBAGENTS_HOME": str(work / "home"),
                "SUBAGENTS_CONFIG_DIR": str(work / "config"),
                "SUBAGENTS_PI_BIN": str(child_script(work / "child", args.child_seconds)),
                "SUBAGENTS_MAX_PARALLEL_TASKS": str(max(args.runs, args.ship_runs)),
                "SUBAGENTS_MAX_SPAWNS_PER_JOB": str(max(args.runs, args.ship_runs)),
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
            shared = {"ray_shared_cwd": True}
            cold, _ = run_job(args.runs, args.concurrency, work, "ray", cluster.address, **shared)
            local, on_ray = [], []
            nodes: set[str] = set()
            for _ in range(args.rounds):
                local.append(run_job(args.runs, args.concurrency, work, "local", None)[0])
                wall, result = run_job(
                    args.runs, args.concurrency, work, "ray", cluster.address, **shared
                )
                on_ray.append(wall)
                nodes |= {r["executor"]["node"] for r in result["runs"]}
            ship = None
            if args.ship_mb > 0:
                repo = big_repo(work / "repo", args.ship_mb)
                t0 = time.perf_counter()
                isolated = {"isolate": "worktree"}
                local_iso, _ = run_job(
                    args.ship_runs, args.concurrency, repo, "local", None, **isolated
                )
                before = packs_received()
                ship_wall, shipped = run_job(
                    args.ship_runs, args.concurrency, repo, "ray", cluster.address, **isolated
                )
                ship = {
                    "local": local_iso,
                    "ray": ship_wall,
                    "nodes": len({r["executor"]["node"] for r in shipped["runs"]}),
                    "received": packs_received() - before,
                    **ray_ship.COUNTS,
                }
        finally:
            ray.shutdown()
            cluster.shutdown()
    ideal = args.runs * args.child_seconds / args.concurrency

    def per_run(wall: float) -> float:
        return (wall * args.concurrency / args.runs - args.child_seconds) * 1000

    lo, ra = statistics.median(local), statistics.median(on_ray)
    print(
        f"{args.runs} runs of a {args.child_seconds}s child at concurrency {args.concurrency} "
        f"on {os.cpu_count()} cores (ideal {ideal:.2f}s); cluster of 3 nodes up in {up:.1f}s, "
        f"connect {connect:.2f}s (not counted below)\n"
        f"  ray, first job (starts the hosts): wall {cold:.2f}s, overhead per run "
        f"{per_run(cold):.0f} ms\n"
        f"  {args.rounds} rounds, local and ray in turn (median; runs spread over "
        f"{len(nodes)} nodes):\n"
        f"  local executor: wall {lo:.2f}s, overhead per run {per_run(lo):.0f} ms"
        f"  ({', '.join(f'{per_run(w):.0f}' for w in local)})\n"
        f"  ray executor:   wall {ra:.2f}s, overhead per run {per_run(ra):.0f} ms"
        f"  ({', '.join(f'{per_run(w):.0f}' for w in on_ray)})\n"
        f"  ray / local wall: {ra / lo:.2f}; ray's extra per run: "
        f"{per_run(ra) - per_run(lo):.0f} ms"
    )
    if ship is not None:
        print(
            f"shipping a {args.ship_mb} MiB repository (one commit + an uncommitted edit), "
            f"{args.ship_runs} runs --isolate worktree at concurrency {args.concurrency}:\n"
            f"  packs built {ship['packsBuilt']}, sent {ship['packsSent']}, received by the "
            f"nodes {ship['received']}, for {ship['nodes']} nodes that ran runs\n"
            f"  wall: ray {ship['ray']:.2f}s, local worktrees {ship['local']:.2f}s"
        )


if __name__ == "__main__":
    main()
