"""How numbers are told to people and models (present.figures, present.outcome,
present.runstate.runs_line): one formatter each, no float noise."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from subagents.present import outcome
from subagents.present.figures import money, rounded_cost, tokens
from subagents.present.runstate import RunState, runs_line


def test_money_reads_as_people_write_it() -> None:
    assert money(0.000039999999999999996) == "$0.00004"
    assert money(0.00020999999999999998) == "$0.00021"
    assert money(0.006) == money(0.0060000001) == "$0.006"
    assert money(0.0123) == "$0.012"
    assert money(0.1) == "$0.10" and money(1.234) == "$1.23" and money(1234.5) == "$1234.50"
    assert money(0) == "$0" and money(1e-9) == "<$0.000001"
    assert money(None) == "-" and money(None, unknown="cost unknown") == "cost unknown"
    assert money(float("nan")) == "-" and money(True) == "-"


@given(st.floats(min_value=1e-6, max_value=1e6))
def test_money_keeps_two_significant_digits_below_ten_cents(cost: float) -> None:
    text = money(cost)
    shown = float(text.removeprefix("$"))
    assert math.isclose(shown, cost, rel_tol=0.06, abs_tol=0.005), (cost, text)
    digits = text.split(".")[1] if "." in text else ""
    assert len(digits) <= 2 or len(digits.lstrip("0")) <= 2, text  # never float noise
    assert rounded_cost(cost) == shown or cost >= 0.1


def test_tokens() -> None:
    assert [tokens(n) for n in (0, 999, 1000, 12_345, 123_456, 1_234_567)] == [
        "0",
        "999",
        "1.0k",
        "12.3k",
        "123k",
        "1.2M",
    ]


def test_a_job_line_is_the_end_of_a_job_in_one_line() -> None:
    job = {
        "jobId": "J",
        "mode": "single",
        "status": "completed",
        "durationMs": 3400,
        "usage": {"totalTokens": 60, "cost": 0.000039999999999999996},
        "runs": [{"backend": "pi", "status": "completed", "finalText": "DONE\nmore"}],
    }
    assert outcome.job_line(job) == '✓ job J · pi · 3.4s · 60 tokens · $0.00004 · "DONE"'
    assert outcome.status_line(job) == "✓ completed · pi · 3.4s · 60 tokens · $0.00004"
    failed = {
        **job,
        "mode": "parallel",
        "status": "failed",
        "runs": [
            {"agent": "scout", "status": "completed", "finalText": "ok"},
            {"backend": "pi", "status": "timeout", "errorMessage": "timed out after 60s"},
        ],
    }
    assert outcome.job_line(failed) == (
        "✗ job J failed · parallel · scout, pi · 3.4s · 60 tokens · $0.00004 · "
        "1/2 completed; failed: [2] pi — timed out after 1m00s"  # (the figures' words)
    )


def test_runs_line_tells_every_run_in_order_within_its_limit() -> None:
    runs = [RunState(f"r{i}", max_len=200) for i in range(5)]
    runs[0].update({"type": "run_started"})
    runs[0].update({"type": "run_finished", "status": "completed", "durationMs": 3100})
    runs[1].update({"type": "run_started"})
    runs[1].update(
        {
            "type": "tool_call",
            "toolCallId": "1",
            "toolName": "bash",
            "args": {"command": "sleep 3; ls"},
        }
    )
    assert runs_line(runs, 200) == "[1] ✓ 3.1s · [2] $ sleep 3; ls · [3-5] waiting"
    runs[3].update({"type": "run_started"})
    long = "x" * 300
    runs[3].update(
        {"type": "tool_call", "toolCallId": "2", "toolName": "bash", "args": {"command": long}}
    )
    line = runs_line(runs, 80)
    assert (
        len(line) <= 80 and line.startswith("[1] ✓ 3.1s · [2] $ sleep") and "[4] $ xxx" in line
    ), line
    assert "[3] waiting" in line and "[5] waiting" in line, line


def test_a_stop_is_said_in_plain_words_on_every_line_the_signal_kept_in_the_record() -> None:
    run = {"backend": "pi", "status": "aborted"}
    job = {"jobId": "J", "mode": "single", "status": "aborted", "durationMs": 900}
    for signal, words in (
        ("SIGTERM", "stopped by you"),
        ("SIGHUP", "stopped: its terminal closed"),
    ):
        message = f"aborted: the supervisor received {signal}"
        stopped = {**job, "runs": [{**run, "errorMessage": message}]}
        assert outcome.job_line(stopped).endswith(f"· {words}")  # type: ignore[arg-type]
        # A job stopped before any run started says it alike.
        assert outcome.detail({**job, "runs": [], "errorMessage": message}) == words  # type: ignore[arg-type]
        assert stopped["runs"][0]["errorMessage"] == message
