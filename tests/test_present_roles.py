"""Each run as a face words it (present/roles.py): its place in the job, a budget's mark,
why it did not complete in plain words, a judge's verdict in words; and the same words in
the feed's records and the parent's text. In-process, over records as the engine writes
them."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from subagents.present.answer import parent_text
from subagents.present.feed import JsonlFeed, steps_of
from subagents.present.roles import (
    JUDGE_TASK_LABEL,
    limit_mark,
    limit_used,
    plain_why,
    roles,
    verdict_lines,
)


def plan(mode: str, n: int, **extra: Any) -> Any:
    requests = [{"task": f"task {i}\nmore", "backend": "pi"} for i in range(n)]
    return {"mode": mode, "requests": requests, "limits": {}, "extra": extra}


def test_a_council_is_members_a_b_then_its_judge_a_chain_is_steps() -> None:
    assert roles(plan("council", 3, judge=True)) == ["A", "B", "judge"]
    assert roles(plan("council", 2, judge=False)) == ["A", "B"]
    assert roles(plan("chain", 3)) == ["step 1/3", "step 2/3", "step 3/3"]
    assert roles(plan("chain", 1)) == [None]
    assert roles(plan("parallel", 2)) == [None, None]
    # The judge's step says what it does, not the prompt full of answers it is given.
    steps = steps_of(plan("council", 3, judge=True))
    assert [s["role"] for s in steps] == ["A", "B", "judge"]
    assert [s["task"] for s in steps] == ["task 0", "task 1", JUDGE_TASK_LABEL]


@pytest.mark.parametrize(
    ("limit", "mark", "used"),
    [
        (
            {"kind": "turns", "limit": 3, "used": 4, "action": "wrap-up", "scope": "run"},
            "⏹ turn limit 3 · wrapped up",
            "4 turns used",
        ),
        (
            {"kind": "cost", "limit": 0.5, "used": 0.61, "action": "abort", "scope": "job"},
            "⏹ job's cost limit $0.50 · stopped",
            "$0.61 used",
        ),
        (
            {"kind": "tokens", "limit": 1000, "used": 1200, "action": "stop", "scope": "run"},
            "⏹ token limit 1000 · ended at its answer",
            "1200 tokens used",
        ),
    ],
)
def test_a_budget_that_ended_a_run_is_a_mark_of_its_own(
    limit: dict[str, Any], mark: str, used: str
) -> None:
    assert limit_mark({"limit": limit}) == mark
    assert limit_used({"limit": limit}) == used
    assert limit_mark({"status": "completed"}) is None


@pytest.mark.parametrize(
    ("status", "error", "said"),
    [
        ("aborted", "aborted: the supervisor received SIGTERM", "stopped by you"),
        ("aborted", "aborted: supervisor received SIGINT", "stopped by you"),
        ("aborted", "aborted: the supervisor received SIGHUP", "stopped: its terminal closed"),
        ("aborted", "aborted: process 12, which the run was bound to, ended",
         "process 12, which the run was bound to, ended"),
        ("timeout", "timed out after 600s", "timed out after 10m00s"),
        ("timeout", "timed out after 2.5s", "timed out after 2.5s"),
        ("failed", "500 mock server error\nmore", "500 mock server error"),
        ("failed", None, "failed"),
    ],
)  # fmt: skip
def test_why_a_run_did_not_complete_is_said_in_plain_words(
    status: str, error: str | None, said: str
) -> None:
    assert plain_why(status, error) == said


def test_a_verdict_is_words_not_json() -> None:
    record: Any = {
        "members": [],
        "quorum": 1,
        "answered": 2,
        "judgeRunId": "r3",
        "verdict": {"best": "B", "agreement": "partial", "reasons": ["names the file"],
                    "merged": "Merged."},
    }  # fmt: skip
    lines = verdict_lines(record)
    assert lines == ["best B · agreement partial", "- names the file", "", "Merged."]
    assert "{" not in "\n".join(lines)
    failed: Any = {**record, "verdict": None, "judgeError": "timed out after 60s"}
    assert verdict_lines(failed) == ["no verdict: timed out after 1m00s"]
    assert verdict_lines({"members": [], "quorum": 1, "answered": 2}) == []


def run(status: str = "completed", **more: Any) -> dict[str, Any]:
    return {
        "runId": "r1",
        "agent": None,
        "backend": "pi",
        "task": "loop",
        "status": status,
        "finalText": "Last words." if status == "completed" else None,
        "errorMessage": None,
        "durationMs": 1200,
        "usage": {"totalTokens": 10, "cost": None},
        "paths": {},
        **more,
    }


LIMIT = {"kind": "turns", "limit": 3, "used": 4, "action": "wrap-up", "scope": "run"}


def test_the_parent_model_is_told_a_budget_cut_its_child_short() -> None:
    one: Any = {"jobId": "j", "mode": "single", "status": "completed", "runs": [run(limit=LIMIT)]}
    said = parent_text(one, ["loop"])
    assert said.text == (
        "Last words.\n\n⏹ turn limit 3 · wrapped up (4 turns used): the run was ended by its budget"
    )
    two: Any = {
        "jobId": "j",
        "mode": "parallel",
        "status": "completed",
        "runs": [run(limit=LIMIT), run()],
    }
    text = parent_text(two, ["a", "b"]).text
    assert "# 1. a: completed · ⏹ turn limit 3 · wrapped up (4 turns used)" in text
    assert "# 2. b: completed\n" in text


def test_a_stopped_run_reaches_the_parent_and_the_feed_in_plain_words() -> None:
    stopped = run("aborted", errorMessage="aborted: the supervisor received SIGTERM")
    result: Any = {
        "jobId": "j",
        "mode": "parallel",
        "status": "aborted",
        "durationMs": 14300,
        "runs": [run(), stopped],
    }
    assert "stopped by you" in parent_text(result, ["a", "b"]).text
    out = io.StringIO()
    JsonlFeed(out, "j", "parallel", ["a", "b"], lambda i: None).ended(result)
    (answer,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert answer["durationMs"] == 14300  # the job's: the one duration every face shows
    assert answer["runs"] == [
        {"mark": None, "used": None, "why": None},
        {"mark": None, "used": None, "why": "stopped by you"},
    ]
    assert "verdict" not in answer


def test_a_chain_template_says_its_placeholder_and_matches_the_engines() -> None:
    from subagents.jobs import PREVIOUS
    from subagents.present import roles

    assert roles.PREVIOUS == PREVIOUS
    assert roles.template_words("fix: {previous}", 2) == "fix: ⟨step 2's answer⟩"
    assert roles.template_words("first {previous}", 0) == "first {previous}"


def test_a_running_runs_budget_says_each_limit_and_what_it_used() -> None:
    from subagents.present.roles import budget_progress

    usage = {"totalTokens": 1234, "cost": 0.0123}
    limits = {"turns": 5, "tokens": 10_000, "cost": 0.5}
    assert budget_progress(limits, 2, usage) == "turns 2/5 · tokens 1.2k/10.0k · $0.012/$0.50"
    assert budget_progress({"turns": 3}, None, None) == "turns 0/3"
    assert budget_progress({}, 2, usage) is None and budget_progress(None, 2, usage) is None
