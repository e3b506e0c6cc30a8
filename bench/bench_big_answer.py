"""Memory for a big final answer: peak RSS of `subagents run -q --json t` and of its
supervisor when the child's answer (one pi ``message_end``) is ~17 MB.

    .venv/bin/python bench/bench_big_answer.py [--runs 3] [--mb 17]

The answer is held and written by design in raw.jsonl, events.jsonl (assistant_text),
transcript.md and result.json (finalText); this measures what holding it costs. RSS is
each process's VmHWM, polled every 5 ms (as bench_peers.py does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

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
    peaks: dict[str, int] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if b"subagents" not in argv:
                        continue
                    role = "supervisor" if b"subagents.runs.supervisor" in argv else "cli"
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            kb = int(line.split()[1])
                            peaks[role] = max(peaks.get(role, 0), kb * 1024)
                except OSError:
                    continue
            time.sleep(0.005)

    poller = threading.Thread(target=poll)
    poller.start()
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "subagents.cli", "run", "-q", "--json", "t"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    wall = time.perf_counter() - t0
    time.sleep(0.2)  # the supervisor may outlive the CLI by a moment
    done.set()
    poller.join()
    assert p.returncode == 0, p.stderr
    return wall, peaks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=float, default=17.0)
    args = ap.parse_args()
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
    med = statistics.median
    cli = med(p.get("cli", 0) for _, p in runs) / MB
    sup = med(p.get("supervisor", 0) for _, p in runs) / MB
    print(
        f"answer line {size / MB:.1f} MB, medians of {args.runs}: wall "
        f"{med(w for w, _ in runs):.2f} s, peak RSS CLI {cli:.1f} MB, supervisor {sup:.1f} MB "
        f"(4x the line: {4 * size / MB:.1f} MB)"
    )


if __name__ == "__main__":
    main()
