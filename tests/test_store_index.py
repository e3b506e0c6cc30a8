"""The local index (index.sqlite): the job files and session logs stay the truth; the index
answers ps/history/cost without reading every record, and is made again when lost or damaged.
In-process: no process is started (but by the one foreground run, marked)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.checks import examples
from support.fake import Fake
from support.jobresult import job_result

from subagents.core import indexdb
from subagents.core.clock import epoch
from subagents.jobs import JobStore
from subagents.lifecycle import cost as costs
from subagents.lifecycle import history, logindex, sessionlog
from subagents.lifecycle.sessionlog import entries

PLAN = {"mode": "single", "requests": [{"task": "t", "backend": "pi"}], "session": "default"}


def finished(store: JobStore, task: str = "t", **result: Any) -> str:
    """A finished job's id (``result``: what its result holds instead)."""
    job_id = store.create({**PLAN, "requests": [{"task": task}]}, agents=["pi"], background=False)  # type: ignore[typeddict-item]
    store.finish(job_id, job_result(job_id, **result))
    return job_id


def listed(store: JobStore, limit: int = 1000) -> list[str]:
    return [row["jobId"] for row in store.list(limit)]


def test_a_settled_store_is_listed_without_reading_a_job_file(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore()
    made = [finished(store) for _ in range(5)]
    assert listed(store) == sorted(made, reverse=True)
    # Once the jobs directory's mtime is old enough to be trusted, a look reads no file.
    past = time.time() - 60
    os.utime(store.dir, (past, past))
    listed(store)  # this look trusts the (now old) mtime
    reads: list[str] = []
    real_load = JobStore.load

    def counting(self: JobStore, job_id: str) -> object:
        reads.append(job_id)
        return real_load(self, job_id)

    monkeypatch.setattr(JobStore, "load", counting)
    assert listed(store) == sorted(made, reverse=True)
    assert reads == []


def test_a_job_s_unfinished_updates_are_listed_from_its_file_without_an_index_write(
    isolated_state: Path,
) -> None:
    store = JobStore()
    job_id = store.create(PLAN, agents=["pi"], background=False)  # type: ignore[arg-type]
    assert [r["status"] for r in store.list()] == ["pending"]
    index = indexdb.path(isolated_state)

    def written() -> tuple[object, ...]:
        return tuple(
            (st.st_mtime_ns, st.st_size) if (st := _stat(Path(f"{index}{s}"))) else None
            for s in ("", "-wal")
        )

    before = written()
    store.update(job_id, status="running", runIds=["01runrunru-nrunrunr"])
    assert written() == before  # the update wrote its file only
    (row,) = store.list()  # the look reads an unfinished job's file again
    assert row["status"] == "running" and row["runIds"] == ["01runrunru-nrunrunr"]


def test_a_job_takes_its_id_only_with_its_record_whole(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's directory is made under a name no look lists and renamed with its job.json in
    it: a process killed while making it leaves no job that a look would wait on for ever
    (its record never to come)."""
    from subagents.jobs import store as store_module

    seen: list[tuple[list[str], list[str]]] = []
    real = store_module.write_json_atomic

    def spy(path: Path, obj: object, **kw: Any) -> None:
        seen.append((listed(JobStore()), sorted(p.name for p in path.parent.parent.iterdir())))
        real(path, obj, **kw)

    monkeypatch.setattr(store_module, "write_json_atomic", spy)
    store = JobStore()
    job_id = store.create(PLAN, agents=["pi"], background=False)  # type: ignore[arg-type]
    assert seen == [([], [f"{store_module.MAKING_PREFIX}{job_id}"])]
    assert listed(JobStore()) == [job_id]
    assert sorted(p.name for p in store.dir.iterdir()) == [job_id]


def test_a_job_left_half_made_by_a_killed_process_goes_at_the_next_removal(
    isolated_state: Path,
) -> None:
    from subagents.jobs import housekeeping
    from subagents.jobs.store import MAKING_PREFIX

    store = JobStore()
    store.dir.mkdir(parents=True, exist_ok=True)
    left, making = store.dir / f"{MAKING_PREFIX}old", store.dir / f"{MAKING_PREFIX}new"
    for d in (left, making):
        d.mkdir()
        (d / ".reserve").write_bytes(b"x")
    past = time.time() - 2 * housekeeping.MAKING_LEFT
    os.utime(left, (past, past))
    housekeeping.finish_interrupted(store)
    assert not left.exists() and making.exists()  # (one still being made is left be)


def _row_status(home: Path, job_id: str) -> str | None:
    """The job's status as its index row says (none: no row), read without a look's
    catch-up."""
    if not indexdb.path(home).exists():
        return None
    with sqlite3.connect(indexdb.path(home)) as db:
        row = db.execute("select status from jobs where job_id = ?", (job_id,)).fetchone()
    return None if row is None else str(row[0])


def test_a_job_whose_row_is_held_is_listed_finished_from_its_file_until_it_is_written(
    isolated_state: Path,
) -> None:
    """A foreground command holds its job's index row until its caller was told how it
    ended (JobStore.hold_rows): a look meanwhile reads the finished job from its file."""
    store = JobStore()
    store.hold_rows()
    job_id = finished(store)
    assert _row_status(isolated_state, job_id) is None  # held: not written
    assert [(r["jobId"], r["status"]) for r in JobStore().list()] == [(job_id, "completed")]
    store.put_held_rows()
    assert _row_status(isolated_state, job_id) == "completed"
    assert listed(JobStore()) == [job_id]


@pytest.mark.process
def test_a_foreground_run_s_job_is_in_the_index_finished_once_its_command_ended(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    from support import pistream as pi
    from support.cli import invoke

    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    done = invoke(["run", "-q", "x"], env=fake.env(pi.answer("ok")))
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    (job_id,) = [p.name for p in (isolated_state / "jobs").iterdir()]
    assert _row_status(isolated_state, job_id) == "completed"


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def test_a_job_made_behind_the_index_is_listed_next_time(isolated_state: Path) -> None:
    store = JobStore()
    first = finished(store)
    past = time.time() - 60
    os.utime(store.dir, (past, past))
    assert listed(store) == [first]
    # Another program (or a writer whose index write failed) makes a job: only its file.
    second = "01zzzzzzzz-zzzzzzzz"
    (store.dir / second).mkdir()
    data = json.loads(store.path(first).read_text())
    data["jobId"] = second
    store.path(second).write_text(json.dumps(data))
    assert listed(store) == [second, first]
    # And one removed behind its back leaves it.
    shutil.rmtree(store.dir / first)
    assert listed(store) == [second]


def test_an_index_deleted_or_damaged_is_made_again(isolated_state: Path) -> None:
    store = JobStore()
    made = sorted((finished(store) for _ in range(3)), reverse=True)
    index = indexdb.path(isolated_state)
    for damage in (b"", b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000):
        index.write_bytes(damage)
        assert listed(store) == made, damage[:20]
    index.unlink()
    assert listed(store) == made


def test_a_damaged_job_file_is_said_at_every_look_and_never_listed(isolated_state: Path) -> None:
    store = JobStore()
    good, bad = finished(store), "01zzzzzzzz-zzzzzzzz"
    (store.dir / bad).mkdir()
    store.path(bad).write_text('{"jobId": ')  # found damaged at the first look
    for _ in range(3):
        assert listed(store) == [good]
        assert len(store.damaged) == 1 and "is damaged" in store.damaged[0]
    assert store.total == 1


def test_a_rebuild_of_many_jobs_reads_them_as_one_at_a_time_does(isolated_state: Path) -> None:
    """Past _MANY job files a rebuild parses them with orjson: the same rows, the same damaged
    file said the same way, a number orjson cannot hold exactly read exactly."""
    store = JobStore()
    made = [finished(store, task=f"t{i}") for i in range(70)]
    odd = made[0]
    state = json.loads(store.path(odd).read_text())
    state["extra"] = 2**70  # over 64 bits: orjson would make it a float
    store.path(odd).write_text(json.dumps(state))
    assert store.load(odd, many=True)["extra"] == 2**70  # type: ignore[typeddict-item]
    bad = "01zzzzzzzz-zzzzzzzz"
    (store.dir / bad).mkdir()
    store.path(bad).write_text('{"jobId": ')
    rows = {}
    for many in (False, True):
        fresh = JobStore()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("subagents.jobs.jobindex._MANY", 10**9 if not many else 2)
            indexdb.path(isolated_state).unlink(missing_ok=True)
            rows[many] = (fresh.list(1000), fresh.damaged)
    assert rows[True] == rows[False]
    listing, said = rows[True]
    assert sorted(r["jobId"] for r in listing) == sorted(made)
    assert len(said) == 1 and "is damaged (not JSON" in said[0]


def test_jobs_written_while_ps_reads_are_all_in_the_next_listing(isolated_state: Path) -> None:
    store = JobStore()
    made: list[str] = []
    done = threading.Event()

    def writer() -> None:
        own = JobStore()
        for i in range(40):
            made.append(finished(own, f"task {i}"))
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():
        JobStore().list(5)
    thread.join()
    assert listed(store) == sorted(made, reverse=True)


def _entry(i: int, when: float, kind: str) -> dict[str, object]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(when))
    return {
        "type": "agent_event",
        "timestamp": stamp,
        "eventType": f"subagent:{kind}",
        "jobId": f"job{i}",
        "completedAt": stamp if kind != "start" else None,
        "status": "completed" if kind != "start" else None,
        "usage": {"input": 1, "output": 1, "totalTokens": 2, "cost": 0.5},
        "agentName": "pi",
    }


lines = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["start", "complete", "error"])),
        st.sampled_from([b"garbage\n", b"\n", b'{"torn": \n', b"[1, 2]\n"]),
    ),
    max_size=40,
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=lines, more=lines, since=st.integers(0, 10_000), torn=st.booleans())
def test_the_log_index_finds_what_a_full_read_finds(
    isolated_state: Path, first: list[object], more: list[object], since: int, torn: bool
) -> None:
    """Whatever a log holds (entries, garbage, torn lines), appended in two goes, the index's
    window is exactly the full read filtered by time; a torn tail is not an entry yet."""
    home = isolated_state / f"h{time.monotonic_ns()}"
    log = home / "sessions" / "default.jsonl"
    log.parent.mkdir(parents=True)
    base = 1_700_000_000.0

    def write(items: list[object]) -> None:
        with log.open("ab") as f:
            for n, item in enumerate(items):
                if isinstance(item, bytes):
                    f.write(item)
                else:
                    offset, kind = item  # type: ignore[misc]
                    f.write(json.dumps(_entry(n, base + offset, kind)).encode() + b"\n")

    def check() -> None:
        window = base + since
        want = [e for e in entries(log) if list(history.selected([e], since=window))]
        assert list(logindex.since(home, [log], window, "at")) == want
        # history: the newest first, filtered as a full read backwards is, up to its limit
        for limit, status, kinds in (
            (None, None, None),
            (2, None, ["complete"]),
            (3, "completed", None),
        ):
            backwards = history.selected(
                reversed(list(entries(log))), status=status, since=window, event_types=kinds
            )
            got = history.newest(
                home, log, limit=limit, status=status, since=window, event_types=kinds
            )
            assert list(got) == list(backwards)[:limit]
        ended = [
            e
            for e in costs.end_entries(home)
            if (epoch(e.get("completedAt")) or epoch(e.get("timestamp")) or 0) >= window
        ]
        assert costs.end_entries(home, since=window) == ended

    write(first)
    check()
    if torn:
        with log.open("ab") as f:
            f.write(b'{"type": "agent_event", "timestamp": "2023-')
        check()
        with log.open("ab") as f:
            f.write(b'11-14T22:13:20.000Z"}\n')  # the torn line made whole
    write(more)
    check()


def test_a_log_replaced_by_a_shorter_one_is_read_again(isolated_state: Path) -> None:
    log = isolated_state / "sessions" / "default.jsonl"
    log.parent.mkdir(parents=True)
    now = time.time()
    log.write_text("".join(json.dumps(_entry(i, now, "complete")) + "\n" for i in range(5)))
    assert len(list(logindex.since(isolated_state, [log], now - 10, "ended"))) == 5
    log.write_text(json.dumps(_entry(9, now, "complete")) + "\n")
    found = list(logindex.since(isolated_state, [log], now - 10, "ended"))
    assert [e["jobId"] for e in found] == ["job9"]


def test_history_and_cost_read_the_logs_when_the_index_cannot_be_opened(
    isolated_state: Path,
) -> None:
    log = isolated_state / "sessions" / "default.jsonl"
    log.parent.mkdir(parents=True)
    now = time.time()
    log.write_text(json.dumps(_entry(1, now, "complete")) + "\n")
    indexdb.path(isolated_state).mkdir()  # no database can be made there
    assert [e["jobId"] for e in history.newest(isolated_state, log, since=now - 5)] == ["job1"]
    assert [e["jobId"] for e in costs.end_entries(isolated_state, since=now - 5)] == ["job1"]


def _write_log(home: Path, items: list[dict[str, object]]) -> Path:
    log = sessionlog.session_path(home, "default")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(json.dumps(e) + "\n" for e in items))
    return log


def test_history_reads_from_the_log_only_the_entries_it_shows(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = float(int(time.time()) - 1000)  # (the entries' times are whole seconds)
    log = _write_log(
        isolated_state,
        [_entry(i, base + i, kind) for i in range(300) for kind in ("start", "complete")],
    )

    def shown(**filters: Any) -> list[str]:
        return [e["jobId"] for e in history.newest(isolated_state, log, **filters)]

    ends = ["complete", "error", "aborted"]
    assert shown(limit=3, event_types=ends) == ["job299", "job298", "job297"]
    parsed: list[bytes] = []
    real = logindex.parse_line
    monkeypatch.setattr(logindex, "parse_line", lambda line: parsed.append(line) or real(line))
    # The index is up to date: only the entries shown are read (and parsed) from the log.
    assert shown(limit=5, event_types=ends) == [f"job{i}" for i in range(299, 294, -1)]
    assert len(parsed) == 5
    parsed.clear()
    window = shown(since=base + 290, status="completed")
    assert window == [f"job{i}" for i in range(299, 289, -1)] and len(parsed) == 10
    parsed.clear()
    assert shown(limit=2, agent="pi", event_types=["start"]) == ["job299", "job298"]
    assert len(parsed) == 2


def test_entries_written_while_history_reads_are_all_in_the_next_listing(
    isolated_state: Path,
) -> None:
    log = sessionlog.session_path(isolated_state, "default")
    done = threading.Event()

    def writer() -> None:
        for i in range(60):
            sessionlog.append(log, _entry(i, time.time(), "complete"))  # type: ignore[arg-type]
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():
        list(history.newest(isolated_state, log, limit=5))
    thread.join()
    listed = [e["jobId"] for e in history.newest(isolated_state, log)]
    assert listed == [f"job{i}" for i in range(59, -1, -1)]


def test_history_s_index_deleted_or_damaged_is_made_again(isolated_state: Path) -> None:
    log = _write_log(isolated_state, [_entry(i, time.time(), "complete") for i in range(5)])
    want = [f"job{i}" for i in range(4, -1, -1)]
    index = indexdb.path(isolated_state)

    def shown() -> list[str]:
        return [e["jobId"] for e in history.newest(isolated_state, log, limit=10)]

    def indexed() -> int:
        with sqlite3.connect(index) as db:
            return int(db.execute("select count(*) from log_lines").fetchone()[0])

    assert shown() == want
    for damage in (b"", b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000):
        index.write_bytes(damage)
        assert shown() == want, damage[:20]
        assert indexed() == 5, damage[:20]  # made again, not passed by
    index.unlink()
    assert shown() == want and indexed() == 5
    index.unlink()
    index.mkdir()  # no index can be made: the log is read backwards
    assert shown() == want


def test_numbers_past_64_bits_are_indexed_whole_and_nothing_raises(isolated_state: Path) -> None:
    store = JobStore()
    usage = {"input": 2**64, "output": 1, "cacheRead": 0, "cacheWrite": 0}
    finished(store, durationMs=-(2**70), usage={**usage, "totalTokens": 2**70 + 1, "cost": 10**30})
    (row,) = store.list()
    assert (row["totalTokens"], row["durationMs"], row["cost"]) == (2**70 + 1, -(2**70), 10**30)
    indexdb.path(isolated_state).unlink()
    assert store.reindex() == 1 and store.list() == [row]
    # In the session log too: a time past any float is no time (not an error).
    log = _write_log(isolated_state, [{**_entry(1, 1000, "complete"), "timestamp": 10**400}])
    assert [e["jobId"] for e in history.newest(isolated_state, log)] == ["job1"]
    assert list(history.newest(isolated_state, log, since=0)) == []
    assert [e["jobId"] for e in costs.end_entries(isolated_state, since=0)] == ["job1"]


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1, "a": 2}',
        b'{"n": 123456789012345678901234567890}',
        b'{"x": NaN}',
        b'\xef\xbb\xbf{"bom": true}',
        '{"wide": "\\u00e9"}'.encode("utf-16"),
        b'{"lone": "\\ud800"}',
        b'{"f": 0.1, "e": 1e400}',
    ],
)
def test_a_fast_read_is_the_same_value_as_json_s(data: bytes, tmp_path: Path) -> None:
    from subagents.core.files import read_json

    path = tmp_path / "x.json"
    path.write_bytes(data)
    try:
        slow: object = read_json(path)
    except ValueError as exc:
        with pytest.raises(ValueError) as caught:
            read_json(path, fast=True)
        assert str(caught.value) == str(exc)
        return
    fast = read_json(path, fast=True)
    assert repr(fast) == repr(slow)  # repr: NaN is not equal to itself
