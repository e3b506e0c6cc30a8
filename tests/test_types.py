"""subagents.types says what the records are: what real runs and jobs write has the keys their
TypedDicts declare (every event kind, result.json, the job result, job.json, the session log's
entries), the checks in core.records tell a record from a damaged file, and a caller's type
checker knows which shape ``subagents.run`` gives back (a real mypy run)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from support import pistream as pi
from support.checks import eventually, fits
from support.claude import ASK
from support.fake import Fake

import subagents
from subagents import types
from subagents.config import Settings
from subagents.core import events as ev
from subagents.core.files import read_events
from subagents.core.records import is_event, is_job_state, is_run_result
from subagents.jobs import JobStore, list_jobs
from subagents.jobs.outcome import job_status
from subagents.lifecycle import sessionlog
from subagents.runs import RunRequest, start

EVENT_TYPES = {
    "run_started": types.RunStarted,
    "assistant_text": types.AssistantText,
    "thinking": types.Thinking,
    "tool_call": types.ToolCall,
    "tool_result": types.ToolResult,
    "usage": types.UsageEvent,
    "notice": types.Notice,
    "error": types.ErrorEvent,
    "run_finished": types.RunFinished,
    "user_message": types.UserMessage,
    "limit": types.LimitEvent,
    "approval": types.ApprovalEvent,
}


@pytest.mark.process
def test_every_event_kind_and_result_json_fit_their_types(fake: Fake) -> None:
    thought = pi.assistant(
        [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Done."}], "stop"
    )
    steps = [
        *pi.start(),
        {"emit": "not json"},  # a notice
        *pi.tool_use(),
        *pi.tool_end(),
        {"emit": {"type": "message_end", "message": thought}},
        *pi.end(),
    ]
    completed = fake.run(steps)
    failed = fake.run([*pi.start(), {"exit": 3}])
    # A budget reached (a limit event), and a message sent to a live child (claude's input).
    bounded = fake.run([*pi.start(), *pi.tool_use(), {"sleep": 30}], max_turns=1)
    steered = steered_claude(fake)
    assert steered["messages"] == {"sent": 1, "delivered": 1}
    (approval,) = steered["approvals"]
    fits(approval, types.ApprovalRecord)
    assert approval["choice"] == "deny" and approval["by"] == "policy"
    assert "'behavior': 'deny'" in (fake.dir / "asked").read_text()
    seen = set()
    for result in (completed, failed, bounded, steered):
        fits(result, types.RunResult)
        assert is_run_result(result)
        for event in read_events(Path(result["paths"]["events"])):
            fits(event, EVENT_TYPES[event["type"]])
            seen.add(event["type"])
    assert seen == set(EVENT_TYPES) == set(ev.EVENT_TYPES)  # every kind, once at least
    fits(completed["usage"], types.Usage)
    fits(completed["paths"], types.RunPaths)
    assert failed["status"] == "failed" and failed["diagnostics"]
    fits(ev.stalled(1.0, 2.0), types.Notice)


def steered_claude(fake: Fake) -> types.RunResult:
    """A fake claude run sent a steer while its tool runs; it echoes it, as claude does. It
    asks to run its tool first (--approvals deny: denied at once)."""
    gate = fake.dir / "gate"
    init = {"type": "system", "subtype": "init", "session_id": "s1", "model": "m"}
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {"id": "a1", "model": "m", "content": [call], "usage": usage}
    echo = {"type": "user", "isReplay": True, "message": {"role": "user", "content": "hi"}}
    result = {"type": "result", "subtype": "success", "result": "ok", "usage": usage}
    steps = [
        {"emit": init},
        {"emit": {"type": "assistant", "message": message}},
        {"run": [sys.executable, "-c", ASK, "Bash", json.dumps({"command": "git push"})]},
        {"wait_for": str(gate)},
        {"emit": echo},
        {"emit": result},
    ]
    env = {**os.environ, "SUBAGENTS_CLAUDE_BIN": str(fake.launcher)}
    req = RunRequest(
        task="do it", backend="claude", cwd=str(fake.dir), env=fake.env(steps), approvals="deny"
    )
    handle = start(req, Settings(grace=fake.grace, kill_grace=fake.kill_grace), env=env)
    assert eventually(lambda: '"tool_call"' in events_text(handle.run_dir))
    receipt = subagents.send(handle.run_id, "hi")
    assert receipt["receipt"] == "queued" and receipt["runId"] == handle.run_id
    gate.touch()
    done = handle.wait(timeout=60)
    assert done is not None and done["status"] == "completed"
    assert is_run_result(done)
    return done


def events_text(run_dir: Path) -> str:
    path = run_dir / "events.jsonl"
    return path.read_text() if path.exists() else ""


@pytest.mark.process
def test_a_job_and_its_records_fit_their_types(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, isolated_state: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    job = {"mode": "chain", "steps": [{"task": "a"}, {"task": "then {previous}"}]}
    result = subagents.run(job, env=fake.env(pi.answer("ok")))
    fits(result, types.JobResult)
    for run in result["runs"]:
        fits(run, types.RunResult)
    store = JobStore(isolated_state)
    state = store.load(result["jobId"])
    fits(state, types.JobState)
    fits(state["driver"], types.ProcessIdentity)
    fits(state["plan"], types.JobPlanRecord)
    fits(state["plan"]["placement"], types.PlacementRecord)
    for request in state["plan"]["requests"]:
        fits(request, types.RunRequestRecord)
    for run in result["runs"]:
        record = json.loads((Path(run["paths"]["events"]).parent / "supervisor.json").read_text())
        fits(record, types.LocalSupervisorRecord)
    assert {k: state[k] for k in result} == result  # job.json holds the job result
    [row] = list_jobs(home=isolated_state)
    fits(row, types.JobRow)
    entries = sessionlog.read(isolated_state / "sessions" / "default.jsonl")
    assert [e["eventType"] for e in entries] == ["subagent:start", "subagent:complete"]
    for entry in entries:
        fits(entry, types.AgentEvent)
        fits(entry["usage"] or ev.empty_usage(), types.Usage)


def test_a_record_read_back_is_checked_once(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    job_id = store.create({"mode": "single"}, agents=["pi"], background=False)
    assert is_job_state(store.load(job_id))
    for damaged in ([], {"jobId": job_id}, {"jobId": job_id, "status": "sleeping"}):
        store.path(job_id).write_text(json.dumps(damaged))
        with pytest.raises(ValueError, match=f"{store.path(job_id)} is damaged"):
            store.load(job_id)
    assert not is_run_result({"runId": "r", "status": "done"})
    # A run's status no run can have (a damaged result.json) ends its job failed.
    assert job_status(1, [{"runId": "r", "status": "done"}], cancelled=False) == "failed"
    assert not is_event({"seq": 1, "type": "no_such_kind"}) and is_event(ev.thinking("x"))


CALLER = """
    import subagents
    from subagents.types import Event, JobResult, JobRun, RunResult

    one = subagents.run("task")
    reveal_type(one)
    job = subagents.run({"mode": "parallel", "tasks": [{"task": "a"}]})
    reveal_type(job)
    wrong: JobResult = subagents.run("task")
    if "paths" in one:
        reveal_type(one)

    def tool_name(event: Event) -> str:
        if event["type"] == "tool_call":
            reveal_type(event)
            return event["toolName"]
        return event["toolName"]

    runs: list[JobRun] = job["runs"]
    status: str = job["status"]
    handle = subagents.start("task")
    reveal_type(handle.wait())

    def shown(index: int, event: Event) -> None: ...

    subagents.run("task", on_event=shown)
