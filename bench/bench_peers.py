"""Peer benchmark: `subagents run` against what others do with the same stream.

    .venv/bin/python bench/bench_peers.py [--runs 5] [--quick] [--streams flat,claude]

Each stream of bench/streams.py is replayed by a child that cats it, and read by
  ours    `subagents run -q --json t` (`--backend claude` for the claude stream), the
          child given through SUBAGENTS_PI_BIN / SUBAGENTS_CLAUDE_BIN, a private
          SUBAGENTS_HOME;
  peer A  bench/peer_pi.mjs (node): the loop of pi's official subagent example;
  peer B  bench/peer_claude.py: claude-agent-sdk's query() with bench/fake_claude.
Ours and the peer run as whole processes, in alternation, `--runs` times each.

Measures, per run:
  wall  from spawning the command to its exit (what its caller waits for);
  CPU   user + system of every process of the run, children included: this benchmark
        makes itself a child subreaper, so a process that outlives its parent (our
        supervisor after `subagents run` has returned) is still reaped, and counted, here;
  RSS   the peak of each process, read from VmHWM in /proc/PID/status every 5 ms
        (the kernel's own high-water mark, so only growth in a process's last 5 ms
        could be missed); the table shows the largest process and, for ours, the CLI
        and the supervisor apart. The children (sh, cat) are left out: they are the
        same on both sides. (wait4's ru_maxrss is no use here: it is the max over a
        process and its reaped descendants, and Linux carries it across exec, so every
        child reports at least this benchmark's own size from before its exec.)
Prints Markdown: medians and ratios (ours / peer) per stream, and each floor met or not.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import streams  # noqa: E402
from bench_run_path import sh_script  # noqa: E402
from benchenv import like_installed  # noqa: E402

POLL = 0.005
PR_SET_CHILD_SUBREAPER = 36
MB = 1024 * 1024

# name -> (wall floor: ours <= factor x peer, RSS floor per process of ours in MB or
# "x line size" for bigline); from the performance issue.
FLOORS: dict[str, tuple[float, str]] = {
    "tiny": (2.0, "30"),
    "flat": (2.0, "30"),
    "quadratic": (0.5, "30"),
    "bigline": (1 / 15, "4x"),
    "claude": (1.0, ""),
}


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def role_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = b" ".join(argv).decode(errors="replace")
    if "subagents.supervisor" in text:
        return "supervisor"
    if "subagents.cli" in text:
        return "cli"
    if "peer_pi.mjs" in text:
        return "node"
    if "peer_claude.py" in text:
        return "sdk"
    return "child"


def vm_hwm(pid: int) -> int | None:
    """Peak resident set of ``pid`` in bytes, as the kernel keeps it."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def children_of(pid: int) -> list[int]:
    """Every thread's children: our CLI starts supervisors from worker threads."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError):
            out += [int(p) for p in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


class PeakPoller(threading.Thread):
    """Follows a process tree (and orphans handed to us) and keeps each process's peak.

    A process is only counted under the program it finally runs: between fork and exec
    it still shows its parent's command line and memory, so a reading is kept only when
    the command line is the same before and after it, and per (pid, role).
    """

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.role: dict[int, str] = {}
        self.peaks: dict[tuple[int, str], int] = {}
        self.stop = threading.Event()

    def look(self, pid: int) -> None:
        before = role_of(pid)
        peak = vm_hwm(pid)
        if peak is None or role_of(pid) != before:
            return
        self.role[pid] = before
        self.peaks[pid, before] = max(self.peaks.get((pid, before), 0), peak)

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            # The root, then whatever it started; orphans handed to us stay our children.
            todo = [self.root, *(p for p in children_of(me) if p in self.role)]
            seen: set[int] = set()
            while todo:
                pid = todo.pop()
                if pid in seen:
                    continue
                seen.add(pid)
                self.look(pid)
                todo.extend(children_of(pid))
            time.sleep(POLL)

    def by_role(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (pid, role), peak in self.peaks.items():
            if self.role.get(pid) == role:
                out[role] = max(out.get(role, 0), peak)
        return out


@dataclass
class Sample:
    wall: float
    cpu: float
    peaks: dict[str, int] = field(default_factory=dict)
    stdout: str = ""

    @property
    def top_rss(self) -> int:
        own = {r: v for r, v in self.peaks.items() if r != "child"}
        return max(own.values(), default=0)


def warm_servers() -> list[int]:
    """Our children that are warm command servers (cli/warmserver.py: one started by a first
    ``subagents run`` stays, handed to us as we are a subreaper)."""
    return [p for p in children_of(os.getpid()) if b"subagents.cli.warmserver" in _cmdline(p)]


def workers_of(server: int) -> list[int]:
    """A warm server's workers: its children in a process group of their own (a command's;
    the standby kept for the next command is in the server's)."""
    out = []
    for pid in children_of(server):
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                out.append(pid)
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def reap_orphans(argv: list[str], timeout: float = 30) -> float:
    """Wait for the orphans handed to us (a supervisor still exiting after its caller
    returned: we are a subreaper), but warm servers (they stay), and return their CPU time;
    and for the warm servers to have reaped their workers (a warm command's caller may leave
    as its worker ends, before its server reaped it: the worker's CPU, counted in the
    server's, would land in the next measurement)."""
    cpu = 0.0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _, orphan = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu
        if pid == 0:
            servers = warm_servers()
            if set(children_of(os.getpid())) <= set(servers) and not any(
                workers_of(server) for server in servers
            ):
                return cpu
            if time.monotonic() > deadline:
                raise RuntimeError(f"an orphan of {argv[:3]} did not exit")
            time.sleep(0.002)
            continue
        cpu += orphan.ru_utime + orphan.ru_stime


