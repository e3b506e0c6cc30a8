"""``subagents web`` over a run with a 50 MB transcript and a 5 MB answer: the server's
memory stays under 200 MB while five clients stream the job from the transcript's start and
pages are loaded; a page shows a capped part, with links to the whole as text."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import pytest
from support import pistream as pi
from support.fake import Fake
from support.webserver import web_command

import subagents

TOKEN = "bounds-test-token-0123456789"
RSS_LIMIT = 200 * 1024 * 1024
TRANSCRIPT = 50 * 1024 * 1024
ANSWER = 5 * 1024 * 1024


def _inflate(run_dir: Path) -> None:
    """The run's transcript made 50 MB (tool calls, commands, failures with output) and its
    answer 5 MB."""
    block = "".join(
        f"- $ grep -rn __init__ src/ | head -{i}\n- Command finished\n"
        f"- ✗ $ make test-{i}\n\n  ```\n  error: {'x' * 80}\n  ```\n\n"
        f"\nSome **text** with a [link](https://example.com/{i}).\n\n"
        for i in range(200)
    ).encode()
    with open(run_dir / "transcript.md", "ab") as f:
        while f.tell() < TRANSCRIPT:
            f.write(block)
        f.write(b"\n## Finished: completed in 1s\n\n")
    result = json.loads((run_dir / "result.json").read_text())
    result["finalText"] = ("The answer, line after line. " * 40 + "\n\n") * (ANSWER // 1200)
    (run_dir / "result.json").write_text(json.dumps(result))


@pytest.mark.process
def test_memory_stays_bounded_with_a_50_mb_transcript_and_a_5_mb_answer(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = subagents.start("big", env=fake.env(pi.answer("small"))).wait(60)
    assert job is not None and job["status"] == "completed"
    run_id = job["runs"][0]["runId"]
    _inflate(isolated_state / "runs" / run_id)
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        server = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                peak[0] = max(peak[0], server.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.05)

    with web_command({"SUBAGENTS_WEB_TOKEN": TOKEN}) as (proc, base, _line):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        ends: list[Any] = []

        def stream() -> None:
            with (
                httpx2.Client(base_url=base, headers=headers, timeout=60) as client,
                client.stream("GET", f"/events/job/{job['jobId']}", params={"run": run_id}) as s,
            ):
                sent = 0
                for line in s.iter_lines():
                    sent += len(line)
                    if line == "event: end":
                        ends.append(sent)
                        return

        streams = [threading.Thread(target=stream) for _ in range(5)]
        for t in streams:
            t.start()
        took = []
        with httpx2.Client(base_url=base, headers=headers, timeout=60) as client:
            for _ in range(3):
                start = time.monotonic()
                page = client.get(f"/job/{job['jobId']}")
                took.append(time.monotonic() - start)
                assert page.status_code == 200
            whole = client.get(f"/runs/{run_id}/answer.txt")
            assert len(whole.text) > ANSWER * 0.9  # the link's whole answer
        for t in streams:
            t.join(120)
        assert len(ends) == 5
        # A stream from the start of 50 MB sent its end, not all of it.
        assert max(ends) < 2 * 1024 * 1024, ends
        assert len(page.text) < 1024 * 1024  # a page shows a capped part
        assert f"/runs/{run_id}/answer.txt" in page.text
        assert f"/runs/{run_id}/transcript.md" in page.text
        print(
            f"server peak RSS {peak[0] / 2**20:.0f} MB; job page {min(took):.2f}-{max(took):.2f} s"
        )
        done.set()
        assert peak[0] <= RSS_LIMIT, peak[0]
