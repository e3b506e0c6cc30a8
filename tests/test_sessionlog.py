"""The session log: safe concurrent appends, tolerant readers, live follow, entry shape."""

from __future__ import annotations

import json
import os
import queue
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from subagents.core.tail import LineTail
from subagents.core.waker import DirWaker
from subagents.errors import UsageError
from subagents.lifecycle import history, sessionlog

# The entry shape, copied from DESIGN.md ("Session log") on purpose: not imported.
DESIGN_KEYS = {
    "type",
    "timestamp",
    "eventType",
    "jobId",
    "requestedBy",
    "startedAt",
    "completedAt",
    "durationMs",
    "model",
    "usage",
    "agentName",
    "pid",
    "mode",
    "status",
    "summary",
}
USAGE = {"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 1, "totalTokens": 18, "cost": 0.01}


def _entry(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "job_id": "job1",
        "mode": "single",
        "agent_name": "scout",
        "model": "m",
        "pid": 123,
    }
    args.update(kw)
    event_type = args.pop("event_type", "subagent:complete")
    return sessionlog.entry(event_type, **args)


# ---- concurrent appends -------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from subagents.lifecycle import history, sessionlog
    path, writer, go = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    pad = ("é" * 1500) + ("x" * 5000)   # bigger than PIPE_BUF and a page: interleaving would show
    for n in range(50):
        sessionlog.append(path, {"writer": writer, "n": n, "pad": pad})
    """
)


@pytest.mark.process
def test_twenty_processes_appending_never_interleave(tmp_path: Path) -> None:
    log = tmp_path / "home" / "sessions" / "s.jsonl"
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(w), str(go)])
        for w in range(20)
    ]
    time.sleep(0.3)  # let them all start; they wait for the go file
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=120) == 0

    raw = log.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 1000
    seen = set()
    for line in lines:
        obj = json.loads(line)  # every line parses: nothing interleaved
        assert obj["pad"] == "é" * 1500 + "x" * 5000
        seen.add((obj["writer"], obj["n"]))
    assert seen == {(w, n) for w in range(20) for n in range(50)}
    assert len(sessionlog.read(log)) == 1000


def test_append_modes_and_compact_lines(tmp_path: Path) -> None:
    log = tmp_path / "a" / "b" / "s.jsonl"
    sessionlog.append(log, {"x": "ü", "y": [1, 2]})
    assert log.read_bytes() == '{"x":"ü","y":[1,2]}\n'.encode()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.parent.parent.stat().st_mode) == 0o700


# ---- reading ------------------------------------------------------------------------


def test_torn_last_line_is_skipped_and_the_next_append_stays_whole(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    sessionlog.append(log, {"n": 1})
    sessionlog.append(log, {"n": 2})
    with open(log, "ab") as f:
        f.write(b'{"n": 3, "trunc')  # a writer died mid-line
    assert sessionlog.read(log) == [{"n": 1}, {"n": 2}]
    problems = sessionlog.read_with_problems(log)
    assert problems.torn_tail and problems.bad_lines == 0

    sessionlog.append(log, {"n": 4})
    assert sessionlog.read(log) == [{"n": 1}, {"n": 2}, {"n": 4}]
    problems = sessionlog.read_with_problems(log)
    assert problems.bad_lines == 1 and not problems.torn_tail


def test_bad_middle_line_is_skipped_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b'{"n":1}\nnot json\n[1,2]\n\n{"n":2}\n{"n":3')
    result = sessionlog.read_with_problems(log)
    assert result.entries == [{"n": 1}, {"n": 2}]
    assert result.bad_lines == 2  # the garbage and the non-object
    assert result.torn_tail


def test_unparseable_terminated_last_line_counts_as_torn(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b'{"n":1}\n{"n":\n')
    result = sessionlog.read_with_problems(log)
    assert result.entries == [{"n": 1}]
    assert result.torn_tail and result.bad_lines == 0


def test_read_missing_file_is_empty(tmp_path: Path) -> None:
    assert sessionlog.read(tmp_path / "nope.jsonl") == []


# ---- follow -------------------------------------------------------------------------


class Follower:
    """Runs follow() in a thread; entries land in a queue with their arrival time."""

    def __init__(self, path: Path, **kw: Any) -> None:
        self.stop = threading.Event()
        self.q: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(path, kw), daemon=True)
        self.thread.start()

    def _run(self, path: Path, kw: dict[str, Any]) -> None:
        try:
            for obj in history.follow(path, stop=self.stop, **kw):
                self.q.put((time.monotonic(), obj))
        finally:
            self.done.set()

    def get(self, timeout: float = 10) -> tuple[float, dict[str, Any]]:
        return self.q.get(timeout=timeout)

    def close(self) -> None:
        self.stop.set()
        assert self.done.wait(5), "follow did not stop within 5 s of its stop event"


@pytest.fixture
def follower() -> Iterator[list[Follower]]:
    made: list[Follower] = []
    yield made
    for f in made:
        f.stop.set()


@pytest.fixture(params=["inotify", "polling"])
def wait_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "polling":
        monkeypatch.setattr(DirWaker, "_watch", lambda self: None)
    return str(request.param)


@pytest.mark.process
def test_follow_yields_an_append_from_another_process_within_a_second(
    tmp_path: Path, follower: list[Follower], wait_mode: str
) -> None:
    log = tmp_path / "sessions" / "s.jsonl"  # neither the file nor its dir exists yet
    sessionlog.append(log, {"n": 0})
    f = Follower(log, from_start=True)
    follower.append(f)
    assert f.get()[1] == {"n": 0}  # follow is running now

    code = "import sys; from subagents.lifecycle import sessionlog; sessionlog.append(sys.argv[1], {'n': 1})"
    proc = subprocess.Popen([sys.executable, "-c", code, str(log)])
    assert proc.wait(timeout=30) == 0
    appended = time.monotonic()
    arrived, obj = f.get()
    assert obj == {"n": 1}
    assert arrived - appended < 1.0

    for n in range(2, 5):  # and from a thread, one at a time
        before = time.monotonic()
        sessionlog.append(log, {"n": n})
        arrived, obj = f.get()
        assert obj == {"n": n}
        assert arrived - before < 1.0
    f.close()


def test_follow_waits_for_a_file_that_does_not_exist_yet(
    tmp_path: Path, follower: list[Follower], wait_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "later" / "s.jsonl"
    # The file made only once follow has looked for it (its thread may start late: a file
    # there by then is one whose entries came before it).
    looked = threading.Event()
    skip = LineTail.skip_to_end

    def skip_and_say(tail: LineTail) -> None:
        skip(tail)
        looked.set()

    monkeypatch.setattr(LineTail, "skip_to_end", skip_and_say)
    f = Follower(log)
    follower.append(f)
    assert looked.wait(30)
    sessionlog.append(log, {"n": 1})
    sessionlog.append(log, {"n": 2})
    assert f.get()[1] == {"n": 1}
    assert f.get()[1] == {"n": 2}
    f.close()


def test_follow_skips_what_was_there_unless_from_start(
    tmp_path: Path, follower: list[Follower]
) -> None:
    log = tmp_path / "s.jsonl"
    sessionlog.append(log, {"old": True})
    f = Follower(log)
    follower.append(f)
    # Keep appending until something arrives (no guess at when follow started).
    got = None
    for n in range(100):
        sessionlog.append(log, {"new": n})
        try:
            got = f.get(timeout=0.2)[1]
            break
        except queue.Empty:
            continue
    assert got is not None and "new" in got
    f.close()


def test_follow_never_yields_a_partial_line_and_survives_a_torn_one(
    tmp_path: Path, follower: list[Follower], wait_mode: str
) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b'{"n":0}\n{"torn":')  # a torn tail before follow starts
    f = Follower(log, from_start=True)
    follower.append(f)
    assert f.get()[1] == {"n": 0}

    sessionlog.append(log, {"n": 1})  # starts with a newline: the torn line ends there
    assert f.get()[1] == {"n": 1}

    with open(log, "ab") as fh:  # a line written in two pieces
        fh.write(b'{"n": 2, "half"')
    with pytest.raises(queue.Empty):
        f.get(timeout=0.4)
    with open(log, "ab") as fh:
        fh.write(b": true}\n")
    assert f.get()[1] == {"n": 2, "half": True}

    with open(log, "ab") as fh:  # a torn line with garbage, then a good one
        fh.write(b"garbage\n")
    sessionlog.append(log, {"n": 3})
    assert f.get()[1] == {"n": 3}
    f.close()
    assert f.q.empty()


def test_follow_stops_on_a_callable_and_on_an_event(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    flag = {"stop": False}
    out: list[dict[str, Any]] = []
    done = threading.Event()

    def run() -> None:
        out.extend(history.follow(log, stop=lambda: flag["stop"]))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    time.sleep(0.2)
    assert not done.is_set()
    flag["stop"] = True
    assert done.wait(3), "follow did not return after stop() became true"

    event = threading.Event()
    event.set()
    started = time.monotonic()
    assert list(history.follow(log, stop=event)) == []
    assert time.monotonic() - started < 3


def test_follow_rereads_a_replaced_file(tmp_path: Path, follower: list[Follower]) -> None:
    log = tmp_path / "s.jsonl"
    sessionlog.append(log, {"n": 1, "pad": "x" * 100})
    f = Follower(log, from_start=True)
    follower.append(f)
    assert f.get()[1]["n"] == 1
    tmp = tmp_path / "new.jsonl"
    sessionlog.append(tmp, {"n": 2})
    os.replace(tmp, log)
    assert f.get()[1] == {"n": 2}
    f.close()


# ---- entries ------------------------------------------------------------------------


def test_entry_has_exactly_the_design_shape() -> None:
    e = _entry(
        status="completed",
        started_at=1_700_000_000.0,
        completed_at=1_700_000_002.5,
        usage=USAGE,
        summary="completed: scout",
    )
    assert set(e) == DESIGN_KEYS
    assert e["type"] == "agent_event"
    assert e["eventType"] == "subagent:complete"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["timestamp"])
    assert e["startedAt"] == "2023-11-14T22:13:20.000Z"
    assert e["durationMs"] == 2500
    assert e["usage"] == USAGE
    assert e["status"] == "completed" and e["mode"] == "single" and e["pid"] == 123
    json.dumps(e)  # serializable as is


def test_entry_keeps_iso_times_and_fills_usage() -> None:
    e = _entry(
        started_at="2026-01-05T10:00:00.000Z",
        completed_at="2026-01-05T10:00:01.250Z",
        usage={"input": 3},
        status="failed",
        event_type="subagent:error",
    )
    assert e["startedAt"] == "2026-01-05T10:00:00.000Z"
    assert e["durationMs"] == 1250
    assert e["usage"] == {
        "input": 3,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": None,
    }


def test_entry_summary_is_cut_to_200() -> None:
    e = _entry(summary="word " * 100)
    assert len(e["summary"]) <= 200
    assert e["summary"].endswith("…")
    assert _entry(summary="short")["summary"] == "short"


@pytest.mark.parametrize("bad", ["complete", "subagent:done", "", "agent_event"])
def test_entry_rejects_a_bad_event_type(bad: str) -> None:
    with pytest.raises(ValueError, match="eventType"):
        _entry(event_type=bad)


def test_entry_rejects_a_bad_status_and_mode_and_maps_timeout() -> None:
    with pytest.raises(ValueError, match="status"):
        _entry(status="done")
    with pytest.raises(ValueError, match="mode"):
        _entry(mode="batch")
    assert _entry(status="timeout", event_type="subagent:error")["status"] == "failed"
    assert _entry(event_type="subagent:start")["status"] is None


def test_requested_by_is_the_login_else_assistant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The login as getpass.getuser finds it (LOGNAME, USER, LNAME, USERNAME, then the password
    database's name for this uid), else "assistant"."""
    import pwd

    from subagents.lifecycle import sessionlog

    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("USER", "alice")
    assert _entry()["requestedBy"] == "alice"
    assert _entry(requested_by="bob")["requestedBy"] == "bob"
    monkeypatch.delenv("USER")
    sessionlog.passwd_name.cache_clear()
    assert _entry()["requestedBy"] == pwd.getpwuid(os.getuid()).pw_name

    def nobody(uid: int) -> object:
        raise KeyError(uid)

    sessionlog.passwd_name.cache_clear()
    monkeypatch.setattr(pwd, "getpwuid", nobody)
    try:
        assert _entry()["requestedBy"] == "assistant"
    finally:
        sessionlog.passwd_name.cache_clear()


@pytest.mark.parametrize(
    ("status", "event"),
    [
        ("completed", "subagent:complete"),
        ("aborted", "subagent:aborted"),
        ("failed", "subagent:error"),
        ("timeout", "subagent:error"),
    ],
)
def test_event_type_for(status: str, event: str) -> None:
    assert sessionlog.event_type_for(status) == event


def test_event_type_for_unknown() -> None:
    with pytest.raises(ValueError):
        sessionlog.event_type_for("weird")


# ---- summaries ----------------------------------------------------------------------


def _run(
    agent: str, status: str = "completed", final: str = "", error: str | None = None
) -> dict[str, Any]:
    return {
        "agent": agent,
        "status": status,
        "finalText": final,
        "errorMessage": error,
        "toolCalls": 0,
    }


def test_summarize_single() -> None:
    ok = {
        "mode": "single",
        "status": "completed",
        "runs": [_run("scout", final="\nFound 3 files.\nmore")],
    }
    assert sessionlog.summarize(ok) == 'completed: scout — "Found 3 files."'
    bad = {
        "mode": "single",
        "status": "failed",
        "runs": [_run("worker", "failed", error="pi exited with code 3")],
    }
    assert sessionlog.summarize(bad) == "failed: worker — pi exited with code 3"
    slow = {"mode": "single", "status": "timeout", "runs": [_run("worker", "timeout")]}
    assert sessionlog.summarize(slow) == "failed: worker — timed out"
    limited = {
        "mode": "single",
        "status": "completed",
        "runs": [
            {
                **_run("scout", final="Partly."),
                "limit": {"kind": "turns", "limit": 3, "used": 4, "action": "wrap-up"},
            }
        ],
    }
    assert sessionlog.summarize(limited) == (
        'completed: scout — ⏹ turn limit 3 · wrapped up (4 turns used) · "Partly."'
    )


def test_summarize_parallel_and_chain() -> None:
    par = {
        "mode": "parallel",
        "status": "failed",
        "runs": [
            _run("a"),
            _run("b"),
            _run("reviewer", "timeout", error="timed out after 60s"),
            _run("c"),
        ],
    }
    assert (
        sessionlog.summarize(par)
        == "parallel 3/4 completed; failed: [3] reviewer — timed out after 1m00s"
    )
    all_ok = {"mode": "parallel", "status": "completed", "runs": [_run("a"), _run("b"), _run("a")]}
    assert sessionlog.summarize(all_ok) == "parallel 3/3 completed: a, b"
    chain = {
        "mode": "chain",
        "status": "failed",
        "runs": [_run("scout"), _run("worker", "failed", error="boom\ntrace")],
    }
    assert sessionlog.summarize(chain) == "chain 1/2 completed; failed at step 2: worker — boom"
    chain_ok = {
        "mode": "chain",
        "status": "completed",
        "runs": [_run("scout"), _run("w", final="Done.")],
    }
    assert sessionlog.summarize(chain_ok) == 'chain 2/2 completed: w — "Done."'


def test_summarize_is_bounded_and_handles_no_runs() -> None:
    long = {"mode": "single", "status": "completed", "runs": [_run("scout", final="x" * 1000)]}
    text = sessionlog.summarize(long)
    # The answer's first line quoted and cut (issue 39: the quote closes after the cut).
    assert len(text) <= 200 and text.endswith('…"') and text.startswith('completed: scout — "x')
    many = {
        "mode": "parallel",
        "status": "failed",
        "runs": [_run(f"a{i}", "failed", error="e" * 50) for i in range(20)],
    }
    assert len(sessionlog.summarize(many)) <= 200
    assert (
        sessionlog.summarize({"mode": "chain", "status": "failed", "runs": []})
        == "failed: chain job"
    )


def test_entry_for_job() -> None:
    job = {
        "jobId": "j1",
        "mode": "parallel",
        "status": "failed",
        "startedAt": "2026-01-05T10:00:00.000Z",
        "completedAt": "2026-01-05T10:00:03.000Z",
        "durationMs": 3000,
        "usage": USAGE,
        "runs": [{**_run("a"), "model": "m1"}, {**_run("b", "failed", error="x"), "model": "m1"}],
        "finalText": None,
    }
    e = sessionlog.entry_for_job(job, pid=7)
    assert set(e) == DESIGN_KEYS
    assert e["eventType"] == "subagent:error" and e["status"] == "failed"
    assert e["agentName"] == "a, b" and e["model"] == "m1" and e["jobId"] == "j1"
    assert e["summary"] == "parallel 1/2 completed; failed: [2] b — x"


# ---- paths and ids ------------------------------------------------------------------


def test_session_path(tmp_path: Path) -> None:
    assert (
        sessionlog.session_path(tmp_path, "my-session_1.2")
        == tmp_path / "sessions" / "my-session_1.2.jsonl"
    )
    for bad in ["", "../x", "a/b", ".hidden", "a" * 129, "sp ace", "é"]:
        with pytest.raises(UsageError, match="session id"):
            sessionlog.session_path(tmp_path, bad)


def test_default_session_id() -> None:
    assert sessionlog.default_session_id({}) == "default"
    assert sessionlog.default_session_id({"SUBAGENTS_SESSION": ""}) == "default"
    assert sessionlog.default_session_id({"SUBAGENTS_SESSION": "proj-1"}) == "proj-1"
    with pytest.raises(UsageError, match="SUBAGENTS_SESSION"):
        sessionlog.default_session_id({"SUBAGENTS_SESSION": "../etc"})


# ---- history filters ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("30m", 1800), ("1d", 86400), ("45s", 45), ("2w", 1209600), (" 90M ", 5400)],
)
def test_parse_since_durations(text: str, seconds: int) -> None:
    assert history.parse_since(text, now=1_000_000.0) == 1_000_000.0 - seconds


