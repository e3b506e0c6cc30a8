"""Benchmark: what a delegation costs beyond running the child by hand (issue 38).

    .venv/bin/python bench/bench_delegation.py [--pairs 15] [--skip-pi] [--against SRC]
        [--agent NAME]

Whole processes, timed in pairs, alternating which goes first:
- **pi**: ``subagents run -q --backend pi --model mock/mock-model TASK`` against the child
  alone, ``pi --mode json -p --no-session --provider mock --model mock-model TASK``, both
  talking to the project's mock model on 127.0.0.1 (needs ``pi`` on PATH, as scripts/setup
  puts it in .tools/node_modules/.bin);
- **shell**: ``subagents run -q TASK`` (the installed command, next to this interpreter) with a shell-script pi stand-in that answers at once,
  against that script run by hand.
Prints, per child, the median of each, the median of the pairs' differences (ours -
alone): the fixed cost of delegating through us, and the ratio of the medians (ours / alone);
and the same for CPU time, of every process each side started (this process is a child
subreaper, so the supervisor that outlives ``subagents run`` is reaped and counted here): the
figure the machine's load changes least.
Goals (issue 38): pi ≤ 50 ms of ours; the whole ``subagents run -q`` with the shell child
≤ 100 ms.

The warm command server (cli/warmserver.py) as a user gets it: the first ``subagents run``
finds none, runs in-process and starts one as it exits (printed apart, "first call"); the
later ones are handed to it. The benchmark's server is its own (a private runtime dir), and
its CPU (the forked workers' included) is counted with ours. Then the warm path against the
in-process one (``SUBAGENTS_WARM=0``), paired the same way.

Then where the time of ``subagents run -q`` with the shell child goes (medians, ms), from the
run's own records: the command spawned -> its run's supervisor started (``supervisor.json``;
before the run exists when it was started ahead, at the command's start) -> the run made
(``meta.json``'s ``createdAt``) -> the child started (its ``run_started`` event written, just
after the spawn; the event's ``createTime``, from procfs, is off by up to a second: the boot
time it counts from is given in whole seconds) -> the child's first event -> ``result.json``
written (its mtime: the file system's clock, a few ms coarse) -> the command exited.

With ``--against SRC``, that checkout's spans too, its runs and ours in alternation, and
with pi, its whole runs paired with ours.
With ``--agent NAME`` also: ``subagents run -q --agent NAME`` against the same command
without it (an agent file read and checked: once per content, then kept), and with
``--against`` the same against that checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_peers import become_subreaper, reap_orphans, warm_servers  # noqa: E402
from benchenv import like_installed  # noqa: E402

from subagents.demo import mockmodel as mm  # noqa: E402
from subagents.demo.mockmodel import MockModelServer, Script  # noqa: E402

SHELL_CHILD = """#!/bin/sh
case "$1" in --version) echo 0.73.1; exit 0;; esac
echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop","model":"m"}}'
"""


def _children_cpu() -> float:
    """CPU seconds of every process we started, the warm server's workers included (they
    are its children: counted in its ``cutime`` once it has reaped them, before their
    command's caller hears of their end)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime + sum(_process_cpu(pid) for pid in warm_servers())


def _process_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime (fields 14-17, the 12th-15th after the name).
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds to the command's exit, and CPU seconds of every process it started."""
    c0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    wall = time.perf_counter() - t0
    reap_orphans(argv)
    return wall, _children_cpu() - c0


def newest_run(home: Path) -> Path:
    return max((home / "runs").iterdir(), key=lambda d: d.stat().st_mtime)


def spans(argv: list[str], envs: list[dict[str, str]], n: int) -> list[str]:
    """Where one ``subagents run -q`` spends its time, from its run's records (see above):
    for each of ``envs`` (this checkout's, another's), their runs in alternation."""
    names = ("-> supervisor", "-> run made", "-> child", "-> first event", "-> result", "-> exit")
    got: list[dict[str, list[float]]] = [{name: [] for name in names} for _ in envs]
    for i in range(n):
        order = list(enumerate(envs))
        for k, env in order if i % 2 == 0 else order[::-1]:
            t0 = time.time()
            subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True)
            t_exit = time.time()
            reap_orphans(argv)
            run = newest_run(Path(env["SUBAGENTS_HOME"]))
            events = [json.loads(line) for line in (run / "events.jsonl").open()]
            started = next(e for e in events if e["type"] == "run_started")
            first = next(e for e in events if e["type"] != "run_started")
            marks = [
                t0,
                json.loads((run / "supervisor.json").read_text())["createTime"],
                json.loads((run / "meta.json").read_text())["createdAt"],
                started["ts"],
                first["ts"],
                (run / "result.json").stat().st_mtime,
                t_exit,
            ]
            for name, a, b in zip(names, marks, marks[1:], strict=False):
                got[k][name].append((b - a) * 1000)
    med = statistics.median
    return [", ".join(f"{name} {med(v):+.0f}" for name, v in each.items()) for each in got]


