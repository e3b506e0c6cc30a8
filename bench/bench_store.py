"""Benchmark: how the commands that read the job store scale with its size (issue 38).

    .venv/bin/python bench/bench_store.py [--sizes 100,10000,100000] [--repeat 5]

For each size it makes a store of that many finished jobs (``$SUBAGENTS_HOME`` in a temp
dir), generated from two real jobs (a single and a parallel one, run once through the normal
run path with a shell-script child): each job's ``job.json`` and its start and end entries in
the session log (stamped when it started and when it completed), one job every 86.4 s back
from now (1,000 a day, so ``--since 1d`` selects
about the same 1,000 jobs at every size: a query over them should cost what they cost, not
what the store holds). A tenth of the jobs are in a second session.

Then, whole processes, median of ``--repeat``, in alternation with ``python -c pass`` (the
interpreter's start, the baseline measured beside each command on the same machine):
``ps``, ``ps --json``, ``top --json`` (the newest 50 jobs with their runs), ``history``
(the newest 50 end entries of the default session), ``history --since 1d -n 0`` (all of
the day's, ~900), ``cost --since 1d``, and the web fleet page's first
response (``subagents web`` started, then one GET of ``/``; the server's start excluded).
The first ``ps`` of a store that has no index yet (it is built from the files) is timed on
its own: ``ps (cold)``. Figures: seconds, and the ratio to the same command at the
smallest size.

Then, in this process, the rebuild itself (``JobStore.reindex``) at the largest size with
the job files parsed by json against orjson (what a rebuild of more than 64 files uses), in
alternation: wall and CPU seconds, medians of ``--repeat``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchenv import like_installed  # noqa: E402

SUBAGENTS = [sys.executable, "-m", "subagents.cli"]
DAY = 86_400.0
SPACING = DAY / 1000  # 1,000 jobs a day
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
START = "subagent:start"
_AT = {True: "startedAt", False: "completedAt"}

CHILD = """#!/bin/sh
case "$1" in --version) echo 0.73.1; exit 0;; esac
echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","model":"m","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"total":0.001}}}}'
"""


def _b32(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        out.append(_ALPHABET[n & 31])
        n >>= 5
    return "".join(reversed(out))


def id_at(when: float, rng: random.Random) -> str:
    return f"{_b32(int(when * 1000), 10)}-{_b32(rng.getrandbits(40), 8)}"


def iso(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when % 1 * 1000):03d}Z"


def seed_jobs(work: Path) -> list[tuple[dict[str, object], list[dict[str, object]]]]:
    """Two real jobs (single, parallel) and their session-log entries, as templates."""
    home = work / "seed"
    child = work / "pi"
    child.write_text(CHILD)
    child.chmod(0o755)
    env = {**os.environ, "SUBAGENTS_HOME": str(home), "SUBAGENTS_PI_BIN": str(child)}
    for args in (["hello one"], ["--parallel", "check a", "check b"]):
        subprocess.run([*SUBAGENTS, "run", "-q", *args], env=env, check=True, capture_output=True)
    entries = [json.loads(line) for line in (home / "sessions" / "default.jsonl").open()]
    out = []
    for job_dir in sorted((home / "jobs").iterdir()):
        state = json.loads((job_dir / "job.json").read_text())
        out.append((state, [e for e in entries if e.get("jobId") == state["jobId"]]))
    return out


def generate(
    home: Path, n: int, templates: list[tuple[dict[str, object], list[dict[str, object]]]]
) -> None:
    """``n`` finished jobs from the templates, the newest now, one every SPACING seconds."""
    rng = random.Random(n)
    jobs = home / "jobs"
    jobs.mkdir(parents=True)
    (home / "sessions").mkdir()
    logs = {
        "default": (home / "sessions" / "default.jsonl").open("w"),
        "other": (home / "sessions" / "other.jsonl").open("w"),
    }
    now = time.time()
    # Each entry at its job's time: a start entry when the job started, an end entry when it
    # completed (both rewritten below with the job's own times).
    texts = [
        (
            json.dumps(state),
            [json.dumps({**e, "timestamp": state[_AT[e["eventType"] == START]]}) for e in ents],
            state,
        )
        for state, ents in templates
    ]
    for i in range(n):
        when = now - (n - i) * SPACING
        text, entry_texts, state = texts[i % len(texts)]
        session = "other" if i % 10 == 9 else "default"
        job_id = id_at(when, rng)
        subs = {str(state["jobId"]): job_id, '"default"': json.dumps(session)}
        for run_id in state["runIds"]:  # type: ignore[union-attr]
            subs[str(run_id)] = id_at(when, rng)
        created, started, completed = when, iso(when), iso(when + 0.4)
        subs[repr(state["createdAt"])] = repr(created)
        subs[str(state["startedAt"])] = started
        subs[str(state["completedAt"])] = completed
        body = text
        for old, new in subs.items():
            body = body.replace(old, new)
        (jobs / job_id).mkdir()
        (jobs / job_id / "job.json").write_text(body)
        for entry in entry_texts:
            line = entry
            for old, new in subs.items():
                line = line.replace(old, new)
            logs[session].write(line + "\n")
    for f in logs.values():
        f.close()


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed_get(port: int, path: str, token: str) -> float:
    """How long one GET of ``path`` from the web server on ``port`` takes, read whole."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read()
    return time.perf_counter() - t0