def measure(argv: list[str], env: dict[str, str], work: Path) -> Sample:
    out_path, err_path = work / "stdout", work / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        poller = PeakPoller(proc.pid)
        poller.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime + reap_orphans(argv)
    poller.stop.set()
    poller.join()
    if proc.returncode != 0:
        raise RuntimeError(
            f"{argv[:4]} exited {proc.returncode}: {err_path.read_text(errors='replace')[-2000:]}"
        )
    return Sample(wall, cpu, poller.by_role(), out_path.read_text())


def check_answer(side: str, stdout: str) -> None:
    answer = json.loads(stdout)
    if side == "ours" and answer.get("status") != "completed":
        raise RuntimeError(f"ours did not complete: {answer.get('errorMessage')}")
    if answer.get("finalText") != streams.FINAL_ANSWER:
        raise RuntimeError(f"{side} got the wrong answer: {answer.get('finalText')!r}")


@dataclass
class Stream:
    name: str
    backend: str
    path: Path
    size: int
    lines: int
    ours: list[Sample] = field(default_factory=list)
    peer: list[Sample] = field(default_factory=list)


def commands(
    s: Stream, work: Path, base_env: dict[str, str], sdk_python: str
) -> tuple[list, list, dict]:
    child = sh_script(work / f"child-{s.name}", f'exec cat "{s.path}"\n')
    env = {**base_env, f"SUBAGENTS_{s.backend.upper()}_BIN": str(child)}
    ours = [sys.executable, "-m", "subagents.cli", "run", "-q", "--json"]
    if s.backend != "pi":
        ours += ["--backend", s.backend]
    ours.append("t")
    if s.backend == "claude":
        peer = [sdk_python, str(BENCH / "peer_claude.py"), str(s.path)]
    else:
        peer = [shutil.which("node") or "node", str(BENCH / "peer_pi.mjs"), str(child)]
    return ours, peer, env


def med(samples: list[Sample], attr: str) -> float:
    return statistics.median(getattr(s, attr) for s in samples)


def med_role(samples: list[Sample], role: str) -> float:
    return statistics.median(s.peaks.get(role, 0) for s in samples)


def floor_verdict(s: Stream) -> str:
    factor, rss_rule = FLOORS[s.name]
    ratio = med(s.ours, "wall") / med(s.peer, "wall")
    bits = []
    if factor >= 1:
        bits.append(f"wall <= {factor:g}x peer: {'met' if ratio <= factor else 'NOT met'}")
    else:
        bits.append(f"{1 / factor:g}x faster than peer: {'met' if ratio <= factor else 'NOT met'}")
    if rss_rule:
        limit = 4 * s.size if rss_rule == "4x" else int(rss_rule) * MB
        worst = max(med_role(s.ours, "cli"), med_role(s.ours, "supervisor"))
        label = "4x line" if rss_rule == "4x" else f"{rss_rule} MB"
        bits.append(f"RSS <= {label}: {'met' if worst <= limit else 'NOT met'}")
    return "; ".join(bits)


