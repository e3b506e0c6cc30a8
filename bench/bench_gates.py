"""Benchmark: what an acceptance gate adds to a run (issue 33: "a gate adds no more than its
command's own time plus 50 ms").

    .venv/bin/python bench/bench_gates.py [--pairs 10]

Each pair runs ``subagents run -q --json`` of an instant child once without and once with
``--verify true`` (in turn, so a busy machine weighs on both alike). The gate's cost is the
wall difference; its command's own time is the ``durationMs`` its check recorded; what the
gate adds beyond that is the difference of the two, as a median over the pairs.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs import child_script
from benchenv import like_installed


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, object]]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10)
    args = ap.parse_args()
    like_installed()
    with tempfile.TemporaryDirectory(prefix="bench-gates-") as tmp:
        work = Path(tmp)
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            "SUBAGENTS_PI_BIN": str(child_script(work / "pi", 0)),
        }
        base = [sys.executable, "-m", "subagents.cli", "run", "-q", "--json", "--cwd", tmp]
        plain, gated, command = [], [], []
        for _ in range(args.pairs):
            wall, _result = timed([*base, "t"], env)
            plain.append(wall)
            wall, result = timed([*base, "--verify", "true", "t"], env)
            verification = result["verification"]
            assert isinstance(verification, dict) and verification["passed"]
            gated.append(wall)
            command.append(verification["attempts"][0]["durationMs"] / 1000)
    added = [g - p - c for g, p, c in zip(gated, plain, command, strict=True)]
    print(
        f"{args.pairs} pairs of `run -q --json` of an instant child, without and with --verify true"
    )
    print(f"  median wall without the gate   {statistics.median(plain) * 1000:.1f} ms")
    print(f"  median wall with the gate      {statistics.median(gated) * 1000:.1f} ms")
    print(f"  median time of `true` itself   {statistics.median(command) * 1000:.1f} ms")
    print(f"  median added beyond it         {statistics.median(added) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
