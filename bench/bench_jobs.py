"""Benchmark: 50 short runs at concurrency 8 (issue: jobs, "Tests and numbers").

    .venv/bin/python bench/bench_jobs.py [--runs 50] [--concurrency 8] [--child-seconds 0.5]

Each child sleeps ``--child-seconds`` and answers. The ideal wall time is
runs x child time / concurrency; the overhead per run is what the job took beyond
that, spread over the runs (wall x concurrency / runs - child time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    path.write_text(f"#!/bin/sh\nsleep {seconds}\necho '{final}'\n")
    path.chmod(0o755)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--child-seconds", type=float, default=0.5)
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
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
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "run", "--json", "-q", "-f", str(plan)],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
        job = json.loads(p.stdout)
        assert len(job["runs"]) == args.runs and job["status"] == "completed"
    ideal = args.runs * args.child_seconds / args.concurrency
    per_run = wall * args.concurrency / args.runs - args.child_seconds
    print(
        f"{args.runs} runs of a {args.child_seconds}s child at concurrency {args.concurrency} "
        f"on {os.cpu_count()} cores: wall {wall:.2f}s (whole `subagents run`), ideal {ideal:.2f}s "
        f"(runs x child / concurrency), ratio {wall / ideal:.2f}, overhead per run {per_run * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