def pairs(
    ours: list[str],
    alone: list[str],
    env: dict[str, str],
    n: int,
    alone_env: dict[str, str] | None = None,
) -> str:
    other = alone_env or env
    timed(ours, env), timed(alone, other)  # warm both (page cache, bytecode, pi's first start)
    mine, theirs = [], []
    for i in range(n):
        if i % 2:
            b, a = timed(alone, other), timed(ours, env)
        else:
            a, b = timed(ours, env), timed(alone, other)
        mine.append(a)
        theirs.append(b)
    med = statistics.median
    out = []
    for k, what in enumerate(("wall", "cpu")):
        m, t = med(x[k] for x in mine), med(x[k] for x in theirs)
        d = med(x[k] - y[k] for x, y in zip(mine, theirs, strict=True))
        out.append(
            f"{what}: ours {m * 1000:.0f} ms, alone {t * 1000:.0f} ms, ours - alone "
            f"{d * 1000:+.0f} ms, ours / alone {m / t:.2f}"
        )
    return f"(median of {n} pairs)\n  " + "\n  ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--skip-pi", action="store_true")
    ap.add_argument(
        "--against",
        metavar="SRC",
        help="also time another checkout's src (e.g. the branch point's) as 'alone' against "
        "this one's, with the shell child",
    )
    ap.add_argument(
        "--agent",
        metavar="NAME",
        help="also time `run -q --agent NAME` against `run -q`, with the shell child",
    )
    args = ap.parse_args()
    like_installed(warm=True)
    become_subreaper()
    # What a user runs: the installed command (its console script), not `python -m
    # subagents.cli`, whose runpy costs every call ~9 ms of CPU more.
    script = Path(sys.executable).with_name("subagents")
    subagents = [str(script)] if script.exists() else [sys.executable, "-m", "subagents.cli"]
    subagents += ["run", "-q"]
    print(f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-delegation-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "SUBAGENTS_HOME": str(work / "home")}
        child = work / "pi-standin"
        child.write_text(SHELL_CHILD)
        child.chmod(0o755)
        shell_env = {**env, "SUBAGENTS_PI_BIN": str(child)}
        wall, cpu = timed([*subagents, "hi"], shell_env)
        print(
            f"first call (no warm server yet: in-process, starting one as it exits): "
            f"wall {wall * 1000:.0f} ms, cpu {cpu * 1000:.0f} ms"
        )
        print("shell child:", pairs([*subagents, "hi"], [str(child), "hi"], shell_env, args.pairs))
        if not args.against:
            print("  spans (ms):", *spans([*subagents, "hi"], [shell_env], args.pairs))
        else:
            # (its own home: its runs are told from ours by where they are)
            theirs = {
                **shell_env,
                "PYTHONPATH": str(Path(args.against).resolve()),
                "SUBAGENTS_HOME": str(work / "home-against"),
            }
            mine, other = spans([*subagents, "hi"], [shell_env, theirs], args.pairs)
            print("  spans (ms):", mine)
            print(f"  spans (ms) of {args.against}, in turn:", other)
            print(
                f"against {args.against} (as 'alone'):",
                pairs([*subagents, "hi"], [*subagents, "hi"], shell_env, args.pairs, theirs),
            )
        in_process = {**shell_env, "SUBAGENTS_WARM": "0"}
        print(
            "warm against in-process (SUBAGENTS_WARM=0, as 'alone'):",
            pairs([*subagents, "hi"], [*subagents, "hi"], shell_env, args.pairs, in_process),
        )
        if args.agent:
            named = [*subagents, "--agent", args.agent, "hi"]
            print(
                f"--agent {args.agent} (as 'ours') against none (as 'alone'):",
                pairs(named, [*subagents, "hi"], shell_env, args.pairs),
            )
            if args.against:
                print(
                    f"--agent {args.agent}, against {args.against} (as 'alone'):",
                    pairs(named, named, shell_env, args.pairs, theirs),
                )
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
                if args.against:
                    their_pi = {**pi_env, "PYTHONPATH": theirs["PYTHONPATH"]}
                    their_pi["SUBAGENTS_HOME"] = str(work / "home-against")
                    print(
                        f"pi, against {args.against} (as 'alone'):",
                        pairs(ours, ours, pi_env, args.pairs, their_pi),
                    )
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
