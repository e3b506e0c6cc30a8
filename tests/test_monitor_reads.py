"""The parent reads a run's events only when someone listens, a bounded chunk at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from subagents.runs import monitor as monitor_module
from subagents.runs.monitor import RunMonitor


def _result(run_dir: Path) -> None:
    (run_dir / "result.json").write_text(json.dumps({"status": "completed", "runId": "r"}))


def test_without_a_listener_the_events_are_never_opened(tmp_path: Path) -> None:
    # A directory where events.jsonl should be: any attempt to read it raises.
    (tmp_path / "events.jsonl").mkdir()
    _result(tmp_path)
    assert RunMonitor(tmp_path).wait(timeout=5)["status"] == "completed"


def test_a_listener_gets_every_event_in_order_through_chunks_and_long_lines(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(monitor_module, "READ_CHUNK", 4096)
    events = [{"seq": i, "type": "notice", "message": "x" * (i % 7) * 300} for i in range(1, 400)]
    events.insert(200, {"seq": 0, "type": "assistant_text", "text": "long " * 5000})  # > chunk
    with open(tmp_path / "events.jsonl", "wb") as f:
        for e in events:
            f.write(json.dumps(e).encode() + b"\n")
        f.write(b'{"seq": 999, "type": "no')  # a line still being written is held back
    _result(tmp_path)
    got: list[dict[str, Any]] = []
    mon = RunMonitor(tmp_path)
    assert mon.wait(on_event=got.append, timeout=5) is not None
    assert got == events
    # The unfinished last line is held back, not delivered half-written.
    assert mon._partial == b'{"seq": 999, "type": "no'
