"""Benchmark: what a delegation costs beyond running the child by hand (issue 38).

    .venv/bin/python bench/bench_delegation.py [--pairs 15] [--skip-pi]

Whole processes, timed in pairs, alternating which goes first:
- **pi**: ``subagents run -q --backend pi --model mock/mock-model TASK`` against the child
  alone, ``pi --mode json -p --no-session --provider mock --model mock-model TASK``, both
  talking to the project's mock model on 127.0.0.1 (needs ``pi`` on PATH, as scripts/setup
  puts it in .tools/node_modules/.bin);
- **shell**: ``subagents run -q TASK`` with a shell-script pi stand-in that answers at once,
  against that script run by hand.
Prints, per child, the median of each and the median of the pairs' differences (ours -
alone): the fixed cost of delegating through us. Goals (issue 38): pi ≤ 50 ms of ours; the
whole ``subagents run -q`` with the shell child ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from benchenv import like_installed  # noqa: E402

from subagents.demo import mockmodel as mm  # noqa: E402
from subagents.demo.mockmodel import MockModelServer, Script  # noqa: E402

SHELL_CHILD = """#!/bin/sh
case "$1" in --version) echo 0.73.1; exit 0;; esac
echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop","model":"m"}}'
"""


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return time.perf_counter() - t0


def pairs(ours: list[str], alone: list[str], env: dict[str, str], n: int) -> str:
    timed(ours, env), timed(alone, env)  # warm both (page cache, bytecode, pi's first start)
    mine, theirs, diffs = [], [], []
    for i in range(n):
        if i % 2:
            b, a = timed(alone, env), timed(ours, env)
        else:
            a, b = timed(ours, env), timed(alone, env)
        mine.append(a)
        theirs.append(b)
        diffs.append(a - b)
    med = statistics.median
    return (
        f"ours {med(mine) * 1000:.0f} ms, alone {med(theirs) * 1000:.0f} ms, "
        f"ours - alone {med(diffs) * 1000:+.0f} ms (median of {n} pairs)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--skip-pi", action="store_true")
    args = ap.parse_args()
    like_installed()
    subagents = [sys.executable, "-m", "subagents.cli", "run", "-q"]
    print(f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-delegation-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "SUBAGENTS_HOME": str(work / "home")}
        child = work / "pi-standin"
        child.write_text(SHELL_CHILD)
        child.chmod(0o755)
        shell_env = {**env, "SUBAGENTS_PI_BIN": str(child)}
        print("shell child:", pairs([*subagents, "hi"], [str(child), "hi"], shell_env, args.pairs))
        pi = shutil.which("pi")
        if args.skip_pi:
            pass
        elif pi is None:
            print("pi: not on PATH (run scripts/setup; export PATH=.tools/node_modules/.bin:$PATH)")
        else:
            with MockModelServer(Script(use_tool=False, final_text="ok")) as srv:
                pi_env = {**env, **mm.write_pi_config(work / "pi", srv.url)}
                ours = [*subagents, "--backend", "pi", "--model", "mock/mock-model", "hi"]
                print("pi:", pairs(ours, mm.pi_argv("hi", pi=pi), pi_env, args.pairs))
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
