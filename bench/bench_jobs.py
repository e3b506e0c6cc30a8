"""Benchmark: 50 short runs at concurrency 8 (issue: jobs, "Tests and numbers").

    .venv/bin/python bench/bench_jobs.py [--runs 50] [--concurrency 8] [--child-seconds 0.5]

Each child sleeps ``--child-seconds`` and answers. The ideal wall time is
runs x child time / concurrency; the overhead per run is what the job took beyond
that, spread over the runs (wall x concurrency / runs - child time).

From the runs' own records it also says where the time went: the command's start to
the first child spawned, a slot's turnover (a run's result.json written -> the next
run's child spawned in the slot it freed), and the last result.json -> the command's
exit. ``--repeat N`` runs the whole job N times and prints every run, then the medians.
``--arguments`` gives the tasks on the command line (``run --parallel``) instead of a plan
file. ``--against SRC`` (repeatable) runs each repeat once with this checkout and once with
the package in each SRC (another checkout's ``src``, on PYTHONPATH), in turn, then prints
each median and its ratio to this one: how a change is measured against its baseline on a
shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchenv import like_installed  # noqa: E402


def child_script(path: Path, seconds: float) -> Path:
    """A pi stand-in that sleeps ``seconds`` and answers."""
    final = json.dumps(
        {
            "type": "message_end",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "done"}],
                "stopReason": "stop",
                "model": "m",
            },
        }
    )
    # Asked its version (once per binary, to choose pi's mode): one before rpc mode.
    version = 'case "$1" in --version) echo 0.73.1; exit 0;; esac\n'
    path.write_text(f"#!/bin/sh\n{version}sleep {seconds}\necho '{final}'\n")
    path.chmod(0o755)
    return path


def spawned_at(run_dir: Path) -> float:
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "run_started":
            return float(event["ts"])
    raise AssertionError(f"{run_dir}: no run_started event")


def breakdown(home: Path, concurrency: int, t0: float, t_end: float) -> dict[str, float]:
    """Where the time went, in ms, from the run directories (wall-clock stamps)."""
    runs = [d for d in (home / "runs").iterdir() if d.is_dir()]
    spawned = sorted(spawned_at(d) for d in runs)
    results = sorted((d / "result.json").stat().st_mtime for d in runs)
    # Each run after the first wave takes the slot of the earliest result not yet paired.
    free = list(results)
    turnovers = []
    for at in spawned[concurrency:]:
        slot = next(r for r in free if r <= at + 0.005)
        free.remove(slot)
        turnovers.append(max(0.0, at - slot))
    return {
        "start": (spawned[0] - t0) * 1000,
        "wave": (spawned[min(concurrency, len(spawned)) - 1] - t0) * 1000,
        "turnover": statistics.median(turnovers) * 1000 if turnovers else 0.0,
        "end": (t_end - results[-1]) * 1000,
    }


def one_job(args: argparse.Namespace, src: Path | None = None) -> tuple[float, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp:
        work = Path(tmp)
        child = child_script(work / "child", args.child_seconds)
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_PI_BIN": str(child),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            "SUBAGENTS_MAX_PARALLEL_TASKS": str(args.runs),
            "SUBAGENTS_MAX_SPAWNS_PER_JOB": str(args.runs),
        }
        if src is not None:  # that checkout's package first, for the CLI and its supervisors
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
        plan = work / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "mode": "parallel",
                    "concurrency": args.concurrency,
                    "tasks": [{"task": f"t{i}"} for i in range(args.runs)],
                }
            )
        )
        t0_wall = time.time()
        t0 = time.perf_counter()
        if args.arguments:  # `run --parallel` with the tasks as arguments: no plan file
            tasks = [f"t{i}" for i in range(args.runs)]
            how = ["--parallel", "-j", str(args.concurrency), *tasks]
        else:
            how = ["-f", str(plan)]
        p = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "run", "--json", "-q", *how],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
        job = json.loads(p.stdout)
        assert len(job["runs"]) == args.runs and job["status"] == "completed"
        return wall, breakdown(work / "home", args.concurrency, t0_wall, t0_wall + wall)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--child-seconds", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--arguments",
        action="store_true",
        help="`run --parallel -j N t0 t1 ...` instead of a plan file (`run -f plan.json`)",
    )
    ap.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        metavar="SRC",
        help="another checkout's src directory (may repeat): each repeat runs every tree in turn",
    )
    args = ap.parse_args()
    like_installed()
    trees: list[tuple[str, Path | None]] = [("this", None)]
    for src in (p.resolve() for p in args.against):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
        trees.append((f"against {src}", src))
    ideal = args.runs * args.child_seconds / args.concurrency
    walls: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(args.repeat):
        for name, src in trees:
            wall, parts = one_job(args, src)
            walls[name].append(wall)
            report(args, wall, parts, ideal, name if len(trees) > 1 else "")
    if args.repeat > 1 or len(trees) > 1:
        medians = {name: statistics.median(w) for name, w in walls.items()}
        for name, wall in medians.items():
            print(f"{name}: median of {args.repeat}: wall {wall:.2f}s, ratio {wall / ideal:.2f}")
        for name, _ in trees[1:]:
            print(f"this / {name}: {medians['this'] / medians[name]:.3f} (median walls)")


def report(
    args: argparse.Namespace, wall: float, parts: dict[str, float], ideal: float, label: str
) -> None:
    per_run = wall * args.concurrency / args.runs - args.child_seconds
    print(
        (f"[{label}] " if label else "")
        + f"{args.runs} runs of a {args.child_seconds}s child at concurrency {args.concurrency} "
        f"on {os.cpu_count()} cores: wall {wall:.2f}s (whole `subagents run`), ideal {ideal:.2f}s "
        f"(runs x child / concurrency), ratio {wall / ideal:.2f}, overhead per run {per_run * 1000:.0f} ms"
    )
    print(
        f"  start -> first child {parts['start']:.0f} ms, -> first wave's last child "
        f"{parts['wave']:.0f} ms; slot turnover (result.json -> next child) median "
        f"{parts['turnover']:.0f} ms; last result.json -> exit {parts['end']:.0f} ms"
    )


if __name__ == "__main__":
    main()
