"""When each part of a transcript was written: ``transcript.times`` beside it (the record a
replay of the run's own events gives), read by bisection for any part, and shown in the web
transcript's gutter, on the page and in its live stream."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.fake import Fake
from support.webserver import Web

import subagents
from subagents.core import stamps
from subagents.present.progress import ProgressFormatter, transcript_entry
from subagents.web.transcript import first_piece, read_piece


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts).isoformat(timespec="milliseconds")


def _records(path: Path) -> list[tuple[int, float]]:
    data = path.read_bytes()
    assert len(data) % stamps.RECORD == 0
    lines = data.decode().splitlines()
    return [(int(o), float(t)) for o, t in (line.split() for line in lines)]


def test_records_are_found_by_bisection_for_any_part(tmp_path: Path) -> None:
    path = tmp_path / stamps.NAME
    records = [(i * 100, 1_700_000_000.0 + i) for i in range(1000)]
    path.write_bytes(b"".join(stamps.record(o, t) for o, t in records) + b"00000000")  # torn
    assert stamps.between(path, 0, 100) == [(0, records[0][1])]
    assert stamps.between(path, 250, 420) == [(250, records[2][1]), records[3], records[4]]
    assert stamps.between(path, 99_950, 10**9) == [(99_950, records[-1][1])]
    assert stamps.between(path, 300, 300) == [(300, records[3][1])]
    assert stamps.between(tmp_path / "none", 0, 10) == []
    (tmp_path / "bad").write_bytes(b"x" * stamps.RECORD * 3)
    assert stamps.between(tmp_path / "bad", 0, 10) == []


def test_a_piece_shows_each_records_time_at_its_first_block(tmp_path: Path) -> None:
    chunks = [
        (10.0, "\n## Run started\n\n"),
        (11.0, "- $ make\n"),
        (11.0, "- Command finished\n"),
        (13.5, "\nAll <b>done</b>.\n\n"),
    ]
    text, times, last = "", b"", None
    for ts, chunk in chunks:
        if ts != last:
            times += stamps.record(len(text.encode()), 1_700_000_000 + ts)
            last = ts
        text += chunk
    (tmp_path / "transcript.md").write_text(text)
    (tmp_path / stamps.NAME).write_bytes(times)
    html = str(read_piece(tmp_path / "transcript.md", 0, final=True).html)
    shown = re.findall(r'<(\w+)><time class="ts" datetime="([^"]+)"', html)
    base = 1_700_000_000
    assert shown == [("h2", _iso(base + 10)), ("li", _iso(base + 11)), ("p", _iso(base + 13.5))]
    assert "&lt;b&gt;done&lt;/b&gt;" in html  # the time is markup; the child's text is not
    # A piece from the middle starts with the time in force there.
    second = len(b"\n## Run started\n\n- $ make\n")
    later = str(read_piece(tmp_path / "transcript.md", second, final=True).html)
    assert re.findall(r'datetime="([^"]+)"', later) == [_iso(base + 11), _iso(base + 13.5)]
    # A run from before transcript.times: no times, the same transcript.
    (tmp_path / stamps.NAME).unlink()
    plain = str(first_piece(tmp_path / "transcript.md", final=True).html)
    assert "<time" not in plain and re.sub(r"<time[^>]*>[^<]*</time>", "", html) == plain


def _replayed(run_dir: Path) -> tuple[str, list[tuple[int, float]]]:
    """The transcript and its times as a replay of events.jsonl words them."""
    fmt = ProgressFormatter()
    text, times, size, last = "", [], 0, None
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event: Any = json.loads(line)
        ts = event.pop("ts")
        event.pop("seq")
        entry = transcript_entry(event, fmt)
        if not entry:
            continue
        if ts != last:
            times.append((size, ts))
            last = ts
        text += entry
        size += len(entry.encode())
    return text, times


@pytest.mark.process
def test_a_runs_transcript_times_are_those_of_its_events_and_show_on_its_page(
    fake: Fake, web: Web, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    steps = [*pi.start()]
    for i in range(3):
        steps += [*pi.tool_use(f"c{i}", command=f"step {i} — ü"), {"sleep": 0.3}]
        steps += pi.tool_end(f"c{i}")
    job = subagents.start("steps", env=fake.env([*steps, pi.text_end("done"), *pi.end()]))
    done = job.wait(60)
    assert done is not None and done["status"] == "completed"
    run_id = str(done["runs"][0]["runId"])
    run_dir = Path(done["runs"][0]["paths"]["events"]).parent
    text, times = _replayed(run_dir)
    assert (run_dir / "transcript.md").read_text() == text
    recorded = _records(run_dir / stamps.NAME)
    assert recorded == times and len(times) >= 4  # one a read that wrote (the sleeps part them)
    assert (run_dir / stamps.NAME).stat().st_mode & 0o777 == 0o600
    with web.client() as client:
        page = client.get(f"/job/{job.job_id}").text
        events = client.get(f"/events/job/{job.job_id}", params={"run": run_id})
    transcript = page.split('id="transcript"', 1)[1]
    assert re.findall(r'datetime="([^"]+)"', transcript) == [_iso(ts) for _o, ts in times]
    # The stream, from the start, sends the same times with the transcript.
    sent, name = [], ""
    for line in events.text.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: ") and name == "transcript":
            sent.append(json.loads(line[len("data: ") :])["html"])
    assert re.findall(r'datetime="([^"]+)"', "".join(sent)) == [_iso(ts) for _o, ts in times]
