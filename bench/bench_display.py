"""The live display's cost on a terminal: `subagents run --json t` (progress on) with its
stderr on a pseudo-terminal, the child catting a stream of bench/streams.py.

    .venv/bin/python bench/bench_display.py [--runs 3] [--stream flat] [--quick] [--mode pty]

``--mode``: ``pty`` (the default: the live display), ``file`` (stderr to a file: plain
lines), ``jsonl`` (``--progress jsonl`` to a file), ``quiet`` (``-q``). Prints, as medians: wall, the CLI's own CPU (user + system of the `subagents run` process
alone, read from /proc when it has exited and before it is reaped, so the supervisor is
not in it), the CLI's peak RSS, and what reached the terminal (bytes, lines). The
terminal is 120x40; stdout (the --json result) goes to a file and is checked.
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
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import streams  # noqa: E402
from bench_peers import PeakPoller, become_subreaper, reap_orphans  # noqa: E402
from bench_run_path import sh_script  # noqa: E402
from benchenv import like_installed  # noqa: E402
from support.ptyterm import Terminal  # noqa: E402  (tests/, on the path through streams)

MB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def own_cpu(pid: int) -> float:
    """utime + stime of ``pid`` itself (a zombie keeps them until it is reaped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_once(argv: list[str], env: dict[str, str], work: Path, mode: str) -> dict[str, float]:
    out, err_path = work / "stdout", work / "stderr"
    with (
        Terminal(cols=120, rows=40) as term,
        open(out, "wb") as stdout,
        open(err_path, "wb") as err,
    ):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            env={**env, **term.env()},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=term.slave if mode == "pty" else err,  # else the terminal stays blank
        )
        poller = PeakPoller(proc.pid)
        poller.start()
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        wall = time.perf_counter() - t0
        cpu = own_cpu(proc.pid)
        proc.wait()
        poller.stop.set()
        poller.join()
        reap_orphans(argv)  # a supervisor that outlived the CLI by a moment
    seen = term.output if mode == "pty" else err_path.read_bytes()
    if proc.returncode != 0:
        raise RuntimeError(f"exited {proc.returncode}: {seen[-2000:].decode(errors='replace')}")
    answer = json.loads(out.read_text())
    if answer.get("finalText") != streams.FINAL_ANSWER:
        raise RuntimeError(f"wrong answer: {answer.get('finalText')!r}")
    return {
        "wall": wall,
        "cpu": cpu,
        "rss": poller.by_role().get("cli", 0) / MB,
        "bytes": len(seen),
        "lines": seen.count(b"\n"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stream", default="flat", choices=sorted(streams.STREAMS))
    ap.add_argument("--quick", action="store_true", help="a stream of about a tenth the events")
    ap.add_argument("--mode", default="pty", choices=["pty", "file", "jsonl", "quiet"])
    args = ap.parse_args()
    like_installed()
    become_subreaper()
    backend = streams.STREAMS[args.stream]
    with tempfile.TemporaryDirectory(prefix="subagents-display-") as tmp:
        work = Path(tmp)
        path = work / "stream.jsonl"
        size = streams.write(args.stream, path, args.quick)
        child = sh_script(work / "child", f'exec cat "{path}"\n')
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            f"SUBAGENTS_{backend.upper()}_BIN": str(child),
        }
        env.pop("NO_COLOR", None)
        argv = [sys.executable, "-m", "subagents.cli", "run", "--json"]
        argv += {"jsonl": ["--progress", "jsonl"], "quiet": ["-q"]}.get(args.mode, [])
        if backend != "pi":
            argv += ["--backend", backend]
        argv.append("t")
        samples = []
        for i in range(args.runs):
            s = run_once(argv, env, work, args.mode)
            samples.append(s)
            print(
                f"run {i + 1}/{args.runs}: wall {s['wall']:.3f}s CLI CPU {s['cpu']:.3f}s "
                f"CLI RSS {s['rss']:.1f} MB, terminal {s['bytes']} bytes {s['lines']} lines",
                file=sys.stderr,
                flush=True,
            )
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    print(
        f"{args.stream} ({size / MB:.1f} MB), --mode {args.mode}, medians of {args.runs}: "
        f"wall {med['wall']:.3f} s, CLI CPU {med['cpu']:.3f} s, CLI peak RSS {med['rss']:.1f} MB, "
        f"terminal {med['bytes'] / 1000:.0f} kB in {med['lines']:.0f} lines"
    )


if __name__ == "__main__":
    main()
