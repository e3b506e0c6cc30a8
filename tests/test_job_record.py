"""A finished job's answer is written once in job.json (in its runs), and every reader
still sees the job's ``finalText``; big JSON records are written in pieces, byte for byte
what json.dumps wrote."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import pistream as pi
from support.checks import examples
from support.cli import invoke
from support.fake import Fake
from support.jobresult import job_result

from subagents.core.files import (
    JSON_PIECE,
    _dump_json,
    json_pieces,
    publish_once,
    write_json_atomic,
)
from subagents.jobs import JobStore
from subagents.lifecycle.sessionlog import summarize

ANSWER = "The big answer ✓\n" + "line of the answer\n" * 20_000  # ~380 kB, one of a kind


def _home() -> Path:
    return Path(os.environ["SUBAGENTS_HOME"])


def _only_job() -> tuple[str, str]:
    (path,) = (_home() / "jobs").glob("*/job.json")
    return path.parent.name, path.read_text()


@pytest.mark.process
def test_a_single_run_job_holds_its_answer_once_and_shows_it_as_before(fake: Fake) -> None:
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(pi.answer(ANSWER))}
    p = invoke(["run", "--json", "x"], env)
    assert p.returncode == 0, p.stderr
    job_id, on_disk = _only_job()
    # On disk: the answer once, in the run's record; no job-level copy.
    assert on_disk.count("line of the answer") == 20_000
    assert "finalText" not in {k for k in json.loads(on_disk) if k != "runs"}

    # `run --json` prints the run's result.json, as result.json has it, byte for byte.
    run = json.loads(p.stdout)
    result_file = _home() / "runs" / run["runId"] / "result.json"
    assert p.stdout == result_file.read_text()
    assert run["finalText"] == ANSWER

    # Every reader gets the job's finalText back, in its place (right after runs).
    state = JobStore(_home()).load(job_id)
    assert state["finalText"] == ANSWER
    keys = list(state)
    assert keys[keys.index("runs") + 1] == "finalText"
    shown = invoke(["show", "--json", job_id[:8]])
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == state
    assert shown.stdout == json.dumps(state, indent=2, ensure_ascii=False) + "\n"
    described = invoke(["show", job_id])
    assert described.returncode == 0 and ANSWER.rstrip() in described.stdout


@pytest.mark.process
def test_a_chain_keeps_its_last_answer_once_and_a_parallel_job_its_null(
    fake: Fake, tmp_path: Path
) -> None:
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), **fake.env(pi.answer(ANSWER))}
    p = invoke(["run", "--chain", "--json", "one", "two"], env)
    assert p.returncode == 0, p.stderr
    job_id, on_disk = _only_job()
    assert on_disk.count("line of the answer") == 2 * 20_000  # each step's answer, once
    assert "finalText" not in json.loads(on_disk)
    printed = json.loads(p.stdout)
    assert printed["finalText"] == ANSWER  # what --json prints is unchanged
    assert JobStore(_home()).load(job_id) | {"finalText": ANSWER} == JobStore(_home()).load(job_id)

    for path in (_home() / "jobs").iterdir():
        path.rename(tmp_path / path.name)  # out of the way
    p = invoke(["run", "--parallel", "--json", "a", "b"], env)
    assert p.returncode == 0, p.stderr
    _, on_disk = _only_job()
    assert json.loads(on_disk)["finalText"] is None  # null costs nothing: written as before


def test_job_files_written_before_still_read_the_same(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job_id = store.create({"mode": "single"}, agents=["pi"], background=False)
    old = store.load(job_id) | {
        "status": "completed",
        "runs": [{"runId": "r1", "status": "completed", "finalText": "A"}],
        "finalText": "A",
    }
    store.path(job_id).write_text(json.dumps(old))  # as every version before wrote it
    assert store.load(job_id) == old
    # A finalText that does not follow from the runs is never dropped.
    store.update(job_id, finalText="something else")
    assert json.loads(store.path(job_id).read_text())["finalText"] == "something else"
    assert store.load(job_id)["finalText"] == "something else"
    # Rewritten with the runs' own answer, the file holds it once again.
    store.update(job_id, finalText="A")
    assert "finalText" not in json.loads(store.path(job_id).read_text())
    assert store.load(job_id) == old


def test_the_lifecycle_summary_reads_only_the_answers_first_line() -> None:
    result = {
        "mode": "single",
        "status": "completed",
        "runs": [
            {"status": "completed", "agent": "scout", "finalText": "\n\n  First. \n" + ANSWER}
        ],
    }
    assert summarize(result) == 'completed: scout — "First."'


_OLD_SPLIT = str.splitlines


@settings(max_examples=examples(300))
@given(st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0c\x1c\x85\u2028\u2029ab ü"), max_size=40))
def test_the_first_line_is_what_splitting_every_line_found(text: str) -> None:
    from subagents.present.outcome import first_line as _first_line

    expected = next((line.strip() for line in _OLD_SPLIT(text) if line.strip()), "")
    assert _first_line(text) == expected


# ---- JSON written in pieces ----------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(200))
@given(_json)
def test_json_pieces_are_json_dumps(value: Any) -> None:
    # Strict, as every record is written: Infinity and NaN are no JSON.
    try:
        expected = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    except ValueError:
        with pytest.raises(ValueError):
            "".join(json_pieces(value))
        return
    assert "".join(json_pieces(value)) == expected


_json_no_floats = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(200))
@given(_json_no_floats)
def test_a_record_through_orjson_is_the_bytes_json_writes(value: Any) -> None:
    """Where orjson is loaded (a warm worker, its supervisors), a record is written through
    it: the bytes json writes (floats aside: 1e-5, not 1e-05), json's for what it refuses."""
    import io

    from subagents.core import files

    files.orjson_module()  # (imported: _dump_json takes it)
    out = io.BytesIO()
    _dump_json(value, out)
    assert out.getvalue() == json.dumps(value, ensure_ascii=False, indent=2).encode() + b"\n"