"""


def mypy_cache() -> Path:
    """mypy's cache for the caller's check, kept across runs (under the temp dir, one per copy
    of the package checked): a cold check reads typeshed and the package again, ~8 CPU-s; with
    the cache only the caller is checked (~0.6). mypy checks each entry against its source and
    writes entries atomically, so a stale one is redone and concurrent runs are safe."""
    package = hashlib.sha256(str(Path(subagents.__file__).parent).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"subagents-tests-{os.getuid()}" / f"mypy-{package}"


@pytest.mark.process
def test_a_callers_type_checker_knows_what_run_returns(tmp_path: Path) -> None:
    source = textwrap.dedent(CALLER).splitlines()
    caller = tmp_path / "caller.py"
    caller.write_text("\n".join(source) + "\n")
    out = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--no-color-output"),
            *("--cache-dir", str(mypy_cache()), caller.name),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    ).stdout
    said: dict[int, list[str]] = {}
    for line in out.splitlines():
        where, _, what = line.partition(": ")
        if where.startswith(caller.name + ":"):
            said.setdefault(int(where.split(":")[1]), []).append(what)

    def at(text: str, nth: int = 0) -> str:
        """What mypy said at the ``nth`` line of the caller that reads ``text``."""
        number = [i for i, line in enumerate(source, 1) if line.strip() == text][nth]
        return " ".join(said.get(number, []))

    one = at("reveal_type(one)")
    assert "subagents.types.RunResult" in one and "subagents.types.RunNotStarted" in one, out
    assert 'Revealed type is "TypedDict(subagents.types.RunResult' in at("reveal_type(one)", 1)
    assert "RunNotStarted" not in at("reveal_type(one)", 1)  # "paths" in it: a RunResult
    assert 'Revealed type is "TypedDict(subagents.types.JobResult' in at("reveal_type(job)")
    assert "error: Incompatible types in assignment" in at(
        'wrong: JobResult = subagents.run("task")'
    )
    narrowed = at("reveal_type(event)")
    assert "subagents.types.ToolCall" in narrowed and "RunStarted" not in narrowed
    # Not narrowed, an event of another kind has no toolName: an error there.
    assert 'TypedDict "RunStarted" has no key "toolName"' in at('return event["toolName"]', 1)
    assert at('return event["toolName"]') == ""
    assert "subagents.types.JobState" in at("reveal_type(handle.wait())")
    # Nothing else was wrong: the runs and the status are what a caller expects them to be.
    errors = {n for n, what in said.items() if any(w.startswith("error:") for w in what)}
    assert len(errors) == 2, out


def test_a_request_record_holds_every_field_of_a_request() -> None:
    """The record's keys are RunRequest's fields: a field added to the dataclass and not to
    the record (or the other way round) would be kept in job.json untyped."""
    from dataclasses import fields

    from subagents.runs import RunRequest

    # Its options are optional keys (absent from records written before each was one).
    record = types.RunRequestRecord
    keys = set(record.__required_keys__) | set(record.__optional_keys__) - {"runner"}
    assert keys == {f.name for f in fields(RunRequest)}
    full = RunRequest(task="t", backend="pi", env={"A": "1"}, isolate="worktree", tool_timeout=2.0)
    assert RunRequest.from_record(full.to_record()) == full


def test_a_command_record_holds_every_field_of_a_command_request_but_its_task() -> None:
    """meta.json's ``command`` is how the supervisor builds a continuation's argv again: a
    field of CommandRequest the record lacks would be lost there."""
    from subagents.backends import CommandRequest

    request = CommandRequest(task="t", cwd="/w", model="m", live=True, own_max_turns=3)
    record = request.record()
    fits(record, types.CommandRecord)
    assert set(record) == set(vars(request)) - {"task"}
    assert vars(CommandRequest(task="t", **record)) == vars(request)


def test_another_programs_json_is_narrowed_where_it_is_read(tmp_path: Path) -> None:
    from subagents.backends import get_backend
    from subagents.launchers import SUPERVISOR_FILE, reattach
    from subagents.runs import RunMonitor

    # A CLI's usage of the wrong types counts nothing: the answer is not lost to a crash.
    norm = get_backend("claude").normalizer()
    events = norm.feed(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "the answer",
            "usage": {"input_tokens": "12", "output_tokens": [3], "cache_read_input_tokens": 2},
            "total_cost_usd": "0.5",
        }
    )
    assert norm.final_text == "the answer" and norm.terminal and not norm.failed
    assert norm.usage == {**ev.empty_usage(), "cacheRead": 2, "totalTokens": 2}
    assert [e["type"] for e in events] == ["usage"]
    # A follower is handed the run's events, and nothing else its events file holds.
    (tmp_path / "events.jsonl").write_text(
        "\n".join(
            json.dumps(x)
            for x in (
                {"seq": 1, **ev.thinking("a")},
                [1, 2],
                {"type": "nope"},
                "x",
                ev.usage(ev.empty_usage()),
            )
        )
        + "\n"
    )
    assert [e["type"] for e in RunMonitor(tmp_path).new_events()] == ["thinking", "usage"]
    # A supervisor.json whose values are not a process's names no supervisor.
    for damaged in (
        {"runner": "process", "pid": "12", "createTime": 1.0},
        {"runner": "process", "pid": 12, "createTime": "then"},
        {"runner": "ray", "ray": 7},
    ):
        (tmp_path / SUPERVISOR_FILE).write_text(json.dumps(damaged))
        assert reattach(tmp_path, follow=False) is None
