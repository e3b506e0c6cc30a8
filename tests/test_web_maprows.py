"""A map on the web job page (web/maprows.py, ``_job_live.html``): its rows as a table
(status, input key, attempts, gate outcome, cost, a link to each row's run), paged and
filterable by status, every value escaped, drawn again as the row log grows. The map is
recorded (never driven: no run starts) and its row log written here, as its driver would."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import httpx2
import pytest
from support.webserver import TOKEN, Web

from subagents import maps
from subagents.jobs import JobStore
from subagents.jobs.maplog import LOG_FILE, RowLog
from subagents.service import job_runs
from subagents.web.ids import target
from subagents.web.maprows import PAGE

HOSTILE = '<script>alert("k")</script>'
RUNNING = "01aaaaaaaa-00000003"  # the run of the row write_rows leaves running


@pytest.fixture
def a_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, RowLog]]:
    """A map of 120 rows (the first key hostile), recorded; its row log open to write."""
    monkeypatch.setenv("SUBAGENTS_PI_BIN", sys.executable)  # planned only, never run
    data = tmp_path / "rows.txt"
    data.write_text(HOSTILE + "\n" + "".join(f"item{i}\n" for i in range(1, 120)))
    job = maps.prepare_map(str(data), "do {line}", key="line", cwd=str(tmp_path))
    store = JobStore(Path(str(job.store.home)))
    log = RowLog(store.dir / job.job_id)
    try:
        yield job.job_id, log
    finally:
        log.close()


def write_rows(log: RowLog) -> None:
    """Row 1 done after a retry with its gate passed; row 2 failed its gate; row 3 running."""
    log.started(0, "01aaaaaaaa-0000001a", 0)
    log.started(0, "01aaaaaaaa-0000001b", 1)
    log.done(
        0,
        {"status": "completed", "runId": "01aaaaaaaa-0000001b", "attempt": 1, "cost": 0.25,
         "verification": {"passed": True}},
    )  # fmt: skip
    log.started(1, "01aaaaaaaa-00000002", 0)
    log.done(
        1,
        {"status": "failed", "runId": "01aaaaaaaa-00000002", "attempt": 0, "cost": None,
         "error": "the gate `make` failed (exit 2): <b>boom</b>",
         "verification": {"passed": False}},
    )  # fmt: skip
    log.started(2, "01aaaaaaaa-00000003", 0)


def cells(page: str) -> list[list[str]]:
    """The map table's rows, each as its cells' text."""
    table = page.split('data-key="maprows-table"', 1)[1].split("</table>", 1)[0]
    return [
        [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr data-key=\"row-\d+\">(.*?)</tr>", table, re.S)
    ]  # fmt: skip


def get(web: Web, path: str) -> str:
    with httpx2.Client(base_url=web.base, timeout=30) as client:
        client.get(f"/?token={TOKEN}")
        response = client.get(path)
        assert response.status_code == 200, response.text[:300]
        return response.text


def test_a_maps_rows_are_a_paged_escaped_table(web: Web, a_map: tuple[str, RowLog]) -> None:
    job_id, log = a_map
    write_rows(log)
    page = get(web, f"/job/{job_id}")
    assert HOSTILE not in page and "<b>boom</b>" not in page  # escaped, every one
    rows = cells(page)
    assert len(rows) == PAGE
    assert rows[0] == ["1", HOSTILE, "completed", "2", "passed", "$0.25", ""]
    assert rows[1][:5] == ["2", "item1", "failed", "1", "failed"]
    assert rows[1][6] == "the gate `make` failed (exit 2): <b>boom</b>"
    assert rows[2][:5] == ["3", "item2", "running", "1", "-"]
    assert rows[3][:5] == ["4", "item3", "pending", "-", "-"]
    assert "rows 1\N{EN DASH}50 of 120 · page 1 of 3" in unescape(page)
    # Each started row links to its run (its last attempt's), the table staying as it is.
    assert f'href="/job/{job_id}?run=01aaaaaaaa-0000001b"' in page
    # The last page, and a filter by status.
    last = cells(get(web, f"/job/{job_id}?rows_page=3"))
    assert [r[0] for r in last] == [str(n) for n in range(101, 121)]
    failed = get(web, f"/job/{job_id}?rows=failed")
    assert [r[1] for r in cells(failed)] == ["item1"]
    assert "rows 1\N{EN DASH}1 of 1 · page 1 of 1" in unescape(failed)
    assert "<strong>failed 1</strong>" in failed and ">pending 117</a>" in failed
    # A filter or page that means nothing is said and left out, never an error page.
    odd = get(web, f"/job/{job_id}?rows=bogus&rows_page=x")
    assert "rows: &#39;bogus&#39; is none of" in odd and len(cells(odd)) == PAGE
    # The live stream draws the same page of the table: its address carries the page.
    stream = re.search(r'data-stream="([^"]*)"', failed)
    assert stream and stream.group(1).startswith(f"/events/job/{job_id}?")
    assert "rows=failed" in unescape(stream.group(1)).split("?", 1)[1].split("&")


def test_the_table_is_live_the_streams_next_draw_has_the_rows_end(
    web: Web, a_map: tuple[str, RowLog]
) -> None:
    job_id, log = a_map
    write_rows(log)
    with (
        httpx2.Client(base_url=web.base, timeout=30) as client,
        client.stream(
            "GET", f"/events/job/{job_id}?run={RUNNING}&rows=running", headers=_bearer()
        ) as stream,
    ):
        lines = stream.iter_lines()
        first = _next_job_event(lines)
        assert [r[1] for r in cells(first)] == ["item2"]
        log.done(2, {"status": "completed", "runId": "01aaaaaaaa-00000003", "attempt": 0})
        after = _next_job_event(lines)
        assert cells(after) == [] and "No rows running." in after


def test_a_maps_row_runs_are_its_own_to_the_web(a_map: tuple[str, RowLog], tmp_path: Path) -> None:
    job_id, log = a_map
    write_rows(log)
    store = JobStore(Path(str(Path(tmp_path / "state"))))
    state = store.load(job_id)
    assert job_runs(store, state) == [
        "01aaaaaaaa-0000001a",
        "01aaaaaaaa-0000001b",
        "01aaaaaaaa-00000002",
        "01aaaaaaaa-00000003",
    ]
    assert target(store, job_id, "01aaaaaaaa-0000001a").run_id == "01aaaaaaaa-0000001a"
    from subagents.errors import JobIdError

    with pytest.raises(JobIdError):
        target(store, job_id, "01bbbbbbbb-00000009")


def test_a_maps_first_look_reads_its_row_log_once(
    a_map: tuple[str, RowLog], tmp_path: Path
) -> None:
    """The page's runs and its row table come from one reading of the row log (in
    bytes read, which /proc counts: the log is made large, each row's error long)."""
    from subagents.service import LiveJobs, job_state
    from subagents.web.jobpage import gather, render_live
    from subagents.web.maprows import RowsQuery

    job_id, log = a_map
    write_rows(log)
    for i in range(3, 120):
        log.started(i, f"01cccccccc-{i:08d}", 0)
        log.done(i, {"status": "failed", "runId": f"01cccccccc-{i:08d}", "error": "x" * 16_000})
    home = tmp_path / "state"
    store = JobStore(home)
    size = (store.dir / job_id / LOG_FILE).stat().st_size

    def first_look(job: str) -> str:
        return render_live(gather(LiveJobs(home), job_state(store, job), None), home, RowsQuery())

    data = tmp_path / "other.txt"
    data.write_text("a\n")
    first_look(maps.prepare_map(str(data), "do {line}", cwd=str(tmp_path)).job_id)  # warm
    before = bytes_read()
    page = first_look(job_id)
    read = bytes_read() - before
    assert [r[1] for r in cells(page)][:4] == [HOSTILE, "item1", "item2", "item3"]
    assert size <= read < 1.5 * size, (read, size)


def bytes_read() -> int:
    """What this process has read so far (``rchar``: every read call's bytes)."""
    io = Path("/proc/self/io").read_text()
    return int(next(line for line in io.splitlines() if line.startswith("rchar:")).split()[1])


def _bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def _next_job_event(lines: Iterator[str]) -> str:
    """The html of the stream's next ``job`` event."""
    import json

    kind = ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: ") and kind == "job":
            html = json.loads(line[6:])["html"]
            assert isinstance(html, str)
            return html
    raise AssertionError("the stream ended")