def test_a_record_is_json_s_while_another_thread_imports_orjson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module being imported is in sys.modules before it has its names: a record written
    meanwhile (a parallel job's other run) is json's, never an AttributeError."""
    import io
    import sys
    import types

    from subagents.core import files

    monkeypatch.setattr(files, "_orjson", None)
    monkeypatch.setitem(sys.modules, "orjson", types.ModuleType("orjson"))  # half made
    out = io.BytesIO()
    _dump_json({"a": [1, "ü"]}, out)
    assert (
        out.getvalue() == json.dumps({"a": [1, "ü"]}, ensure_ascii=False, indent=2).encode() + b"\n"
    )


@pytest.mark.parametrize("writer", ["atomic", "once"])
def test_a_big_record_is_written_in_pieces_as_json_dumps_wrote_it(
    tmp_path: Path, writer: str
) -> None:
    # Longer than a piece, with multi-byte characters and escapes across the cuts.
    text = ('ü✓"\\\n\x1b' + "y" * 97) * (3 * JSON_PIECE // 100)
    record = {"finalText": text, "usage": {"cost": 0.5}, "runs": [None, [], {}]}
    assert max(len(piece) for piece in json_pieces(record)) == JSON_PIECE
    path = tmp_path / "result.json"
    if writer == "atomic":
        write_json_atomic(path, record)
    else:
        assert publish_once(path, record)
    expected = json.dumps(record, ensure_ascii=False, indent=2).encode() + b"\n"
    assert path.read_bytes() == expected
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_record_is_encoded_and_written_at_once_a_big_one_a_piece_at_a_time() -> None:
    """A record's JSON is gathered into one write (not one per encoder piece); one longer
    than a piece is written a piece at most at a time (never copied whole once more)."""
    writes: list[bytes] = []

    class File:
        def write(self, data: bytes) -> None:
            writes.append(data)

    record = {"jobId": "j", "plan": {"requests": [{"task": "t", "env": {}}] * 50}}
    _dump_json(record, File())
    assert writes[:-1] == [json.dumps(record, ensure_ascii=False, indent=2).encode()]
    assert writes[-1] == b"\n"
    writes.clear()
    big = {"finalText": "ü" * (2 * JSON_PIECE + 5), "runs": [record]}
    _dump_json(big, File())
    assert b"".join(writes) == json.dumps(big, ensure_ascii=False, indent=2).encode() + b"\n"
    assert max(len(w.decode()) for w in writes) <= JSON_PIECE


def test_a_record_that_cannot_be_written_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "meta.json"
    with pytest.raises(UnicodeEncodeError):
        write_json_atomic(path, {"bad": "\ud800" + "x" * 10})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("durable", "waits"), [("this", ["file", "dir"]), ("whole", ["file"]), ("none", [])]
)
def test_a_record_waits_for_the_disk_as_far_as_its_durability_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: Any, waits: list[str]
) -> None:
    """A write at "this" waits for the file and its rename to reach the disk, at "whole"
    for the file's bytes only, at "none" for neither (core.files.Durability); every level
    replaces the file whole."""
    seen: list[str] = []
    real = os.fsync
    me = threading.get_ident()

    def fsync(fd: int) -> None:
        # This thread's only: a thread an earlier test left in this worker may write too.
        if threading.get_ident() == me:
            seen.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / "job.json"
    write_json_atomic(path, {"n": 1}, durable=durable)
    write_json_atomic(path, {"n": 2}, durable=durable)
    assert seen == waits * 2
    assert json.loads(path.read_text()) == {"n": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["job.json"]  # no temp file left


def _running_job(home: Path) -> tuple[JobStore, str]:
    store = JobStore(home)
    plan: Any = {"mode": "single", "requests": [{"task": "t", "backend": "pi"}]}
    return store, store.make(plan, agents=["pi"], background=False, driving="log")["jobId"]


def test_a_job_s_end_entry_and_its_result_go_to_disk_at_once_the_entry_first_in_sight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end entry is written while the result's file is fsynced (two waits on the disk
    at once, not one after the other), and the result is put in place only once the entry
    is written: whoever sees the job over finds its entry."""
    store, job_id = _running_job(tmp_path)
    job_file = store.path(job_id)
    synced = threading.Event()  # the result's temp file fsynced
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            synced.set()

    monkeypatch.setattr(os, "fsync", fsync)
    seen: list[object] = []

    def log_end() -> None:
        # Written one after the other, the result's fsync would come after this returned.
        seen.append(synced.wait(30))
        seen.append(json.loads(job_file.read_text())["status"])

    store.finish(job_id, job_result(job_id), log_end=log_end)
    assert seen == [True, "running"]
    state = json.loads(job_file.read_text())
    assert state["status"] == "completed" and "endEntry" not in state
    assert [p.name for p in job_file.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert [row["status"] for row in store.list()] == ["completed"]


def test_an_end_entry_that_cannot_be_written_leaves_the_result_saying_it_is_owed(
    tmp_path: Path,
) -> None:
    store, job_id = _running_job(tmp_path)

    def log_end() -> None:
        raise OSError("no space left on device")

    finished = store.finish(job_id, job_result(job_id), log_end=log_end)
    state = json.loads(store.path(job_id).read_text())
    assert finished["endEntry"] == state["endEntry"] == "pending"
    assert state["status"] == "completed"
    assert [p.name for p in store.path(job_id).parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_job_finished_before_still_has_its_end_entry_tried_and_keeps_its_result(
    tmp_path: Path,
) -> None:
    store, job_id = _running_job(tmp_path)
    first = store.finish(job_id, job_result(job_id))
    tried: list[bool] = []
    again = store.finish(
        job_id, {**job_result(job_id), "status": "failed"}, log_end=lambda: tried.append(True)
    )
    assert tried == [True] and again["status"] == first["status"] == "completed"


def test_a_finished_job_s_row_is_indexed_once_its_file_is_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index row is written while the job's directory is fsynced, never before the
    file it caches is in place (a look at the index reads no file for a finished row)."""
    store, job_id = _running_job(tmp_path)
    real = store._index.put
    on_disk: list[str] = []

    def put(state: Any) -> None:
        on_disk.append(json.loads(store.path(job_id).read_text())["status"])
        real(state)

    monkeypatch.setattr(store._index, "put", put)
    store.finish(job_id, job_result(job_id), log_end=lambda: None)
    assert on_disk == ["completed"]
    assert [row["status"] for row in store.list()] == ["completed"]
