"""The parent's answer, composed once (present/answer.py) and worded for each face: the
terminal (``run``/``wait``), an MCP tool result, the pi package (the feed's ``answer``
record) and ``show``. In-process, over job results as the engine records them."""

from __future__ import annotations

from typing import Any

import pytest

from subagents.present.answer import ParentAnswer, describe, markdown, parent_text, terminal


def run(i: int, status: str = "completed", text: str = "", **more: Any) -> dict[str, Any]:
    return {
        "runId": f"r{i}",
        "agent": more.pop("agent", None),
        "backend": "pi",
        "task": more.pop("task", f"task {i}\nmore"),
        "status": status,
        "finalText": text if status == "completed" else None,
        "errorMessage": None if status == "completed" else f"boom {i}",
        "diagnostics": None if status == "completed" else f"## Error\nboom {i}",
        "durationMs": 1200,
        "usage": {"totalTokens": 10, "cost": None},
        "paths": {},
        **more,
    }


def job(mode: str, status: str, runs: list[dict[str, Any]], **more: Any) -> Any:
    return {"jobId": "j1", "mode": mode, "status": status, "runs": runs, **more}


def test_one_run_is_its_answer_or_why_it_failed() -> None:
    done = job("single", "completed", [run(1, text="Hello.")], finalText="Hello.")
    assert parent_text(done, ["say hello"]) == ParentAnswer("Hello.", is_error=False)
    failed = job("single", "failed", [run(1, "failed")], finalText=None)
    said = parent_text(failed, ["say hello"])
    assert said.is_error and said.text == "## Error\nboom 1"


def test_parallel_names_each_run_led_by_those_that_did_not_complete() -> None:
    result = job("parallel", "failed", [run(1, text="A", agent="scout"), run(2, "failed")])
    said = parent_text(result, ["first", "second"])
    assert not said.is_error  # one run completed
    assert said.text.split("\n\n") == [
        '1 of 2 tasks did not complete: "second" (failed).',
        "# 1. first (scout): completed",
        "A",
        "# 2. second: failed",
        "## Error\nboom 2",
    ]


def test_a_chain_is_its_last_answer_and_names_the_steps_it_never_reached() -> None:
    whole = job("chain", "completed", [run(1, text="one"), run(2, text="two")], finalText="two")
    assert parent_text(whole, ["a", "b"]) == ParentAnswer("two", is_error=False)
    stopped = job("chain", "failed", [run(1, "failed")], finalText=None)
    said = parent_text(stopped, ["a", "b"])
    assert said.is_error
    assert said.text.startswith('2 of 2 tasks did not complete: "a" (failed), "b" (not run).')
    assert said.text.endswith("# 2. b: not run\n\n(not run)")
    # Without the steps as asked (a job reconciled from its record), the runs' own tasks.
    assert parent_text(stopped).text == "## Error\nboom 1"


COUNCIL: Any = {
    "members": [],
    "quorum": 1,
    "answered": 2,
    "verdict": {"best": "B", "agreement": "full", "reasons": ["both greet"], "merged": "Hi."},
}


def test_a_council_is_the_judges_answer_then_its_table_an_error_by_its_status() -> None:
    agreed = job("council", "completed", [run(1, text="x"), run(2, text="y")], finalText="Hi.")
    agreed["council"] = COUNCIL
    said = parent_text(agreed)
    assert not said.is_error
    assert said.text.startswith("Hi.\n\n") and "2 answered (quorum 1)" in said.text
    short = job("council", "failed", [run(1, text="x")], errorMessage="the judge failed")
    short["council"] = {**COUNCIL, "verdict": None, "judgeError": "the judge failed"}
    said = parent_text(short)
    assert said.is_error and said.text.startswith("council failed: the judge failed\n\n")
    # A council without its record (it ended before any member did): each run's section.
    bare = job("council", "failed", [run(1, "failed"), run(2, "failed")])
    assert parent_text(bare).text.startswith("council failed: 0 of 2 runs completed\n\n2 of 2")


