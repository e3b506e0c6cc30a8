"""The pi package (integrations/pi) end to end: the real pi (1.6, as pinned) as the parent,
loading the package with ``-e``, scripted by the mock model to call the ``subagent`` tool;
the tool runs the real ``subagents`` CLI, whose children are real pi runs against the same
mock (or a second, broken or slow, mock as their own provider) in the tool's calls and the
steering tests. Where the subject is what the parent does with a job (the fleet and its
totals, a background end, a refusal, the stall watchdog, pi's abort, SIGINT, a resumed
session, `pi install`), the children are a stand-in playing pi's stream (``Parent.stand_in``).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import pistream
from support.checks import eventually
from support.gate import gate
from support.git import git, git_repo
from support.pi_parent import (
    BROKEN,
    COLUMNS,
    EXTENSION,
    SUBAGENTS,
    Parent,
    delegating,
    mixed_tasks,
    needs_pi_parent,
)

from subagents.demo.mockmodel import MockModelServer, Script, pi_argv

CHILD_ANSWER = "Hello from the mock model."
# A child that runs until stopped: where what is tested is what the parent does about a
# running job, a stand-in (Parent.stand_in), not a real pi, plays it.
WAITS = pistream.replies("never", ["sleep", "120"])
pytestmark = [pytest.mark.e2e, needs_pi_parent]


def tool_end(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "tool_execution_end")


def show(job_id: str) -> str:
    shown = subprocess.run(
        [str(SUBAGENTS), "show", job_id, "--json"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


START_FIELDS = {"eventType", "jobId", "requestedBy", "agentName", "mode", "pid", "startedAt"}
END_FIELDS = START_FIELDS | {
    "completedAt",
    "durationMs",
    "model",
    "usage",
    "status",
    "summary",
    "runDir",
}
PI_USAGE = {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}


def check_delegates_with_live_progress_result_and_lifecycle_entries(call: Call) -> None:
    events = call.events
    # Live progress: the engine's humanized lines, the same words as the run's transcript.
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    texts = [u["partialResult"]["content"][0]["text"] for u in updates]
    assert texts[0] == "Started pi (mock/mock-model)"
    assert CHILD_ANSWER in texts
    assert texts[-1].startswith("Finished: completed")
    details = updates[-1]["partialResult"]["details"]
    run_id = details["runIds"][0]
    assert details["jobId"] and details["runs"][0]["usage"]["totalTokens"] == 15
    transcript = (
        Path(os.environ["SUBAGENTS_HOME"]) / "runs" / run_id / "transcript.md"
    ).read_text()
    assert all(t in transcript for t in texts)

    # The result: the child's answer, its usage in pi's shape; the parent's next turn saw it.
    end = tool_end(events)
    assert end["isError"] is False
    assert end["result"]["content"][0]["text"] == CHILD_ANSWER
    assert set(end["result"]["details"]["usage"]) == PI_USAGE
    assert end["result"]["details"]["usage"]["totalTokens"] == 15
    finals = [
        e["message"]
        for e in events
        if e["type"] == "message_end" and e["message"].get("role") == "assistant"
    ]
    assert CHILD_ANSWER in finals[-1]["content"][0]["text"]

    # What a row draws: the task, where it runs, since when (the engine's clock), its counts.
    (run,) = details["runs"]
    assert run["task"] == "say hello" and run["backend"] == "pi"
    assert run["model"] == "mock/mock-model" and run["status"] == "completed"
    assert run["transcript"].endswith(f"{run_id}/transcript.md") and run["lines"][-1] == texts[-1]
    events_file = Path(run["transcript"]).with_name("events.jsonl")
    assert run["startedAt"] == json.loads(events_file.read_text().splitlines()[0])["ts"] * 1000
    # The result's details: the run's answer and its end.
    (ran,) = end["result"]["details"]["runs"]
    assert ran["text"] == CHILD_ANSWER and ran["durationMs"] > 0 and ran["error"] is None

    # Lifecycle entries in pi's own session file, written by pi's writer.
    start, done = call.entries
    assert set(start) >= START_FIELDS and start["eventType"] == "subagent:start"
    assert set(done) >= END_FIELDS and done["eventType"] == "subagent:complete"
    assert start["jobId"] == done["jobId"] == details["jobId"]
    assert done["status"] == "completed" and done["mode"] == "single"
    # One clock: both entries carry the job's start as the engine recorded it.
    job = json.loads(show(done["jobId"]))
    assert start["startedAt"] == done["startedAt"] == job["startedAt"]
    # The model with its provider, as asked; every run's model.
    assert start["model"] == done["model"] == "mock/mock-model"
    assert done["models"] == ["mock/mock-model"] and done["usage"]["totalTokens"] == 15
    assert done["summary"] == CHILD_ANSWER
    assert Path(done["runDir"], "result.json").exists()


def check_a_childs_warning_about_its_model_reaches_its_row(call: Call) -> None:
    # pi says an unknown model only on stderr, then runs on with it: the row says so.
    end = tool_end(call.events)
    assert end["isError"] is False
    (run,) = end["result"]["details"]["runs"]
    assert (
        run["warning"] == 'Model "mock-modle" not found for provider "mock". Using custom model id.'
    )


# A child that says nothing for 8 s, then answers; the watchdog: 1 s without an event.
SILENT = [*pistream.start(), ["sleep", "8"], pistream.text_end("Thought."), *pistream.end()]
SILENT_CALL = {"task": "think hard", "model": "silent/mock-model", "stallTimeout": 1}


def check_a_silent_child_is_marked_stalled_in_its_row(call: Call) -> None:
    events = call.events
    runs = [
        e["partialResult"]["details"]["runs"][0]
        for e in events
        if e["type"] == "tool_execution_update"
    ]
    stalled = [r for r in runs if r["stalled"]]
    assert stalled and stalled[0]["activity"].startswith("stalled for ")
    assert not runs[-1]["stalled"]  # it answered: moving again
    end = tool_end(events)  # a stall is only said (on_stall: notice)
    assert end["isError"] is False and end["result"]["content"][0]["text"] == "Thought."


def check_failing_child_makes_the_call_an_error_with_the_diagnostics(call: Call) -> None:
    end = tool_end(call.events)
    assert end["isError"] is True
    text = end["result"]["content"][0]["text"]
    assert "## Error" in text and "500 mock server error" in text
    # The call threw, and still its row (and its end) are on the result, to be drawn.
    (run,) = end["result"]["details"]["runs"]
    assert run["status"] == "failed" and "500 mock server error" in run["error"]
    entries = call.entries
    assert [e["eventType"] for e in entries] == ["subagent:start", "subagent:error"]
    assert entries[1]["status"] == "failed" and "500 mock server error" in entries[1]["summary"]
    assert entries[1]["model"] == "broken/mock-model"


def check_a_failed_sibling_hides_nothing_and_the_call_is_no_error(call: Call) -> None:
    end = tool_end(call.events)
    assert end["isError"] is False
    text = end["result"]["content"][0]["text"]
    # Every run's answer or diagnostics, and which task failed.
    assert text.startswith('1 of 2 tasks did not complete: "summarize the changelog" (failed).')
    assert "# 1. say hello (scout): completed" in text and CHILD_ANSWER in text
    assert "# 2. summarize the changelog (failer): failed" in text
    assert "500 mock server error" in text
    details = end["result"]["details"]
    assert [r["status"] for r in details["runs"]] == ["completed", "failed"]
    assert [r["agent"] for r in details["runs"]] == ["scout", "failer"]
    # Every run's usage counts: in the details and on the result pi sums.
    assert details["usage"]["totalTokens"] == 15 == end["result"]["usage"]["totalTokens"]
    start, done = call.entries
    assert done["eventType"] == "subagent:error" and done["status"] == "failed"
    assert start["agentName"] == done["agentName"] == "scout, failer"
    assert done["models"] == ["child/mock-model", "broken/mock-model"]
    assert done["model"] == "child/mock-model, broken/mock-model"
    assert done["summary"].startswith('parallel 1/2 completed; "summarize the changelog" failed')


MEMBERS = ["pi:child/mock-model", "pi:child/mock-model"]
BACKGROUND_COUNCIL = {"task": "say hello", "council": MEMBERS, "background": True}


def check_a_background_council_is_a_council_from_its_start(
    call: Call, waited: subprocess.CompletedProcess[str]
) -> None:
    """Before the engine says a job's mode (a background call's answer and start entry),
    the tool says it from its arguments: a council, not single. ``waited``: `subagents
    wait` on its job, while pi still ran."""
    end = tool_end(call.events)
    assert end["isError"] is False
    details = end["result"]["details"]
    assert details["mode"] == "council"
    assert waited.returncode == 0, waited.stderr
    # The feed ends with the table, then the answer the tool (and the end's message) shows,
    # which holds it.
    table, last = (json.loads(x) for x in waited.stderr.splitlines()[-2:])
    assert table["type"] == "council" and table["jobId"] == details["jobId"]
    assert "2 answered (quorum 1)" in table["table"] and len(council_rows(table["table"])) == 2
    assert last["type"] == "answer" and last["jobId"] == details["jobId"]
    assert table["table"] in last["text"] and last["isError"] is False
    job = json.loads(waited.stdout)
    assert job["mode"] == "council" and job["council"]["answered"] == 2
    # The end entry too, if the job ended while pi still ran (its watcher wrote it).
    entries = call.entries
    assert entries[0]["eventType"] == "subagent:start"
    assert [e["mode"] for e in entries] == ["council"] * len(entries)
    # The members' model as the engine planned them, from the start (not as the call gave them).
    assert entries[0]["model"] == "child/mock-model"


def wait_for(call: Call) -> subprocess.CompletedProcess[str]:
    """`subagents wait` on the call's job, with its progress feed."""
    job_id = tool_end(call.events)["result"]["details"]["jobId"]
    return subprocess.run(
        [str(SUBAGENTS), "wait", "--json", "--progress", "jsonl", "--timeout", "60", job_id],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def council_rows(text: str) -> dict[str, str]:
    """The table's member rows (present/council.py) by their label."""
    return {line.split()[0]: line for line in text.splitlines() if line[:2] in ("A ", "B ")}


VERDICT = {"best": "B", "agreement": "full", "reasons": ["both greet"], "merged": "Hello, merged."}


def check_a_council_answers_with_the_judges_merged_answer_and_the_table(call: Call) -> None:
    end = tool_end(call.events)
    assert end["isError"] is False
    text = end["result"]["content"][0]["text"]
    assert text.startswith("Hello, merged.\n\n")  # the judge's merged answer leads
    rows = council_rows(text)
    assert set(rows) == {"A", "B"}
    assert all("completed" in r and CHILD_ANSWER in r for r in rows.values())
    assert "2 answered (quorum 1)" in text
    assert "verdict: best B, agreement full" in text and "  - both greet" in text
    details = end["result"]["details"]
    assert details["mode"] == "council" and details["status"] == "completed"
    assert [r["status"] for r in details["runs"]] == ["completed"] * 3  # the judge's run too


def check_a_council_whose_judge_failed_gives_its_members_answers_without_a_verdict(
    call: Call,
) -> None:
    end = tool_end(call.events)
    # The members answered: not an error; the verdict is said to be missing.
    assert end["isError"] is False
    text = end["result"]["content"][0]["text"]
    sections = text.split("\n\n")
    assert sections[0] == "No verdict: the judge gave no verdict: 500 mock server error"
    assert sections[1].startswith("# A. pi (") and sections[2] == CHILD_ANSWER, text
    rows = council_rows(text)
    assert set(rows) == {"A", "B"} and all(CHILD_ANSWER in r for r in rows.values())
    assert "2 answered (quorum 1)" in text and "\nverdict: " not in text
    assert text.endswith("\njudge: no verdict: 500 mock server error")
    _, done = call.entries
    assert done["eventType"] == "subagent:complete" and done["mode"] == "council"


def check_a_call_every_run_of_which_failed_is_an_error_keeping_its_rows(call: Call) -> None:
    end = tool_end(call.events)
    assert end["isError"] is True
    assert '2 of 2 tasks did not complete: "one" (failed), "two" (failed).' in str(
        end["result"]["content"][0]["text"]
    )
    assert [r["status"] for r in end["result"]["details"]["runs"]] == ["failed", "failed"]


def check_the_tool_offers_every_option_on_the_call_and_on_each_step(call: Call) -> None:
    """The tool's parameters are the engine's options (options.ts, generated): a step's own,
    the call's for every step without its own, and the job's, all reach the job's record."""
    end = tool_end(call.events)
    assert end["isError"] is False, end["result"]
    # A chain's rows say where each step stands.
    first_run, second_run = end["result"]["details"]["runs"]
    assert [first_run["role"], second_run["role"]] == ["step 1/2", "step 2/2"]
    # The second step's row names its task with the first's answer in it, not `{previous}`.
    assert second_run["task"] == f"then {first_run['text'].strip().splitlines()[0]}"
    plan = json.loads(show(end["result"]["details"]["jobId"]))["plan"]
    first, second = plan["requests"]
    assert (first["stall_timeout"], first["max_turns"], second["max_turns"]) == (120, 5, None)
    for request in (first, second):
        assert (request["timeout"], request["on_stall"], request["tool_timeout"]) == (
            300,
            "abort",
            60,
        )
    assert plan["budget"] == {"max_turns": 20}


WRAP_UP = "stop here and give your final answer now"


def check_budgets_from_the_tool_wrap_a_looping_child_up(call: Call) -> None:
    """maxTurns reaches the engine: the looping child is asked to wrap up at its limit and
    answers; the call is no error and the run's record names the limit."""
    end = tool_end(call.events)
    assert end["isError"] is False, end["result"]
    (run,) = end["result"]["details"]["runs"]
    assert run["status"] == "completed" and run["text"] == f'You said: "{WRAP_UP}"'
    (record,) = json.loads(show(end["result"]["details"]["jobId"]))["runs"]
    assert record["limit"]["kind"] == "turns" and record["limit"]["limit"] == 2
    assert record["limit"]["action"] == "wrap-up"


def isolated_run(repo: Path) -> dict[str, Any]:
    return {
        "task": "make a file",
        "model": "maker/mock-model",
        "isolate": "worktree",
        "cwd": str(repo),
    }


def check_an_isolated_run_works_in_its_own_worktree(call: Call, repo: Path) -> str:
    """The child worked in its own worktree and branch; the user's tree is untouched. Its
    run's id."""
    end = tool_end(call.events)
    assert end["isError"] is False, end["result"]["content"][0]["text"]
    run_id: str = end["result"]["details"]["runIds"][0]
    result = json.loads((runs_dir() / run_id / "result.json").read_text())
    assert result["worktree"]["branch"] == f"subagents/{run_id}"
    assert result["worktree"]["filesChanged"] == 1
    assert not (repo / "made.txt").exists() and git(repo, "status", "--porcelain") == ""
    assert "made.txt" in git(repo, "show", "--stat", result["worktree"]["branch"])
    return run_id


def check_a_continued_run_goes_on_in_its_branch(
    call: Call, run_id: str, maker: MockModelServer
) -> None:
    """The continued child saw its earlier conversation, then the follow-up, and went on in
    the earlier run's branch."""
    end = tool_end(call.events)
    assert end["isError"] is False, end["result"]["content"][0]["text"]
    again = end["result"]["details"]["runIds"][0]
    last = json.dumps(maker.requests[-1]["messages"])
    assert "make a file" in last and "and one more thing" in last and "made.txt" in last
    second = json.loads((runs_dir() / again / "result.json").read_text())
    assert second["continuedFrom"] == run_id
    assert second["worktree"]["branch"] == f"subagents/{run_id}"  # on in its own branch


def runs_dir() -> Path:
    return Path(os.environ["SUBAGENTS_HOME"]) / "runs"


EVERY_OPTION_STEP = {
    "task": "first",
    "model": "tooler/mock-model",
    "stallTimeout": 120,
    "maxTurns": 5,
}
EVERY_OPTION = {
    "chain": [EVERY_OPTION_STEP, {"task": "then {previous}", "model": "tooler/mock-model"}],
    "timeout": 300,
    "onStall": "abort",
    "toolTimeout": 60,
    "jobMaxTurns": 20,
}


def test_the_tools_calls_in_one_session(tmp_path: Path) -> None:
    """Calls of the tool, one after another in one pi (RPC) session (a pi start costs
    ~1 CPU-s): each call's result, rows and lifecycle entries, checked apart; the
    foreground ones, then a background council. Children
    on ``mock/`` answer from the parent's own mock; ``child/`` answer plainly, ``tooler/``
    run a tool first, ``judge/`` give a verdict, ``broken/`` fail every request,
    ``looper/`` call a tool a turn until told otherwise, ``maker/`` make a file (an isolated
    run, continued by the next call)."""
    children = {
        "child": Script(use_tool=False),
        "tooler": Script(),
        "looper": Script(loop=True, command="sleep 0.2"),
        "maker": Script(command="echo new > made.txt", final_text="made it"),
        "judge": Script(use_tool=False, final_text=json.dumps(VERDICT)),
        "broken": BROKEN,
    }
    calls: list[tuple[dict[str, Any], Callable[[Call], None]]] = [
        (
            {"task": "say hello", "model": "mock/mock-model"},
            check_delegates_with_live_progress_result_and_lifecycle_entries,
        ),
        (
            {"task": "say hello", "model": "mock/mock-modle"},
            check_a_childs_warning_about_its_model_reaches_its_row,
        ),
        (
            {"task": "say hello", "model": "broken/mock-model"},
            check_failing_child_makes_the_call_an_error_with_the_diagnostics,
        ),
        (
            mixed_tasks("say hello", "summarize the changelog"),
            check_a_failed_sibling_hides_nothing_and_the_call_is_no_error,
        ),
        (
            {"task": "say hello", "council": MEMBERS, "judge": "pi:judge/mock-model"},
            check_a_council_answers_with_the_judges_merged_answer_and_the_table,
        ),
        (
            {"task": "say hello", "council": MEMBERS, "judge": "pi:broken/mock-model"},
            check_a_council_whose_judge_failed_gives_its_members_answers_without_a_verdict,
        ),
        (
            {"tasks": [{"task": "one"}, {"task": "two"}], "model": "broken/mock-model"},
            check_a_call_every_run_of_which_failed_is_an_error_keeping_its_rows,
        ),
        (EVERY_OPTION, check_the_tool_offers_every_option_on_the_call_and_on_each_step),
        (
            {"task": "loop until told otherwise", "model": "looper/mock-model", "maxTurns": 2},
            check_budgets_from_the_tool_wrap_a_looping_child_up,
        ),
    ]
    repo = git_repo(tmp_path / "repo", {"app.py": "print('hi')\n"})
    with delegating(tmp_path, {}, **children) as (parent, server):
        session = Session(parent, server)
        try:
            made = [session.call(args) for args, _ in calls]
            # An isolated run, then its continuation through the tool.
            isolated = session.call(isolated_run(repo))
            run_id = check_an_isolated_run_works_in_its_own_worktree(isolated, repo)
            more = session.call({"continue": run_id, "task": "and one more thing"})
            # Last: a background call, its job waited for while pi runs.
            council = session.call(BACKGROUND_COUNCIL)
            waited = wait_for(council)
        finally:
            session.close()
        check_a_continued_run_goes_on_in_its_branch(more, run_id, parent.children["maker"])
    session.add_entries([*made, isolated, more, council])
    for call, (_, check) in zip(made, calls, strict=True):
        check(call)
    check_a_background_council_is_a_council_from_its_start(council, waited)


REFUSED = [
    # The reason is the CLI's; a call refused before any job exists is entered as an error.
    ({"task": "say hello", "backend": "nope"}, "", "nope"),
    ({"task": "say hello", "council": ["pi", "nope:m"]}, "", "nope"),
    # An option is named as the tool call wrote it, not as the command line's --acp-command.
    ({"task": "say hello", "acpCommand": "x"}, "acpCommand: only for ACP agents", ""),
    (
        {"chain": [{"task": "a"}, {"task": "b", "acpCommand": "x"}]},
        "chain.1.acpCommand: only for ACP agents",
        "",
    ),
    (
        {"continue": "0abc", "task": "more", "model": "mock/mock-model"},
        "",
        "continue takes a task (the follow-up) and background only, not model",
    ),
]


def check_refused_calls_are_errors_naming_the_reason_each_entered_once(
    calls: list[Call], entries: list[dict[str, Any]]
) -> None:
    """Each call of ``REFUSED`` (``entries``: the session's entries of no job)."""
    ends = []
    for call, (_, starts, holds) in zip(calls, REFUSED, strict=True):
        end = tool_end(call.events)
        text = end["result"]["content"][0]["text"]
        assert end["isError"] is True and text.startswith(starts) and holds in text, text
        ends.append(text)
    assert len(entries) == len(REFUSED), entries  # one entry a call
    for entry, reason in zip(entries, ends, strict=True):
        assert entry["eventType"] == "subagent:error" and entry["status"] == "failed"
        assert entry["jobId"] is None and entry["summary"] == f"refused: {reason}"[:300]
    assert [e["mode"] for e in entries[:2]] == ["single", "council"]


def test_background_ends_are_recorded_once_and_told_in_one_notice_when_the_session_resumes(
    tmp_path: Path,
) -> None:
    args = {"task": "take your time", "model": "slow/mock-model", "background": True}
    # The parent calls the tool twice: two background jobs; the children wait until stopped.
    with delegating(tmp_path, args, calls=2) as (parent, _):
        parent.stand_in(slow=WAITS)
        events = parent.run("start them in the background")
        ends = [e for e in events if e["type"] == "tool_execution_end"]
        assert [e["isError"] for e in ends] == [False, False]
        job_ids = [e["result"]["details"]["jobId"] for e in ends]
        for end, job_id in zip(ends, job_ids, strict=True):
            text = end["result"]["content"][0]["text"]
            assert f"Started background subagent job {job_id}" in text
        # pi quit with the jobs running: a word says they go on, and where to find them.
        assert "subagents: 2 background jobs still running: " in parent.stderr
        assert all(f"{j} (take your time)" in parent.stderr for j in job_ids)
        # pi (print mode) has exited; the jobs run on without it. End them while pi is away.
        assert [e["eventType"] for e in parent.agent_events()] == ["subagent:start"] * 2
        for job_id in job_ids:
            stop = subprocess.run(
                [str(SUBAGENTS), "stop", job_id], capture_output=True, text=True, timeout=60
            )
            assert stop.returncode == 0, stop.stderr
        session = str(parent.session_file())
        parent.run("anything new?", "--session", session)
        parent.run("and now?", "--session", session)
    entries = parent.agent_events()
    assert [e["eventType"] for e in entries] == ["subagent:start"] * 2 + ["subagent:aborted"] * 2
    assert {e["jobId"] for e in entries[2:]} == set(job_ids)
    assert all(e["status"] == "aborted" for e in entries[2:])
    lines = [json.loads(x) for x in parent.session_file().read_text().splitlines()]
    (notice,) = [e for e in lines if e["type"] == "custom_message"]  # both ends, one notice
    assert all(j in str(notice["content"]) for j in job_ids)
    assert [j["jobId"] for j in notice["details"]["jobs"]] == job_ids
    assert {j["status"] for j in notice["details"]["jobs"]} == {"aborted"}


class Rpc:
    """pi in RPC mode (long-lived, like the TUI): JSON commands in, events out."""

    def __init__(self, parent: Parent) -> None:
        argv = [*pi_argv("x")[:-1], "-e", str(EXTENSION), "--session-dir", str(parent.sessions)]
        argv[argv.index("json")] = "rpc"
        argv.remove("-p")
        argv.remove("--no-session")
        self.proc = parent.spawn(argv, subprocess.PIPE)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def wait_for(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = 120
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, (
                f"no such event within {timeout}s; seen: {[e['type'] for e in self.seen]}"
            )
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(event)
            if pred(event):
                return event

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.terminate()
        self.proc.wait(30)


@dataclass
class Call:
    """One prompt's tool call in a shared session: its events (to its ``agent_end``) and the
    lifecycle entries of its job."""

    events: list[dict[str, Any]]
    entries: list[dict[str, Any]]


class Session:
    """A pi (RPC) session whose model makes one ``subagent`` call a prompt (its script
    calls the tool while the conversation holds fewer results than the calls so far),
    then answers quoting the result."""

    def __init__(self, parent: Parent, server: MockModelServer) -> None:
        self.parent, self.server = parent, server
        self.rpc = Rpc(parent)
        self.calls = 0

    def call(self, args: dict[str, Any]) -> Call:
        before = len(self.rpc.seen)
        self.prompt(args)
        self.rpc.wait_for(lambda e: e["type"] == "agent_end")
        return Call(self.rpc.seen[before:], [])

    def prompt(self, args: dict[str, Any]) -> None:
        """The prompt whose turn makes the call, not waited for."""
        self.calls += 1
        self.server.script = Script(
            tool_name="subagent",
            tool_args=args,
            loop=True,
            loop_limit=self.calls,
            heed_messages=False,
        )
        self.rpc.send({"id": str(self.calls), "type": "prompt", "message": "delegate it"})

    def close(self) -> None:
        self.rpc.close()

    def add_entries(self, calls: list[Call]) -> None:
        """Once pi is gone: each call's entries, by its job; the session holds those of
        the calls' jobs in the calls' order, and nothing else."""
        entries = self.parent.agent_events()
        for call in calls:
            job_id = tool_end(call.events)["result"]["details"]["jobId"]
            assert job_id, call.events
            call.entries = [e for e in entries if e["jobId"] == job_id]
        assert entries == [e for call in calls for e in call.entries], entries


def test_the_fleet_a_background_end_refused_calls_and_an_abort_in_one_session(
    tmp_path: Path,
) -> None:
    """One pi (RPC) session whose children are the stand-in (what is tested is what the
    parent makes of their jobs): a foreground job, then `/subagents` and `/subagents cost`;
    a background job, whose end is a follow-up that starts a turn; calls refused before any
    job exists; a child silent long enough to be stalled; a foreground job stopped by pi's
    abort. Each child answers in one model turn of 10 in + 5 out tokens."""
    with delegating(tmp_path, {}) as (parent, server):
        # ``later/``: answers once the test lets it (its job ends after the call's turn).
        waited = [["flock", "-s", "gate", "true"], pistream.text_end(CHILD_ANSWER)]
        later = [*pistream.start(), *waited, *pistream.end()]
        parent.stand_in(mock=pistream.replies(CHILD_ANSWER), later=later, slow=WAITS, silent=SILENT)
        session = Session(parent, server)
        rpc = session.rpc
        try:
            fleet, shown, listed = the_fleet_and_the_totals(session)
            before = len(rpc.seen)
            with gate(parent.work):
                session.call({"task": "say hello", "model": "later/mock-model", "background": True})
            rpc.wait_for(lambda e: e["type"] == "agent_start")  # the notice starts a turn
            notice = rpc.wait_for(
                lambda e: (
                    e["type"] == "message_end"
                    and e["message"].get("customType") == "subagent_result"
                )
            )
            rpc.wait_for(lambda e: e["type"] == "agent_end")
            background = rpc.seen[before:]
            refused = [session.call(args) for args, _, _ in REFUSED]
            silent = session.call(SILENT_CALL)
            session.prompt({"task": "take your time", "model": "slow/mock-model"})
            update = rpc.wait_for(lambda e: e["type"] == "tool_execution_update")
            aborted = update["partialResult"]["details"]["jobId"]
            rpc.send({"id": "abort", "type": "abort"})
            end = rpc.wait_for(lambda e: e["type"] == "tool_execution_end")
            rpc.wait_for(lambda e: e["type"] == "agent_end")
        finally:
            session.close()
    entries = parent.agent_events()

    def events_of(job_id: str) -> list[str]:
        return [e["eventType"] for e in entries if e["jobId"] == job_id]

    check_the_fleet_and_the_totals(fleet, shown, listed)
    check_a_background_end_is_a_follow_up_that_starts_a_turn(notice, background)
    (job_id,) = [j["jobId"] for j in notice["message"]["details"]["jobs"]]
    assert events_of(job_id) == ["subagent:start", "subagent:complete"]
    # pi's abort stops the job; the call ends aborted.
    assert end["isError"] is True and "aborted" in end["result"]["content"][0]["text"]
    job = json.loads(show(aborted))
    assert job["status"] == "aborted" and job["runs"][0]["status"] == "aborted"
    assert events_of(aborted) == ["subagent:start", "subagent:aborted"]
    assert events_of(listed) == ["subagent:start", "subagent:complete"]
    check_refused_calls_are_errors_naming_the_reason_each_entered_once(
        refused, [e for e in entries if e["jobId"] is None]
    )
    check_a_silent_child_is_marked_stalled_in_its_row(silent)
    silent_job = tool_end(silent.events)["result"]["details"]["jobId"]
    assert events_of(silent_job) == ["subagent:start", "subagent:complete"]
    assert len(entries) == 8 + len(REFUSED), entries  # the jobs' and the refusals', no other


def the_fleet_and_the_totals(session: Session) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A parallel job of two, then `/subagents` (closed at once) and `/subagents cost`: the
    fleet's select, the cost notice, and the job's id."""
    rpc = session.rpc
    call = session.call({"tasks": [{"task": "one"}, {"task": "two"}], "model": "mock/mock-model"})
    rpc.send({"id": "fleet", "type": "prompt", "message": "/subagents"})
    fleet = rpc.wait_for(
        lambda e: e["type"] == "extension_ui_request" and e.get("method") == "select"
    )
    rpc.send({"type": "extension_ui_response", "id": fleet["id"], "cancelled": True})
    rpc.send({"id": "cost", "type": "prompt", "message": "/subagents cost"})
    shown = rpc.wait_for(
        lambda e: e["type"] == "extension_ui_request" and e.get("method") == "notify"
    )
    return fleet, shown, tool_end(call.events)["result"]["details"]["jobId"]


def check_the_fleet_and_the_totals(
    fleet: dict[str, Any], shown: dict[str, Any], job_id: str
) -> None:
    # The fleet: labelled columns, a row per job of this session.
    title, (row,) = fleet["title"].splitlines(), fleet["options"]
    assert title[0] == "Subagent jobs of this session"
    assert title[1].split() == [*COLUMNS]
    assert row.startswith(job_id[:10]) and "parallel \u00d72: one · two" in row
    assert row.split()[-5:-2] == ["pi", "completed", row.split()[-3]] and row.split()[-2] == "30"
    lines = shown["message"].splitlines()
    assert lines[0] == "pi: 2 runs, 30 tokens (20 in, 10 out), $0"
    # The engine's words for the engine's numbers: the same line `subagents cost` gives.
    assert lines[-1] == "session total: 1 job: 30 tokens (20 in, 10 out, cache 0/0), $0"


def check_a_background_end_is_a_follow_up_that_starts_a_turn(
    notice: dict[str, Any], seen: list[dict[str, Any]]
) -> None:
    message = notice["message"]
    assert message["customType"] == "subagent_result"
    assert "(completed)" in message["content"] and CHILD_ANSWER in message["content"]
    (job,) = message["details"]["jobs"]  # what the notice draws
    assert job["status"] == "completed" and job["runs"][0]["text"] == CHILD_ANSWER
    assert job["runs"][0]["task"] == "say hello" and job["usage"]["totalTokens"] == 15
    # While it ran: a widget of this session's background jobs and a count; both gone after.
    ui = [e for e in seen if e["type"] == "extension_ui_request"]
    widgets = [e.get("widgetLines") for e in ui if e.get("widgetKey") == "subagents"]
    drawn = [lines for lines in widgets if lines]
    assert drawn and drawn[0][0].strip() == "subagents · 1 background job running"
    assert any("say hello" in line and line.endswith(" tok") for line in drawn[-1])
    assert widgets[-1] is None
    # The footer: how many run, then what the session's background runs used.
    counts = [e.get("statusText") for e in ui if e.get("statusKey") == "subagents"]
    assert "1 subagent job running" in counts and counts[-1] == "bg 15 tok"


def test_sigint_to_a_print_mode_parent_stops_its_foreground_job(tmp_path: Path) -> None:
    # pi -p dies on SIGINT without telling its extensions: the CLI's --parent-pid stops the job.
    args = {"task": "take your time", "model": "slow/mock-model"}
    with delegating(tmp_path, args) as (parent, _):
        parent.stand_in(slow=WAITS)
        argv = pi_argv("delegate it")
        argv[-1:-1] = ["-e", str(EXTENSION)]
        proc = parent.spawn(argv, subprocess.DEVNULL)
        assert proc.stdout is not None
        job_id = None
        for line in proc.stdout:
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("type") == "tool_execution_update":
                job_id = event["partialResult"]["details"]["jobId"]
                break
        assert job_id, "no progress update came"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        waited = subprocess.run(
            [str(SUBAGENTS), "wait", job_id, "--json", "--timeout", "60"],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert json.loads(waited.stdout)["status"] == "aborted"


def test_pi_install_makes_the_tool_available(tmp_path: Path) -> None:
    args = {"task": "say hello", "model": "mock/mock-model"}
    with delegating(tmp_path, args) as (parent, _):
        parent.stand_in(mock=pistream.replies(CHILD_ANSWER))  # the child is not the subject here
        p = subprocess.run(
            ["pi", "install", str(EXTENSION.parent)],
            env=parent.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert p.returncode == 0, p.stderr
        events = parent.run("delegate it", load=False)
    end = tool_end(events)
    assert end["isError"] is False and end["result"]["content"][0]["text"] == CHILD_ANSWER


# ---- live control: subagent_send (issue 22, issue 23 item 6) ----------------------------

STEER = "stop looping and say banana"


LOOPING = Script(loop=True, command="sleep 1")


def start_looping(rpc: Rpc, parent: Parent, provider: str, calls: int) -> str:
    """The parent's model starts in the background a child (on ``provider``) that loops (a
    tool call a turn) until a message comes: its job's id, once the child has looped once.
    ``calls``: the parent's tool calls so far, this one included."""
    args = {
        "task": "loop until told otherwise",
        "model": f"{provider}/mock-model",
        "background": True,
    }
    parent.model.script = Script(
        tool_name="subagent",
        tool_args=args,
        loop=True,
        loop_limit=calls,
        heed_messages=False,
        final_text="started",
    )
    rpc.send({"id": f"start {provider}", "type": "prompt", "message": "start it in the background"})
    started = rpc.wait_for(lambda e: e["type"] == "tool_execution_end")
    job_id: str = started["result"]["details"]["jobId"]
    assert f"subagent_send with id {job_id}" in started["result"]["content"][0]["text"]
    rpc.wait_for(lambda e: e["type"] == "agent_end")
    child = parent.children[provider]
    # a tool call answered: it is looping
    assert eventually(lambda: len(child.requests) >= 2, 60), "the child made no second request"
    return job_id


def end_notice(rpc: Rpc) -> dict[str, Any]:
    """A background job's end notice, and the end of the turn it starts."""
    notice = rpc.wait_for(
        lambda e: e["type"] == "message_end" and e["message"].get("customType") == "subagent_result"
    )
    rpc.wait_for(lambda e: e["type"] == "agent_end")
    return notice


def assert_steered(child: MockModelServer, job_id: str, notice: dict[str, Any]) -> None:
    """Every child request before the steer lacks it; the first that carries it is the
    last, answered; the end notice and the run's record say so."""
    carrying = [STEER in json.dumps(r) for r in child.requests]
    assert carrying.count(True) == 1 and carrying[-1], carrying
    (job,) = notice["message"]["details"]["jobs"]
    assert job["jobId"] == job_id
    assert job["status"] == "completed" and job["runs"][0]["text"] == f'You said: "{STEER}"'
    record = json.loads(show(job_id))["runs"][0]
    assert record["messages"] == {"sent": 1, "delivered": 1}


def test_a_background_job_is_steered_from_subagents_and_by_the_parent_model(
    tmp_path: Path,
) -> None:
    """One pi (RPC) session, two background jobs whose children loop until a message comes.
    The first is steered from `/subagents`: the running job, "Send a message", the text,
    how; the receipt as a notice, no model turn; the child takes it. The second by the
    parent's model, its next turn, calling subagent_send with the job id: the receipt is
    its tool result and the child's next model request carries the text."""
    with delegating(tmp_path, {}, first=LOOPING, second=LOOPING) as (parent, _):
        rpc = Rpc(parent)
        try:
            first = start_looping(rpc, parent, "first", calls=1)

            def ui(method: str) -> dict[str, Any]:
                return rpc.wait_for(
                    lambda e: e["type"] == "extension_ui_request" and e.get("method") == method
                )

            def answer(request: dict[str, Any], value: str) -> None:
                rpc.send({"type": "extension_ui_response", "id": request["id"], "value": value})

            before = len(rpc.seen)
            rpc.send({"id": "fleet", "type": "prompt", "message": "/subagents"})
            fleet = ui("select")
            (row,) = fleet["options"]
            assert row.startswith(first[:10]) and "running" in row
            answer(fleet, row)
            actions = ui("select")
            assert actions["options"] == [
                "Show the transcript tail",
                "Send a message",
                "Stop the job",
                "Back",
            ]
            answer(actions, "Send a message")
            answer(ui("input"), STEER)
            how = ui("select")
            assert [o.split(":")[0] for o in how["options"]] == ["steer", "follow-up"]
            answer(how, how["options"][0])
            told = ui("notify")
            during = [e["type"] for e in rpc.seen[before:]]
            first_notice = end_notice(rpc)

            second = start_looping(rpc, parent, "second", calls=2)
            send_args = {"id": second, "text": STEER}
            # One subagent_send call (the call's third tool result ends the loop), then an answer.
            parent.model.script = Script(
                tool_name="subagent_send",
                tool_args=send_args,
                loop=True,
                loop_limit=3,
                heed_messages=False,
                final_text="sent",
            )
            rpc.send({"id": "send", "type": "prompt", "message": "tell it to stop"})
            call = rpc.wait_for(
                lambda e: e["type"] == "tool_execution_start" and e["toolName"] == "subagent_send"
            )
            sent = rpc.wait_for(
                lambda e: e["type"] == "tool_execution_end" and e["toolName"] == "subagent_send"
            )
            second_notice = end_notice(rpc)
        finally:
            rpc.close()
    # From /subagents: no turn of the parent's model started.
    assert re.match(r"(queued|delivered): steer m1 to run \S+$", told["message"]), told
    assert "agent_start" not in during
    assert_steered(parent.children["first"], first, first_notice)
    # By the parent's model.
    assert call["args"] == send_args
    assert sent["isError"] is False, sent["result"]
    receipt = sent["result"]["details"]
    assert receipt["mode"] == "steer" and receipt["receipt"] in ("queued", "delivered")
    assert sent["result"]["content"][0]["text"].startswith(
        f"{receipt['receipt']}: steer m1 to run {receipt['runId']}"
    )
    assert_steered(parent.children["second"], second, second_notice)
