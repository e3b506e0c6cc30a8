"""An idle fleet costs the server nothing (issue 36: "its stream ≤ 5 % of a core when nothing
changes"): a look at the index is no change to the store watcher, so the streams' own looks
never wake them again, in an empty store too; and the streams of one view share one drawing
of each change. bench/bench_web_fleet.py measures the CPU."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually, pid_alive
from support.fake import Fake
from support.webserver import Web

import subagents
from subagents.jobs import JobStore
from subagents.web import fleet, memo
from subagents.web.watch import StoreWatcher

TIMEOUT = 60


def _looks_of_every_kind(home: Path) -> None:
    """What a page or stream does to the index: a reader's connection, a list of the jobs."""
    db = JobStore(home).index()
    try:
        db.execute("select count(*) from jobs").fetchone()
    finally:
        db.close()
    JobStore(home).list(200)


def test_a_look_at_an_empty_store_is_no_change(isolated_state: Path) -> None:
    JobStore(isolated_state).list(200)  # (the index made)
    watcher = StoreWatcher(isolated_state, threading.Event())
    before = watcher.signature()
    for _ in range(3):
        _looks_of_every_kind(isolated_state)
        assert watcher.signature() == before


@pytest.mark.process
def test_a_look_at_the_index_is_no_change_and_a_new_job_is(
    isolated_state: Path, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = subagents.start("one", env=fake.env(pi.answer("ok")))
    assert job.wait(TIMEOUT) is not None
    store = JobStore(isolated_state)
    driver = store.load(job.job_id)["driver"]["pid"]  # (its last writes done)
    assert eventually(lambda: not pid_alive(driver), TIMEOUT)
    old = time.time() - 60  # (the jobs directory settled: its mtime is trusted)
    os.utime(store.dir, (old, old))
    store.list(200)
    watcher = StoreWatcher(isolated_state, threading.Event())
    before = watcher.signature()
    db = store.index()  # a reader open: SQLite makes its empty write-ahead log
    try:
        assert (isolated_state / "index.sqlite-wal").exists()
        assert watcher.signature() == before
    finally:
        db.close()
    for _ in range(3):
        _looks_of_every_kind(isolated_state)
        assert watcher.signature() == before
    assert subagents.start("two", env=fake.env(pi.answer("ok"))).wait(TIMEOUT) is not None
    assert watcher.signature() != before


def test_the_newest_drawing_of_a_view_is_made_once_and_the_older_dropped() -> None:
    made: list[int] = []
    start = threading.Barrier(6)

    def ask(version: int) -> str:
        def make() -> str:
            made.append(version)
            time.sleep(0.2)  # (the others ask meanwhile)
            return f"drawn at {version}"

        return memo.latest(("view", "a"), version, make)

    def client(out: list[str]) -> None:
        start.wait()
        out.append(ask(1))

    got: list[str] = []
    threads = [threading.Thread(target=client, args=(got,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert got == ["drawn at 1"] * 6 and made == [1]
    assert ask(2) == "drawn at 2" and made == [1, 2]
    assert ask(1) == "drawn at 1" and made == [1, 2, 1]  # version 1 was let go


def _read_until(lines: Iterator[str], wanted: str) -> None:
    for line in lines:
        if wanted in line:
            return
    raise AssertionError(f"the stream ended before {wanted!r}")


@pytest.mark.process
def test_the_fleet_streams_share_one_drawing_of_each_change(
    web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    app: Any = web.app.app.state.web
    drawn = [0]
    draw = fleet.render_fleet

    def counted(view: fleet.FleetView) -> str:
        drawn[0] += 1
        return draw(view)

    monkeypatch.setattr(fleet, "render_fleet", counted)
    with ExitStack() as stack:
        readers = []
        for _ in range(4):
            client = stack.enter_context(web.client())
            readers.append(stack.enter_context(client.stream("GET", "/events/fleet")).iter_lines())
            _read_until(readers[-1], "event: fleet")
        drawn[0], version = 0, app.watcher.version
        job = subagents.start("watched", env=fake.env([*pi.start(), {"sleep": 1.5}, *pi.answer("ok")]))  # fmt: skip
        assert job.wait(TIMEOUT) is not None
        for lines in readers:  # every client saw the job end
            _read_until(lines, f'data-job=\\"{job.job_id}\\" data-status=\\"completed\\"')
        changes = app.watcher.version - version
        # One drawing a change at most (each client drawing its own: four).
        assert 0 < drawn[0] <= changes + 1, (drawn[0], changes)


@pytest.mark.process
def test_a_look_while_a_job_runs_and_writes_nothing_is_no_write(
    isolated_state: Path, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = subagents.start("asleep", env=fake.env([*pi.start(), *pi.tool_use(), {"hang": True}]))
    store = JobStore(isolated_state)
    index = isolated_state / "index.sqlite"

    def files() -> tuple[object, ...]:
        there = [Path(f"{index}{end}") for end in ("", "-wal")]
        return tuple(
            (p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else None for p in there
        )

    def a_look_writes_nothing() -> bool:
        before = files()
        store.list(200)  # (the running job's row is read again from its file)
        return files() == before

    try:
        assert eventually(lambda: store.load(job.job_id)["status"] == "running", TIMEOUT)
        # Once the job stopped changing, a look leaves the index as it was.
        assert eventually(a_look_writes_nothing, TIMEOUT)
    finally:
        job.stop()