@pytest.mark.parametrize("mode", ["single", "chain"])
def test_the_terminal_prints_the_answer_and_puts_failures_on_stderr(mode: str) -> None:
    told = terminal(job(mode, "completed", [run(1, text="Done.")], finalText="Done."))
    assert (told.table, told.answers, told.failures) == (None, ["Done.\n"], [])
    failed = terminal(job(mode, "failed", [run(1, "failed")], finalText=None))
    assert (failed.answers, failed.failures) == ([], ["## Error\nboom 1"])


def test_the_terminal_gives_each_parallel_answer_its_heading() -> None:
    told = terminal(job("parallel", "failed", [run(1, text="A\n"), run(2, "failed")]))
    assert told.answers == ["## [1] pi: completed\n\nA\n\n", "## [2] pi: failed\n\n\n\n"]
    assert told.failures == ["## Error\nboom 2"]


def test_markdown_leads_with_what_went_wrong_for_a_failed_job() -> None:
    text = markdown(job("single", "failed", [run(1, "failed")], finalText=None))
    first, body = text.split("\n\n", 1)
    assert first.startswith("✗ failed") and first.endswith("job j1 · run r1")
    assert body == "**Error**\nboom 1"  # sections as bold labels
    ok = markdown(job("single", "completed", [run(1, text="Yes.")], finalText="Yes."))
    assert ok.startswith("Yes.\n\n✓ completed")


def test_show_lists_the_runs_and_the_continued_chain() -> None:
    continued = run(1, text="Again.", continuedFrom="r0")
    state = job("single", "completed", [continued], finalText="Again.", durationMs=1500)
    state["usage"] = {"totalTokens": 10, "cost": None}
    text = describe(state, lambda run_id: ["r0", run_id])
    assert text.splitlines()[:3] == [
        "job j1 · single · completed",
        "1.5s · 10 tokens",
        "  [1] pi completed r1: Again.",
    ]
    assert "      continues: r0 → r1" in text and text.endswith("\n\nAgain.")


def test_a_budget_stop_is_its_own_mark_in_every_face() -> None:
    limit = {"kind": "turns", "limit": 3, "used": 4, "action": "wrap-up"}
    stopped = run(1, text="Partly done.", limit=limit)
    result = job(
        "single",
        "completed",
        [stopped],
        finalText="Partly done.",
        durationMs=3100,
        usage={"totalTokens": 10, "cost": None},
    )
    mark = "⏹ turn limit 3 · wrapped up (4 turns used)"
    # The parent model reads the answer and that a budget ended it.
    said = parent_text(result, ["keep going"]).text
    assert said == f"Partly done.\n\n{mark}: the run was ended by its budget"
    # The status line (MCP results, the end notices, `run`'s last line) carries the mark.
    from subagents.mcp.results import compact_result
    from subagents.present import outcome

    assert outcome.status_line(result) == f"✓ completed · pi · 3.1s · 10 tokens · {mark}"
    assert outcome.job_line(result) == f'✓ job j1 · pi · 3.1s · 10 tokens · {mark} · "Partly done."'
    assert markdown(result).endswith(f"{mark} · job j1 · run r1")
    assert compact_result(result)["limit"] == limit
    # A run stopped by its job's budget says whose budget it was; a parallel run names it.
    job_limit = {**limit, "action": "abort", "scope": "job"}
    both = job("parallel", "failed", [run(1, text="A"), run(2, "aborted", limit=job_limit)])
    assert (
        "# 2. b: aborted · ⏹ job's turn limit 3 · stopped (4 turns used)"
        in parent_text(both, ["a", "b"]).text
    )
    assert "⏹ job's turn limit 3 · stopped (4 turns used) · run r2" in markdown(both)


def test_structured_answers_reach_a_program_parsed() -> None:
    from subagents.mcp.results import compact_result

    value = {"verdict": "ok", "issues": []}
    one = job(
        "single", "completed", [run(1, text='{"verdict": "ok", "issues": []}', structured=value)]
    )
    view = compact_result(one)
    assert view["answer"] == value and "structured" not in view["runs"][0]  # type: ignore[index]
    two = job("parallel", "completed", [run(1, text="{}", structured=value), run(2, text="plain")])
    assert compact_result(two)["answer"] == [value, "plain"]
