"""The parent reads a run's events only when someone listens, a bounded chunk at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.runs.monitor import RunMonitor

pytestmark = pytest.mark.process


def _result(run_dir: Path) -> None:
    (run_dir / "result.json").write_text(json.dumps({"status": "completed", "runId": "r"}))


def test_without_a_listener_the_events_are_never_opened(tmp_path: Path) -> None:
    # A directory where events.jsonl should be: any attempt to read it raises.
    (tmp_path / "events.jsonl").mkdir()
    _result(tmp_path)
    assert RunMonitor(tmp_path).wait(timeout=5)["status"] == "completed"


def test_a_listener_gets_every_event_in_order_through_chunks_and_long_lines(
    tmp_path: Path,
) -> None:
    events = [{"seq": i, "type": "notice", "message": "x" * (i % 7) * 300} for i in range(1, 400)]
    events.insert(200, {"seq": 0, "type": "assistant_text", "text": "long " * 5000})  # > chunk
    with open(tmp_path / "events.jsonl", "wb") as f:
        for e in events:
            f.write(json.dumps(e).encode() + b"\n")
        f.write(b'{"seq": 999, "type": "no')  # a line still being written is held back
    _result(tmp_path)
    got: list[dict[str, Any]] = []
    mon = RunMonitor(tmp_path)
    mon.tail.chunk = 4096
    assert mon.wait(on_event=got.append, timeout=5) is not None
    assert got == events
    # The unfinished last line is held back, not delivered half-written.
    assert mon.tail.partial == b'{"seq": 999, "type": "no'


def test_a_follower_without_a_listener_sleeps_through_writes_but_wakes_for_a_result(
    tmp_path: Path,
) -> None:
    import threading
    import time

    from subagents.core.waker import DirWaker

    log = tmp_path / "events.jsonl"
    log.write_bytes(b"")
    waker = DirWaker(tmp_path, writes=False)
    waker.arm()
    try:
        with open(log, "ab", buffering=0) as f:
            f.write(b'{"seq": 1}\n')
        t0 = time.monotonic()
        waker.wait(0.5)  # a write only: no reason to wake before the timeout
        assert time.monotonic() - t0 >= 0.45
        timer = threading.Timer(0.2, lambda: _result(tmp_path))
        timer.start()
        t0 = time.monotonic()
        waker.wait(60)  # the result appearing ends the wait
        assert time.monotonic() - t0 < 30
        timer.join()
    finally:
        waker.close()
