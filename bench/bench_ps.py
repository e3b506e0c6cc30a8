"""`subagents ps`'s table for many jobs: the time to lay out N rows (``cli.grid``), against
rich's ``Table`` (what ps used before) for the same rows in the same process.

    .venv/bin/python bench/bench_ps.py [--rows 5000] [--width 80] [--repeat 3]

Prints the median seconds of each, and their ratio. The rows are ps rows as the index gives
them (a task of ~110 characters, which the narrow table folds onto two or more lines).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchenv import like_installed

from subagents.types import JobRow


def rows(n: int) -> list[JobRow]:
    now = time.time()
    return [
        {
            "jobId": f"01m8hex3mv-{i:08d}",
            "mode": "parallel",
            "agents": ["pi", "claude"],
            "status": "completed",
            "createdAt": now,
            "startedAt": None,
            "completedAt": None,
            "durationMs": 12345,
            "runIds": [],
            "session": None,
            "task": f"check module {i} and then do something rather long with it (+2 more) " * 2,
            "totalTokens": 1234,
            "cost": 0.0123,
        }
        for i in range(n)
    ]


def with_grid(items: list[JobRow], width: int) -> str:
    from subagents.cli.jobs import jobs_table

    return "\n".join(jobs_table(items, width >= 100).lines(width))


def with_rich(items: list[JobRow], width: int) -> str:
    """The table as ps made it before: rich's Table, borderless, the last column folding."""
    from rich.console import Console
    from rich.table import Table

    grid = Table(box=None, pad_edge=False)
    headers = ["JOB", "AGENTS", "STATUS", "ELAPSED", "COST", "TASK"]
    for i, header in enumerate(headers):
        last = i == len(headers) - 1
        grid.add_column(header, no_wrap=not last, overflow="fold" if last else "ellipsis")
    for item in items:
        grid.add_row(item["jobId"], "pi,claude", "completed", "12.3s", "$0.012", item["task"])
    console = Console(file=io.StringIO(), width=width)
    console.print(grid)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out)


def median_time(fn: object, repeat: int, *args: object) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--width", type=int, default=80)
    parser.add_argument("--repeat", type=int, default=3)
    a = parser.parse_args()
    like_installed()
    items = rows(a.rows)
    grid = median_time(with_grid, a.repeat, items, a.width)
    rich = median_time(with_rich, 1, items, a.width)
    print(f"{a.rows} rows, {a.width} columns: grid {grid:.3f} s, rich Table {rich:.3f} s")
    print(f"ratio: the grid takes {grid / rich:.3f} of rich's time ({rich / grid:.0f}x faster)")


if __name__ == "__main__":
    main()