def test_parse_since_iso() -> None:
    assert (
        history.parse_since("2026-01-05T10:00:00Z")
        == datetime(2026, 1, 5, 10, tzinfo=UTC).timestamp()
    )
    assert (
        history.parse_since("2026-01-05T12:00:00+02:00")
        == datetime(2026, 1, 5, 10, tzinfo=UTC).timestamp()
    )
    assert history.parse_since("2026-01-05") == datetime(2026, 1, 5).timestamp()  # local midnight


@pytest.mark.parametrize("bad", ["yesterday", "", "5x", "-2h", "2026-13-01"])
def test_parse_since_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match=r"30m.*ISO"):
        history.parse_since(bad)


def test_select() -> None:
    def at(iso: str, **kw: Any) -> dict[str, Any]:
        e = _entry(**kw)
        e["timestamp"] = iso
        return e

    entries = [
        at("2026-01-05T09:00:00.000Z", event_type="subagent:start", job_id="j1"),
        at("2026-01-05T10:00:00.000Z", status="completed", job_id="j1"),
        at(
            "2026-01-05T11:00:00.000Z",
            event_type="subagent:error",
            status="failed",
            agent_name="worker",
            job_id="j2",
        ),
        at(
            "2026-01-05T12:00:00.000Z",
            event_type="subagent:error",
            status="failed",
            agent_name="scout, reviewer",
            mode="parallel",
            job_id="j3",
        ),
    ]

    def ids(xs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(x["jobId"], x["eventType"]) for x in xs]

    assert ids(list(history.selected(entries, status="failed"))) == [
        ("j2", "subagent:error"),
        ("j3", "subagent:error"),
    ]
    assert len(list(history.selected(entries, status="timeout"))) == 2
    assert ids(list(history.selected(entries, agent="reviewer"))) == [("j3", "subagent:error")]
    assert len(list(history.selected(entries, agent="scout"))) == 3
    since = history.parse_since("2026-01-05T10:30:00Z")
    assert ids(list(history.selected(entries, since=since))) == [
        ("j2", "subagent:error"),
        ("j3", "subagent:error"),
    ]
    assert ids(list(history.selected(entries, event_types=["start"]))) == [("j1", "subagent:start")]
    assert len(list(history.selected(entries, event_types="subagent:complete"))) == 1
    assert len(list(history.selected(entries, job_id="j1"))) == 2
    assert list(history.selected(entries, status="failed", agent="worker", since=since)) == [
        entries[2]
    ]
    with pytest.raises(ValueError, match="event type"):
        list(history.selected(entries, event_types=["finished"]))
