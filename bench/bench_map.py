"""Benchmark: a map of 1,000 rows of an instant child at concurrency 16, local executor
(issue 33, "Numbers").

    .venv/bin/python bench/bench_map.py [--rows 1000] [--concurrency 16]

The child answers at once (bench_jobs.py's shell stand-in for pi, sleeping 0 s), so the ideal
wall time is ~0 and the overhead per row is the map's wall time over its rows. The
driver (``subagents map`` in the foreground) is polled for its RSS every 50 ms: its growth
is the peak minus what it held once the first 5% of the rows were done (imports and
warm-up excluded). The results file is checked complete (every row once, completed).

Baseline, in the same process and on the same machine: ``subagents run --parallel`` of 8
such tasks at -j 8, repeated; its wall per run is what one run costs in a job, and the
map's per-row overhead is given as a ratio to it.

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
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs import child_script
from benchenv import like_installed


def run_map(work: Path, env: dict[str, str], rows: int, concurrency: int) -> dict[str, float]:
    data = work / "rows.txt"
    data.write_text("".join(f"row{i}\n" for i in range(rows)))
    out = work / "results.jsonl"
    argv = [sys.executable, "-m", "subagents.cli", "map", str(data), "--task", "do {line}"]
    argv += ["-j", str(concurrency), "--out", str(out), "-q"]
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
    }


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
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        work = Path(tmp)
        like_installed()
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            "SUBAGENTS_PI_BIN": str(child_script(work / "pi", 0)),
        }
        load = os.getloadavg()[0]
        base, base_cpu = run_parallel(work, env, args.baseline_repeat)
        figures = run_map(work, env, args.rows, args.concurrency)
        load = max(load, os.getloadavg()[0])
    print(f"rows {args.rows} at -j {args.concurrency}, local executor, instant child")
    print(f"  map wall                 {figures['wall']:.1f} s (exit {figures['exit']:.0f})")
    print(f"  overhead per row         {figures['per_row_ms']:.1f} ms (ideal wall ~0)")
    print(
        f"  driver RSS               {figures['rss_early_mib']:.1f} MiB after 5% of rows,"
        f" peak {figures['rss_peak_mib']:.1f} MiB: growth {figures['growth_mib']:.1f} MiB"
    )
    print(f"  results file complete    {bool(figures['complete'])}")
    print(f"  baseline: run --parallel 8 at -j 8, per run  {base * 1000:.1f} ms")
    print(f"  ratio map row / parallel run  {figures['per_row_ms'] / (base * 1000):.2f}")
    print(
        f"  CPU per row               {figures['cpu_row_ms']:.1f} ms (the driver's own"
        f" {figures['driver_row_ms']:.1f} ms); per parallel run {base_cpu * 1000:.1f} ms:"
        f" ratio {figures['cpu_row_ms'] / (base_cpu * 1000):.2f}"
    )
    print(f"  load average (1 min, highest seen)  {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
