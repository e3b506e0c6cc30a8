"""What looking at the approvals inbox costs with many runs kept: the open-inbox names
(``$SUBAGENTS_HOME/inboxes/``, core/inbox.py) against looking at every run directory, as
``subagents inbox`` did before (and the Claude Code monitor and the web would every second).

    .venv/bin/python bench/bench_inbox_scan.py [--runs 5000] [--rounds 50]

``--runs`` ended runs (a result.json each) and one running run with an item waiting; CPU
time of this process per look, the mean over ``--rounds`` looks, both ways in the same
process. Prints each and the ratio (every run / open names).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from subagents.core import inbox
from subagents.core.paths import runs_dir


def every_run(runs: Path) -> list[Path]:
    """The baseline: each run directory looked at (pathlib, as before)."""
    found = []
    with os.scandir(runs) as entries:
        for entry in entries:
            run_dir = Path(entry.path)
            if (run_dir / inbox.INBOX).is_dir() and not (run_dir / "result.json").exists():
                found.append(run_dir)
    return sorted(found)


def per_look(look: object, runs: Path, rounds: int) -> float:
    start = time.process_time()
    for _ in range(rounds):
        look(runs)  # type: ignore[operator]
    return (time.process_time() - start) / rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-inbox-"))
    try:
        measure(home, args.runs, args.rounds)
    finally:
        shutil.rmtree(home)


def measure(home: Path, count: int, rounds: int) -> None:
    runs = runs_dir(home)
    runs.mkdir(parents=True)
    for i in range(count):
        ended = runs / f"01m8{i:06d}-aaaaaaaa"
        ended.mkdir()
        (ended / "result.json").write_text("{}")
    running = runs / "01m9000000-bbbbbbbb"
    running.mkdir()
    item = {"id": "01m9000001-cccccccc", "runId": running.name}
    inbox.write_item(running, item)  # type: ignore[arg-type]
    assert every_run(runs) == inbox.open_runs(runs) == [running]
    every_run(runs), inbox.open_runs(runs)  # warm-up
    before = per_look(every_run, runs, rounds)
    now = per_look(inbox.open_runs, runs, rounds)
    load = os.getloadavg()[0]
    print(f"{count} runs kept, load {load:.1f}")
    print(f"every run:  {before * 1000:8.3f} ms CPU a look")
    print(f"open names: {now * 1000:8.3f} ms CPU a look")
    print(f"ratio: {before / now:.0f}x")


if __name__ == "__main__":
    main()
