"""A map followed from outside its driver (jobs/mapwatch.py), in process: the row log as the
driver writes it (appends, then one compaction at the end), read by a watcher whose first
look and polls fall at every point of that."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.jobs.mapinput import Row
from subagents.jobs.maplog import RowLog, write_input
from subagents.jobs.mapwatch import MapWatch
from subagents.types import JsonObject

ROWS = 4


def make_map(job_dir: Path) -> RowLog:
    job_dir.mkdir()
    rows = [Row(i, str(i + 1), {"line": f"w{i}"}) for i in range(ROWS)]
    write_input(job_dir, rows, [0] * ROWS)
    return RowLog(job_dir)


def done(i: int) -> JsonObject:
    return {"i": i, "s": "done", "status": "completed", "runId": f"r{i}", "cost": 0.5}


def the_map(log: RowLog) -> list[tuple[str, int, JsonObject | None]]:
    """A two-wide map of four rows, as its driver logs it: (what, row, entry)."""
    steps: list[tuple[str, int, JsonObject | None]] = []
    for i in (0, 1):
        steps.append(("started", i, None))
    for ended, next_row in ((0, 2), (1, 3)):
        steps.append(("done", ended, done(ended)))
        steps.append(("started", next_row, None))
    steps += [("done", 2, done(2)), ("done", 3, done(3)), ("compact", -1, None)]
    return steps


def play(log: RowLog, step: tuple[str, int, JsonObject | None]) -> None:
    what, i, entry = step
    if what == "started":
        log.started(i, f"r{i}", 0)
    elif what == "done":
        assert entry is not None
        log.append(entry)
    else:
        log.compact({n: done(n) for n in range(ROWS)})


@pytest.mark.parametrize("first_look", range(2, 10))
@pytest.mark.parametrize("poll_every", [1, 2, 100])
def test_a_watcher_reports_every_row_once_wherever_it_starts_and_polls(
    tmp_path: Path, first_look: int, poll_every: int
) -> None:
    # first_look: how many of the driver's steps came before the watcher's first look;
    # poll_every: steps between its polls (100: one poll, after the map's end).
    log = make_map(tmp_path / "job")
    steps = the_map(log)
    for step in steps[:first_look]:
        play(log, step)
    watch = MapWatch(tmp_path / "job", "job")
    ended_before = watch.progress.record()["done"]
    reported: list[str] = []
    for n, step in enumerate(steps[first_look:], 1):
        play(log, step)
        if n % poll_every == 0:
            reported += [row.key for row, _ in watch.poll()]
    reported += [row.key for row, _ in watch.poll()]
    log.close()
    # Rows end in their order here: those that ended before the first look are not reported.
    assert sorted(reported) == [str(i + 1) for i in range(ended_before, ROWS)]
    last = watch.progress.record()
    assert (last["done"], last["completed"], last["running"]) == (ROWS, ROWS, 0)
    assert last["cost"] == 0.5 * ROWS


def test_the_log_replaced_before_the_first_poll_is_read_from_its_start(tmp_path: Path) -> None:
    # The case the background map's wait hit: the watcher looked while two rows ran, and the
    # map ended (its log compacted into a new file) before the watcher's first poll.
    log = make_map(tmp_path / "job")
    steps = the_map(log)
    for step in steps[:2]:
        play(log, step)
    watch = MapWatch(tmp_path / "job", "job")
    assert watch.progress.record()["running"] == 2
    for step in steps[2:]:
        play(log, step)
    log.close()
    assert sorted(row.key for row, _ in watch.poll()) == ["1", "2", "3", "4"]
    assert watch.poll() == []
    last = watch.progress.record()
    assert (last["done"], last["running"]) == (ROWS, 0)


def test_the_runs_in_flight_followed_from_look_to_look_through_the_compaction(
    tmp_path: Path,
) -> None:
    from subagents.jobs.maplog import LogFollower, in_flight, started

    log = make_map(tmp_path / "job")
    follower = LogFollower(tmp_path / "job")
    for step in the_map(log):
        play(log, step)
        # The follower's look at each point is a whole read's.
        assert started(follower.poll()) == in_flight(tmp_path / "job"), step
    log.close()
    assert follower.state == {n: done(n) for n in range(ROWS)}
