"""Memory for a big final answer: peak RSS of `subagents run -q --json t` and of its
supervisor when the child's answer (one pi ``message_end``) is ~17 MB.

    .venv/bin/python bench/bench_big_answer.py [--runs 3] [--mb 17]

The answer is held and written by design in raw.jsonl, events.jsonl (assistant_text),
transcript.md and result.json (finalText); this measures what holding it costs. RSS is
each process's VmHWM, polled every 5 ms, of this run's processes only (bench_peers.py's
poller: other `subagents` processes on the machine are not counted).
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

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_peers import PeakPoller, become_subreaper, reap_orphans  # noqa: E402
from bench_run_path import sh_script  # noqa: E402

MB = 1024 * 1024


def stream(size_mb: float) -> bytes:
    text = ("y" * 79 + "\n") * int(size_mb * 1e6 / 80)
    final = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": "stop",
        "usage": {"input": 1, "output": 2},
    }
    lines = [
        {"type": "agent_start"},
        {"type": "turn_start"},
        {"type": "message_start", "message": {"role": "assistant", "content": []}},
        {"type": "message_end", "message": final},
    ]
    return b"".join(json.dumps(obj).encode() + b"\n" for obj in lines)


def peaks_of_run(env: dict[str, str]) -> tuple[float, dict[str, int]]:
    """Wall and each role's peak RSS for one run; only this run's processes are counted
    (its tree, and the supervisor handed to us when the CLI exits before it)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "subagents.cli", "run", "-q", "--json", "t"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    poller = PeakPoller(p.pid)
    poller.start()
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    reap_orphans(p.args)  # the supervisor may outlive the CLI by a moment
    poller.stop.set()
    poller.join()
    assert p.returncode == 0, err
    assert len(json.loads(out)["finalText"]) > 0
    return wall, poller.by_role()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=float, default=17.0)
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    become_subreaper()
    with tempfile.TemporaryDirectory(prefix="subagents-big-answer-") as tmp:
        work = Path(tmp)
        data = work / "stream.jsonl"
        data.write_bytes(stream(args.mb))
        child = sh_script(work / "child", f"cat '{data}'\n")
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            "SUBAGENTS_PI_BIN": str(child),
        }
        runs = [peaks_of_run(env) for _ in range(args.runs)]
        size = data.stat().st_size
        job_files = sorted((work / "home" / "jobs").glob("*/job.json"))
        job_json = job_files[-1].stat().st_size if job_files else 0
    med = statistics.median
    cli = med(p.get("cli", 0) for _, p in runs) / MB
    sup = med(p.get("supervisor", 0) for _, p in runs) / MB
    print(
        f"answer line {size / MB:.1f} MB, medians of {args.runs}: wall "
        f"{med(w for w, _ in runs):.2f} s, peak RSS CLI {cli:.1f} MB, supervisor {sup:.1f} MB "
        f"(4x the line: {4 * size / MB:.1f} MB); job.json {job_json / MB:.1f} MB"
    )


if __name__ == "__main__":
    main()
