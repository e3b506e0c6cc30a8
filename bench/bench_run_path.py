"""Benchmarks for the core run path (issue: core run path, "Numbers").

    .venv/bin/python bench/bench_run_path.py [--runs N] [--mb 50]

Prints four figures:
  1. supervisor start -> child spawned (median, ms)
  2. child's final event -> `subagents run` returns, child exiting by itself (median, ms)
  3. supervisor peak RSS while ingesting the big stream (MB)
  4. ingest rate of a pi stream of growing message_update partials (MB/s), beside the
     rate of `cat FILE > /dev/null` on the same file measured in the same run
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

sys.path.insert(0, str(ROOT / "tests"))

from support import pistream as pi  # noqa: E402

from subagents.config import Settings  # noqa: E402
from subagents.runs import RunRequest, prepare  # noqa: E402

SUPERVISOR = [sys.executable, "-m", "subagents.supervisor"]


def sh_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def pi_lines(steps: list[dict]) -> bytes:
    return b"".join(
        json.dumps(s["emit"], separators=(",", ":")).encode() + b"\n" for s in steps if "emit" in s
    )


def prepared(work: Path, binary: Path, env: dict[str, str] | None = None) -> Path:
    _, run_dir = prepare(
        RunRequest(task="bench", backend="pi", cwd=str(work), env=env or {}),
        Settings(),
        env={**os.environ, "SUBAGENTS_PI_BIN": str(binary)},
        home=work / "home",
    )
    return run_dir


def bench_spawn(work: Path, runs: int) -> list[float]:
    """From the moment the supervisor process is started to the child's first instruction."""
    stamp = work / "spawned"
    child = sh_script(work / "stamp-child", f'date +%s.%N > "{stamp}"\n')
    out = []
    for _ in range(runs):
        run_dir = prepared(work, child)
        t0 = time.time()
        subprocess.run([*SUPERVISOR, str(run_dir)], check=False)
        out.append((float(stamp.read_text()) - t0) * 1000)
    return out


def bench_return(work: Path, runs: int) -> list[float]:
    """From the child printing its final message (then exiting) to `subagents run` returning."""
    stream = work / "final.jsonl"
    stream.write_bytes(pi_lines([*pi.start(), pi.text_end("done"), *pi.end()]))
    stamp = work / "final-at"
    child = sh_script(work / "final-child", f'date +%s.%N > "{stamp}"\ncat "{stream}"\n')
    env = {**os.environ, "SUBAGENTS_PI_BIN": str(child), "SUBAGENTS_HOME": str(work / "home")}
    out = []
    for _ in range(runs):
        p = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "run", "-q", "x"],
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        t_end = time.time()
        assert p.returncode == 0, p.stderr
        out.append((t_end - float(stamp.read_text())) * 1000)
    return out


def make_big_stream(path: Path, mb: int) -> int:
    """pi's json mode: every delta repeats the whole partial message, so lines grow."""
    target = mb * 1_000_000
    with open(path, "wb") as f:
        size = 0
        for s in pi.start():
            f.write(json.dumps(s["emit"]).encode() + b"\n")
        text = ""
        while size < target:
            text += "lorem ipsum dolor sit amet " * 4
            if len(text) > 200_000:  # start a new message, as a new turn would
                text = ""
            msg = pi.assistant([{"type": "text", "text": text}], "stop")
            line = (
                json.dumps(
                    {
                        "type": "message_update",
                        "assistantMessageEvent": {
                            "type": "text_delta",
                            "delta": "x",
                            "partial": msg,
                        },
                        "message": msg,
                    },
                    separators=(",", ":"),
                ).encode()
                + b"\n"
            )
            f.write(line)
            size += len(line)
        for s in [pi.text_end("final"), *pi.end()]:
            f.write(json.dumps(s["emit"], separators=(",", ":")).encode() + b"\n")
    return path.stat().st_size


def bench_ingest(work: Path, mb: int) -> tuple[float, float, float, int]:
    big = work / "big.jsonl"
    size = make_big_stream(big, mb)
    child = sh_script(work / "cat-child", f'exec cat "{big}"\n')
    # Warm the page cache, then time cat alone.
    subprocess.run(["cat", str(big)], stdout=subprocess.DEVNULL, check=True)
    cats = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(["cat", str(big)], stdout=subprocess.DEVNULL, check=True)
        cats.append(time.perf_counter() - t0)
    rates, own_rates, rss = [], [], 0
    for _ in range(3):
        run_dir = prepared(work, child)
        t0 = time.perf_counter()
        proc = subprocess.Popen([*SUPERVISOR, str(run_dir)])
        _, _status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        result = json.loads((run_dir / "result.json").read_text())
        assert result["status"] == "completed", result["errorMessage"]
        assert (run_dir / "raw.jsonl").stat().st_size == size
        rates.append(size / 1e6 / elapsed)
        own_rates.append(size / 1e6 / (result["durationMs"] / 1000))
        rss = max(rss, usage.ru_maxrss)  # KiB on Linux
    return (
        statistics.median(rates),
        statistics.median(own_rates),
        size / 1e6 / statistics.median(cats),
        rss / 1024,
        size,
    )


def main() -> None:
    like_installed()
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--mb", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp:
        work = Path(tmp)
        spawn = bench_spawn(work, args.runs)
        ret = bench_return(work, args.runs)
        rate, own_rate, cat_rate, rss, size = bench_ingest(work, args.mb)
    print(
        f"supervisor start -> child spawned: median {statistics.median(spawn):.1f} ms "
        f"(min {min(spawn):.1f}, max {max(spawn):.1f}, n={len(spawn)})  [floor: <= 100 ms]"
    )
    print(
        f"final event -> `subagents run` returns: median {statistics.median(ret):.1f} ms "
        f"(min {min(ret):.1f}, max {max(ret):.1f}, n={len(ret)})  [floor: <= 100 ms]"
    )
    print(f"supervisor peak RSS (ingesting {size / 1e6:.0f} MB): {rss:.1f} MB  [floor: <= 30 MB]")
    print(
        f"ingest: {rate:.0f} MB/s through the supervisor, process start to exit "
        f"({own_rate:.0f} MB/s from child spawn to result.json); "
        f"cat to /dev/null: {cat_rate:.0f} MB/s, ratio {rate / cat_rate:.2f}  [floor: >= 200 MB/s]"
    )


if __name__ == "__main__":
    main()
