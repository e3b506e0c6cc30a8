"""Benchmark: the web job page of a huge run, in a large store, while five clients stream it
(issue 36: "a page over that job ≤ 1 s").

    .venv/bin/python bench/bench_web_page.py [--jobs 10000] [--repeat 15] [--streams 5]

The store: ``--jobs`` finished jobs generated as bench_store.py makes them, plus two jobs
run through the normal run path with a shell-script child: a *small* one (its transcript a
few hundred bytes) and a *big* one, whose transcript is then made 50 MB (tool calls,
commands, failures with output; with its ``transcript.times``, a record every few lines)
and its answer 5 MB.

``subagents web`` is started once (its start not timed). ``--streams`` clients stream the big
job's page from the transcript's start, over and over (each stream ends once it sent the
end; the client opens it again a second later), for the whole measurement. Meanwhile the job page of the
big job and of the small one (the baseline: the same server, store and load) are fetched in
alternation, ``--repeat`` times each, then the fleet page. Figures: median and worst
seconds, and the big page's median over the small one's. The big page's first view is timed
on its own: it renders the transcript's last part; later views of the unchanged run reuse it
(``web/memo.py``).
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
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import CHILD, SUBAGENTS, generate, seed_jobs, timed_get, web_server
from benchenv import like_installed

from subagents.core import stamps

TOKEN = "bench-token-0123456789abcdef"
TRANSCRIPT = 50 * 1024 * 1024
ANSWER = 5 * 1024 * 1024
RELOAD = 1.0  # seconds between a stream's end and its client opening it again


def run_job(home: Path, child: Path, task: str) -> tuple[str, Path]:
    """A job run through the normal path: its id and its run's directory."""
    env = {**os.environ, "SUBAGENTS_HOME": str(home), "SUBAGENTS_PI_BIN": str(child)}
    done = subprocess.run(
        [*SUBAGENTS, "run", "--json", task], env=env, check=True, capture_output=True, text=True
    )
    result = json.loads(done.stdout)
    return str(result["jobId"]), Path(result["paths"]["events"]).parent


def inflate(run_dir: Path) -> None:
    """The run's transcript made 50 MB, with a times record every few lines, and its answer
    5 MB (as tests/test_web_bounds.py makes them)."""
    blocks = [
        f"- $ grep -rn __init__ src/ | head -{i}\n- Command finished\n"
        f"- ✗ $ make test-{i}\n\n  ```\n  error: {'x' * 80}\n  ```\n\n"
        f"\nSome **text** with a [link](https://example.com/{i}).\n\n"
        for i in range(200)
    ]
    now = time.time() - 3600
    with (
        open(run_dir / "transcript.md", "ab") as f,
        open(run_dir / stamps.NAME, "ab") as times,
    ):
        while f.tell() < TRANSCRIPT:
            for block in blocks:
                times.write(stamps.record(f.tell(), now))
                f.write(block.encode())
                now += 0.01
        f.write(b"\n## Finished: completed in 1s\n\n")
    result = json.loads((run_dir / "result.json").read_text())
    result["finalText"] = ("The answer, line after line. " * 40 + "\n\n") * (ANSWER // 1200)
    (run_dir / "result.json").write_text(json.dumps(result))


def get(port: int, path: str) -> float:
    return timed_get(port, path, TOKEN)


def stream_again(port: int, path: str, stop: threading.Event, count: list[int]) -> None:
    """The stream of ``path`` from its start, opened again a second after it ends (a person
    reloading the page, at a pace no person keeps up), until ``stop``."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    while not stop.is_set():
        with urllib.request.urlopen(req, timeout=120) as resp:
            for line in resp:
                if line.startswith(b"event: end") or stop.is_set():
                    break
        count[0] += 1
        stop.wait(RELOAD)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--streams", type=int, default=5)
    args = parser.parse_args()
    like_installed()
    print(f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-web-page-") as tmp:
        work = Path(tmp)
        home = work / "home"
        generate(home, args.jobs, seed_jobs(work))
        child = work / "child"
        child.write_text(CHILD)
        child.chmod(0o755)
        small, _ = run_job(home, child, "a small job")
        big, big_run = run_job(home, child, "a big job")
        inflate(big_run)
        env = {**os.environ, "SUBAGENTS_HOME": str(home), "SUBAGENTS_WEB_TOKEN": TOKEN}
        # The store's index made once, as any first `ps` does (bench_store.py times that).
        subprocess.run([*SUBAGENTS, "ps"], env=env, check=True, capture_output=True)
        size = (big_run / "transcript.md").stat().st_size
        print(f"{args.jobs} jobs + 2; the big transcript {size / 2**20:.0f} MiB", flush=True)
        stop = threading.Event()
        streamed = [0]
        with web_server(env) as (_, port):
            try:
                run_id = big_run.name
                streams = [
                    threading.Thread(
                        target=stream_again,
                        args=(port, f"/events/job/{big}?run={run_id}", stop, streamed),
                        daemon=True,
                    )
                    for _ in range(args.streams)
                ]
                for t in streams:
                    t.start()
                get(port, f"/job/{small}")  # (the templates compiled once, as in any server)
                figures: dict[str, list[float]] = {"big page, first": [get(port, f"/job/{big}")]}
                figures.update({"big job page": [], "small job page": []})
                for _ in range(args.repeat):
                    figures["big job page"].append(get(port, f"/job/{big}"))
                    figures["small job page"].append(get(port, f"/job/{small}"))
                figures["fleet page"] = [get(port, "/") for _ in range(3)]
            finally:
                stop.set()
    for name, values in figures.items():
        print(f"{name:<16} median {statistics.median(values):.3f}s  worst {max(values):.3f}s")
    small_page = statistics.median(figures["small job page"])
    ratio = statistics.median(figures["big job page"]) / small_page
    first = figures["big page, first"][0] / small_page
    print(f"big / small job page: x{ratio:.2f} (first view x{first:.1f})")
    print(f"{streamed[0]} whole streams of the big job meanwhile")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