@contextlib.contextmanager
def web_server(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``subagents web`` under ``env`` on a free port, once it takes connections (its start
    not timed): the process and its port; stopped at the end."""
    port = free_port()
    proc = subprocess.Popen(
        [*SUBAGENTS, "web", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("bench: the web server did not start")
            time.sleep(0.05)
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(30)


def fleet_first_response(env: dict[str, str]) -> float:
    """The web server started (not timed), then the first GET of the fleet page."""
    token = "bench-token-0123456789abcdef"
    with web_server({**env, "SUBAGENTS_WEB_TOKEN": token}) as (_, port):
        return timed_get(port, "/", token)


COMMANDS: dict[str, list[str]] = {
    "ps": ["ps"],
    "ps --json": ["ps", "--json"],
    "top --json": ["top", "--json"],
    "history": ["history"],
    "history --since 1d -n 0": ["history", "--since", "1d", "-n", "0"],
    "cost --since 1d": ["cost", "--since", "1d"],
}


def measure(home: Path, repeat: int) -> dict[str, float]:
    env = {**os.environ, "SUBAGENTS_HOME": str(home)}
    figures: dict[str, list[float]] = {name: [] for name in (*COMMANDS, "fleet page", "python")}
    out = {"ps (cold)": timed([*SUBAGENTS, "ps"], env)}
    for _ in range(repeat):
        figures["python"].append(timed([sys.executable, "-c", "pass"], env))
        for name, args in COMMANDS.items():
            figures[name].append(timed([*SUBAGENTS, *args], env))
        figures["fleet page"].append(fleet_first_response(env))
    out.update({name: statistics.median(values) for name, values in figures.items()})
    return out


def rebuild_parsers(home: Path, repeat: int) -> str:
    """The rebuild in this process: json's parse against orjson's, in alternation."""
    from unittest import mock

    from subagents.jobs import JobStore

    figures: dict[str, list[tuple[float, float]]] = {"json": [], "orjson": []}
    for i in range(repeat * 2):
        name = ("json", "orjson")[i % 2]
        # _MANY: past how many files orjson parses them; out of reach for json's turn.
        with mock.patch("subagents.jobs.jobindex._MANY", 10**12 if name == "json" else 64):
            t0, c0 = time.perf_counter(), time.process_time()
            JobStore(home).reindex()
            figures[name].append((time.perf_counter() - t0, time.process_time() - c0))
    med = statistics.median
    wall = {k: med(w for w, _ in v) for k, v in figures.items()}
    cpu = {k: med(c for _, c in v) for k, v in figures.items()}
    return (
        f"rebuild: json {wall['json']:.2f}s (cpu {cpu['json']:.2f}s), orjson "
        f"{wall['orjson']:.2f}s (cpu {cpu['orjson']:.2f}s): cpu x{cpu['orjson'] / cpu['json']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    like_installed()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        work = Path(tmp)
        templates = seed_jobs(work)
        for n in sizes:
            home = work / f"home{n}"
            t0 = time.perf_counter()
            generate(home, n, templates)
            print(f"{n} jobs generated in {time.perf_counter() - t0:.1f}s", flush=True)
            results[n] = measure(home, args.repeat)
            if n == sizes[-1]:
                print(f"{n:>7}: {rebuild_parsers(home, args.repeat)}", flush=True)
            shutil.rmtree(home)
            row = "  ".join(f"{k} {v:.3f}s" for k, v in results[n].items())
            print(f"{n:>7}: {row}", flush=True)
    base = results[sizes[0]]
    print(f"\n{'command':<18}" + "".join(f"{n:>16}" for n in sizes))
    for name in base:
        cells = "".join(
            f"{results[n][name]:>8.3f}s x{results[n][name] / base[name]:>4.1f} " for n in sizes
        )
        print(f"{name:<18}{cells}")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
