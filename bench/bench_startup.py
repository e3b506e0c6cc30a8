"""Fixed cost: where the time goes from `subagents run` starting to the child running.

    .venv/bin/python bench/bench_startup.py [--runs 15] [--against SRC]

The child is a script that writes the time it started (``date +%s.%N``) and prints a
one-line answer. Prints medians, in ms, of:
  whole process   `python -m subagents.cli run -q t` spawned -> child started
  interpreter     `python -c pass`, spawn to exit
  then, in this process with everything imported, each step of the run path:
  parse           the task given on the command line -> a job spec (parse_job)
  prepare_job     config, agent, plan, the job's record and the ps index
  drive -> launch job start (record, lifecycle), run directory and meta.json, up to
                  the supervisor's spawn
  launch          spawning the supervisor (the runner)
  supervisor      supervisor spawned -> child started (its interpreter, imports, spawn)
All of it in-process (``SUBAGENTS_WARM=0``): a scripted call handed to a warm command server
skips the CLI's and the supervisor's interpreter starts and imports (bench_delegation.py
measures that path). And what is left of the whole: the CLI's imports (listed: the heaviest top-level imports of
`subagents run`, from python -X importtime), click's parsing, and what the steps cost the
first time in a process (config and agent files found and read, pydantic's first
validations), which the warm in-process figures leave out.
With ``--against SRC`` (another checkout's ``src``, e.g. the branch point's), the whole
process is also timed with that code, in alternation with this one, and the ratio of the
medians given: the figure a loaded machine moves least.
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

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from bench_run_path import sh_script  # noqa: E402
from benchenv import like_installed  # noqa: E402

ANSWER = '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}'


def spawn_to_exit(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return (time.perf_counter() - t0) * 1000


def whole(work: Path, env: dict[str, str], stamp: Path) -> float:
    """``subagents run -q t`` spawned -> its child started, ms."""
    t0 = time.time()
    subprocess.run(
        [sys.executable, "-m", "subagents.cli", "run", "-q", "t"],
        env=env,
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    return (float(stamp.read_text()) - t0) * 1000


def in_process(work: Path, env: dict[str, str], stamp: Path, runs: int) -> dict[str, list[float]]:
    os.environ.update(env)
    from subagents import api
    from subagents.jobs import parse_job
    from subagents.launchers.process import ProcessLauncher

    marks: dict[str, float] = {}
    real_launch = ProcessLauncher.launch

    def timed_launch(self: ProcessLauncher, *args: object, **kwargs: object) -> object:
        marks["launch"] = time.time()
        launched = real_launch(self, *args, **kwargs)  # type: ignore[arg-type]
        marks["launched"] = time.time()
        return launched

    ProcessLauncher.launch = timed_launch  # type: ignore[assignment,method-assign]
    steps: dict[str, list[float]] = {
        k: [] for k in ("parse", "prepare_job", "drive -> launch", "launch", "supervisor")
    }
    for _ in range(runs):
        t0 = time.perf_counter()
        spec = parse_job({"mode": "single", "steps": [{"task": "t"}]}, "arguments")
        t1 = time.perf_counter()
        job = api.prepare_job(spec)
        t2 = time.time()
        api.drive(job)
        steps["parse"].append((t1 - t0) * 1000)
        steps["prepare_job"].append((time.perf_counter() - t1) * 1000 - (time.time() - t2) * 1000)
        steps["drive -> launch"].append((marks["launch"] - t2) * 1000)
        steps["launch"].append((marks["launched"] - marks["launch"]) * 1000)
        steps["supervisor"].append((float(stamp.read_text()) - marks["launched"]) * 1000)
    return steps


def heaviest_imports(env: dict[str, str], top: int = 8) -> list[tuple[int, str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "subagents.cli", "run", "-q", "t"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        # Top-level imports only: their cumulative time includes what they pulled in.
        if len(parts) == 3 and parts[2].startswith(" ") and not parts[2].startswith("  "):
            with_children = parts[1].strip()
            if with_children.isdigit():
                rows.append((int(with_children), parts[2].strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--against", metavar="SRC", help="another checkout's src, in alternation")
    args = ap.parse_args()
    like_installed()
    with tempfile.TemporaryDirectory(prefix="subagents-startup-") as tmp:
        work = Path(tmp)
        stamp = work / "started-at"
        child = sh_script(work / "child", f"date +%s.%N > '{stamp}'\necho '{ANSWER}'\n")
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
            "SUBAGENTS_PI_BIN": str(child),
        }
        theirs_env = {**env, "PYTHONPATH": str(Path(args.against or ".").resolve())}
        total, interp, theirs = [], [], []
        for _ in range(args.runs):
            total.append(whole(work, env, stamp))
            interp.append(spawn_to_exit([sys.executable, "-c", "pass"], env))
            if args.against:
                theirs.append(whole(work, theirs_env, stamp))
        imports = heaviest_imports(env)
        their_imports = heaviest_imports(theirs_env) if args.against else []
        steps = in_process(work, env, stamp, args.runs)
    med = statistics.median
    print(f"`subagents run -q t` -> child started, whole process: {med(total):7.1f} ms")
    print(f"  interpreter start (python -c pass):               {med(interp):7.1f} ms")
    for name, values in steps.items():
        print(f"  {name + ':':48} {med(values):7.1f} ms")
    rest = med(total) - med(interp) - sum(med(v) for v in steps.values())
    print(f"  left: CLI imports, click, first-use costs:        {rest:7.1f} ms")
    print("heaviest imports of `subagents run` (ms, with what they import):")
    for us, name in imports:
        print(f"  {us / 1000:7.1f}  {name}")
    if args.against:
        ratio = med(total) / med(theirs)
        print(f"against {args.against}, in turn: {med(theirs):7.1f} ms; this / that {ratio:.2f}")
        for us, name in their_imports:
            print(f"  {us / 1000:7.1f}  {name}")


if __name__ == "__main__":
    main()
