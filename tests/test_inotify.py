"""core.inotify: the C library's inotify, as the followers (core.waker, the Ray host) use it."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from subagents.core import inotify
from subagents.core.waker import DirWaker

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")


def test_a_file_made_in_a_watched_directory_is_an_event_of_its_watch(tmp_path: Path) -> None:
    ino = inotify.Inotify()
    try:
        wd = ino.add_watch(str(tmp_path), inotify.CREATE | inotify.MOVED_TO)
        assert ino.read(0) == []  # nothing yet, and no wait
        (tmp_path / "result.json").write_text("{}")
        events = ino.read(5000)
        assert (wd, inotify.CREATE) in events
    finally:
        ino.close()


def test_many_events_in_one_read_are_each_returned(tmp_path: Path) -> None:
    ino = inotify.Inotify()
    try:
        wd = ino.add_watch(str(tmp_path), inotify.CREATE)
        for i in range(50):  # names of different lengths: each event's name is skipped
            (tmp_path / ("x" * (i + 1))).touch()
        got: list[tuple[int, int]] = []
        while len(got) < 50 and (more := ino.read(5000)):
            got += more
        assert got == [(wd, inotify.CREATE)] * 50
    finally:
        ino.close()


def test_a_removed_directory_ends_its_watch(tmp_path: Path) -> None:
    watched = tmp_path / "run"
    watched.mkdir()
    ino = inotify.Inotify()
    try:
        wd = ino.add_watch(str(watched), inotify.DELETE_SELF)
        watched.rmdir()
        masks = {mask for w, mask in ino.read(5000) + ino.read(100) if w == wd}
        assert inotify.DELETE_SELF in masks or inotify.IGNORED in masks
    finally:
        ino.close()


def test_a_missing_directory_is_an_os_error_naming_it(tmp_path: Path) -> None:
    ino = inotify.Inotify()
    try:
        with pytest.raises(OSError) as caught:
            ino.add_watch(str(tmp_path / "nope"), inotify.CREATE)
        assert caught.value.errno == errno.ENOENT
    finally:
        ino.close()


def test_close_gives_the_descriptor_back_once() -> None:
    ino = inotify.Inotify()
    fd = ino.fileno()
    ino.close()
    ino.close()  # a second close does nothing (the number may be someone else's by now)
    with pytest.raises(OSError):
        os.fstat(fd)
    with pytest.raises(ValueError):
        ino.fileno()


def test_the_descriptor_is_not_inherited_by_children() -> None:
    ino = inotify.Inotify()
    try:
        assert not os.get_inheritable(ino.fileno())
        assert not os.get_blocking(ino.fileno())
    finally:
        ino.close()


def test_a_waker_wakes_when_the_file_appears(tmp_path: Path) -> None:
    waker = DirWaker(tmp_path, writes=False)
    try:
        waker.arm()
        (tmp_path / "result.json").write_text("{}")
        t0 = time.monotonic()
        waker.wait(60.0)
        assert time.monotonic() - t0 < 30.0  # woken by the event, not by the timeout
        assert waker._watching
    finally:
        waker.close()


def test_the_ray_hosts_watcher_wakes_the_run_whose_directory_changed(tmp_path: Path) -> None:
    from subagents.launchers.ray_host import DirChanges, HostedRun

    async def main() -> None:
        changes = DirChanges()
        assert changes.ino is not None
        a, b = HostedRun("a", tmp_path / "a", "pi"), HostedRun("b", tmp_path / "b", "pi")
        for run in (a, b):
            run.dir.mkdir()
            changes.watch(run)
        assert a.watched and b.watched and len(changes.runs) == 2
        (a.dir / "result.json").write_text("{}")
        await asyncio.wait_for(a.changed.wait(), 30)
        assert not b.changed.is_set()
        shutil.rmtree(b.dir)  # its watch ends: the run is no longer looked up by it
        await asyncio.wait_for(b.changed.wait(), 30)
        while len(changes.runs) != 1:
            await asyncio.sleep(0.01)
        asyncio.get_running_loop().remove_reader(changes.ino.fileno())
        changes.ino.close()

    asyncio.run(asyncio.wait_for(main(), 60))
