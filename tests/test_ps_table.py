"""Issue 39, item 8: `ps`'s table is laid out in one pass (cli.grid), fast for thousands of
rows (bench/bench_ps.py measures it against rich's Table). Here: what it shows is right —
columns aligned, a long cell cut with an ellipsis, the last column folded, wide characters
counted as the terminal shows them."""

from __future__ import annotations

import time

from rich.cells import cell_len

from subagents.cli.grid import Column, Grid
from subagents.cli.jobs import jobs_table
from subagents.types import JobRow


def row(i: int, task: str, status: str = "completed", **extra: object) -> JobRow:
    item: JobRow = {
        "jobId": f"01m8hex3mv-{i:08d}",
        "mode": "single",
        "agents": ["pi"],
        "status": status,  # type: ignore[typeddict-item]
        "createdAt": time.time(),
        "startedAt": None,
        "completedAt": None,
        "durationMs": 1500,
        "runIds": [],
        "session": None,
        "task": task,
        "totalTokens": 60,
        "cost": 0.00004,
    }
    item.update(extra)  # type: ignore[typeddict-item]
    return item


def test_columns_line_up_and_the_task_folds_within_the_width() -> None:
    items = [row(1, "short"), row(2, "word " * 40), row(3, "日本語のタスク" * 6)]
    lines = jobs_table(items, wide=False).lines(80)
    assert lines[0].split() == ["JOB", "AGENTS", "STATUS", "ELAPSED", "COST", "TASK"]
    task_at = lines[0].index("TASK")
    assert all(cell_len(line) <= 80 for line in lines), [cell_len(x) for x in lines]
    starts = [line for line in lines if line.startswith("01m8")]
    assert len(starts) == 3
    for line in starts:
        assert line.index("completed") == lines[0].index("STATUS")
    # the folded task goes on under its column, whole
    second = lines.index(starts[1])
    folded = [lines[second][task_at:]]
    for line in lines[second + 1 :]:
        if line.startswith("01m8"):
            break
        assert line[:task_at].strip() == ""
        folded.append(line[task_at:])
    assert " ".join(folded).split() == ["word"] * 40


def test_a_cell_longer_than_its_column_is_cut_with_an_ellipsis() -> None:
    grid = Grid([Column("A", max_width=5), Column("B", justify="right"), Column("C", ratio=1)])
    grid.add_row("abcdefgh", "1", "x")
    grid.add_row("ab", "12345", "y")
    assert grid.lines(40) == ["A          B  C", "abcd…      1  x", "ab     12345  y"]


def test_a_running_job_shows_what_it_does_now_when_wide() -> None:
    items = [row(1, "fix the bug", status="running", durationMs=None, activity="$ make test")]
    lines = jobs_table(items, wide=True).lines(160)
    assert lines[0].split()[-2:] == ["TASK", "NOW"]
    assert lines[1].endswith("fix the bug  $ make test")
    narrow = jobs_table(items, wide=False).lines(80)
    assert narrow[1].endswith("$ make test") and "fix the bug" not in narrow[1]


def test_five_thousand_rows_are_one_line_each_when_they_fit() -> None:
    items = [row(i, f"task {i}") for i in range(5000)]
    lines = jobs_table(items, wide=True).lines(160)
    assert len(lines) == 5001
