"""Benchmark: what the fleet page's live stream costs the server when nothing changes, in a
store of 10,000 jobs (issue 36: "its stream ≤ 5 % of a core when nothing changes").

    .venv/bin/python bench/bench_web_fleet.py [--jobs 10000] [--streams 5] [--seconds 30]

The store: ``--jobs`` finished jobs generated as bench_store.py makes them. ``subagents web``
is started once (its start not timed), then its CPU time (user + system, from /proc) is read
over ``--seconds`` of wall time, three times:

1. no client: the server alone (the baseline);
2. ``--streams`` clients on ``/events/fleet`` (each has had its first event), no job running;
3. the same clients while one job runs and writes nothing: its child sleeps (the page's
   elapsed times still tick every second).

Figures: the server's CPU as a fraction of one core in each, and the fleet events the clients
received during each (nothing changed, so none in 2; in 3 one a second at most).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import SUBAGENTS, generate, seed_jobs, timed_get, web_server
from benchenv import like_installed

TOKEN = "bench-token-0123456789abcdef"
# A child that starts, says nothing more and sleeps: its job runs and changes nothing.
SLEEPER = """#!/bin/sh
case "$1" in --version) echo 0.73.1; exit 0;; esac
echo '{"type":"agent_start"}'
exec sleep 600
"""
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (/proc/PID/stat's utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def share_of_a_core(pid: int, seconds: float) -> float:
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - t0)


def measured(pid: int, seconds: float, clients: list[Client]) -> tuple[float, int]:
    """The server's share of a core over ``seconds``, and the fleet events sent meanwhile."""
    before = sum(c.events for c in clients)
    share = share_of_a_core(pid, seconds)
    return share, sum(c.events for c in clients) - before


class Client(threading.Thread):
    """One browser's stream of the fleet page: counts the fleet events it receives."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.events = 0
        self.first = threading.Event()

    def run(self) -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/events/fleet",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        with contextlib.suppress(OSError), urllib.request.urlopen(req, timeout=600) as resp:
            for line in resp:
                if line.startswith(b"event: fleet"):
                    self.events += 1
                    self.first.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    like_installed()
    print(f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-web-fleet-") as tmp:
        work = Path(tmp)
        home = work / "home"
        generate(home, args.jobs, seed_jobs(work))
        sleeper = work / "sleeper"
        sleeper.write_text(SLEEPER)
        sleeper.chmod(0o755)
        env = {**os.environ, "SUBAGENTS_HOME": str(home), "SUBAGENTS_WEB_TOKEN": TOKEN}
        # The store's index made once, as any first `ps` does (bench_store.py times that).
        subprocess.run([*SUBAGENTS, "ps"], env=env, check=True, capture_output=True)
        print(f"{args.jobs} jobs; {args.streams} fleet streams; {args.seconds:.0f} s each")
        with web_server(env) as (server, port):
            timed_get(port, "/", TOKEN)  # (the templates compiled, as in any server)
            alone = share_of_a_core(server.pid, args.seconds)
            clients = [Client(port) for _ in range(args.streams)]
            for c in clients:
                c.start()
            for c in clients:
                if not c.first.wait(120):
                    raise SystemExit("bench_web_fleet: a stream sent nothing in 120 s")
            idle, idle_events = measured(server.pid, args.seconds, clients)
            started = subprocess.run(
                [*SUBAGENTS, "run", "--bg", "sleep on it"],
                env={**env, "SUBAGENTS_PI_BIN": str(sleeper)},
                check=True,
                capture_output=True,
                text=True,
            )
            job = started.stdout.strip().split()[-1]
            try:
                time.sleep(3)  # (the job shown, its child asleep)
                running, running_events = measured(server.pid, args.seconds, clients)
            finally:
                subprocess.run([*SUBAGENTS, "stop", job], env=env, capture_output=True)
    n = args.streams
    print(f"the server alone:            {alone:6.2%} of a core")
    print(f"{n} streams, nothing running: {idle:6.2%} of a core, {idle_events} fleet events")
    print(f"{n} streams, a job asleep:    {running:6.2%} of a core, {running_events} fleet events")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