def report(results: list[Stream], args: argparse.Namespace) -> str:
    rows = [
        "| stream | size | side | wall s | CPU s | peak RSS MB (largest process) "
        "| CLI / supervisor RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    summary = [
        "| stream | wall ours/peer | CPU ours/peer | RSS ours/peer | floors (issue) |",
        "|---|---|---|---|---|",
    ]
    for s in results:
        peer_name = "peer B (SDK)" if s.backend == "claude" else "peer A (node)"
        for side, samples in (("ours", s.ours), (peer_name, s.peer)):
            split = (
                f"{med_role(samples, 'cli') / MB:.1f} / {med_role(samples, 'supervisor') / MB:.1f}"
                if side == "ours"
                else ""
            )
            rows.append(
                f"| {s.name} | {s.size / 1e6:.2f} MB, {s.lines} lines | {side} "
                f"| {med(samples, 'wall'):.3f} | {med(samples, 'cpu'):.3f} "
                f"| {med(samples, 'top_rss') / MB:.1f} | {split} |"
            )
        summary.append(
            f"| {s.name} | {med(s.ours, 'wall') / med(s.peer, 'wall'):.2f} "
            f"| {med(s.ours, 'cpu') / med(s.peer, 'cpu'):.2f} "
            f"| {med(s.ours, 'top_rss') / med(s.peer, 'top_rss'):.2f} | {floor_verdict(s)} |"
        )
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    sdk = sdk_version(args.sdk_python) or "absent"
    head = (
        f"Medians of {args.runs} runs each, {'quick' if args.quick else 'full-size'} streams; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, node {node}, "
        f"claude-agent-sdk {sdk}."
    )
    return "\n".join([head, "", *rows, "", *summary])


def sdk_version(python: str) -> str | None:
    """claude-agent-sdk's version in ``python``'s environment, None when it is not there."""
    probe = "from importlib.metadata import version; print(version('claude-agent-sdk'))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="streams of about a tenth the events")
    ap.add_argument("--streams", default=",".join(streams.STREAMS), help="comma-separated names")
    ap.add_argument(
        "--sdk-python",
        default=sys.executable,
        help="Python with claude-agent-sdk installed, for peer B (default: this one)",
    )
    args = ap.parse_args()
    names = [n for n in args.streams.split(",") if n]
    if "claude" in names and sdk_version(args.sdk_python) is None:
        # A 365 MB wheel (it bundles a claude binary): not in the dev extra.
        print(
            f"skipping the claude stream: claude-agent-sdk is not installed for {args.sdk_python}"
            " (pip install claude-agent-sdk, or give --sdk-python)",
            file=sys.stderr,
        )
        names.remove("claude")
    unknown = set(names) - set(streams.STREAMS)
    if unknown:
        ap.error(f"unknown streams: {', '.join(sorted(unknown))}")
    like_installed()
    become_subreaper()
    with tempfile.TemporaryDirectory(prefix="subagents-peers-") as tmp:
        work = Path(tmp)
        base_env = {
            **os.environ,
            "SUBAGENTS_HOME": str(work / "home"),
            "SUBAGENTS_CONFIG_DIR": str(work / "config"),
        }
        results = []
        for name in names:
            path = work / f"{name}.jsonl"
            size = streams.write(name, path, args.quick)
            with open(path, "rb") as f:
                lines = sum(1 for _ in f)
            results.append(Stream(name, streams.STREAMS[name], path, size, lines))
        for i in range(args.runs):
            for s in results:
                ours, peer, env = commands(s, work, base_env, args.sdk_python)
                for side, argv, samples in (("ours", ours, s.ours), ("peer", peer, s.peer)):
                    sample = measure(argv, env, work)
                    check_answer(side, sample.stdout)
                    samples.append(sample)
                    print(
                        f"run {i + 1}/{args.runs} {s.name:9} {side:4} wall {sample.wall:7.3f}s "
                        f"cpu {sample.cpu:7.3f}s rss {sample.top_rss / MB:6.1f} MB",
                        file=sys.stderr,
                        flush=True,
                    )
                with contextlib.suppress(OSError):
                    shutil.rmtree(work / "home" / "runs")
    print(report(results, args))


if __name__ == "__main__":
    main()
