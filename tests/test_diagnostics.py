"""Tests for the failure body (diagnostics.render)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from subagents.core import events as ev
from subagents.present.diagnostics import NOTHING_CAPTURED, fence, render


def make_result(**overrides: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "status": "failed",
        "stopReason": "error",
        "rawStopReason": "error",
        "errorMessage": "HTTP 400: model not found",
        "exitCode": 1,
        "signal": None,
        "finalText": "",
        "usage": {
            "input": 1200,
            "output": 340,
            "cacheRead": 5000,
            "cacheWrite": 10,
            "totalTokens": 6550,
            "cost": 0.0123,
        },
        "model": "mock-model",
        "toolCalls": 0,
    }
    result.update(overrides)
    return result


def section(body: str, title: str) -> str:
    """The text of one ``## title`` section (without its header)."""
    # A header may state a count: "## Activity (25 tool calls, …)".
    match = re.search(
        rf"^## {re.escape(title)}(?: \(\d[^\n]*\))?\n(.*?)(?=^## |\Z)", body, re.S | re.M
    )
    assert match is not None, f"no section {title!r} in:\n{body}"
    return match.group(1).strip("\n")


def titles(body: str) -> list[str]:
    return re.findall(r"^## (.+?)(?: \(\d.*\))?$", body, re.M)


def calls(
    n: int, *, failed: frozenset[int] = frozenset(), no_result: frozenset[int] = frozenset()
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(ev.tool_call(f"c{i}", "bash", {"command": f"step {i}"}))
        if i not in no_result:
            out.append(ev.tool_result(f"c{i}", "bash", i in failed, "out"))
    return out


# --------------------------------------------------------------------------- sections


def test_all_sections_in_order(tmp_path: Path) -> None:
    raw = tmp_path / "raw.jsonl"
    raw.write_text("{}\n")
    events = [ev.run_started("pi", None, "mock-model", "/r", 1), *calls(2)]
    events.append(ev.assistant_text("I was about to", "error", "error", "mock-model"))
    body = render(make_result(), events, stderr_tail="Traceback: boom\n", raw_path=str(raw))
    assert titles(body) == [
        "Error",
        "Status",
        "stderr (tail)",
        "Activity",
        "Usage before failure",
        "Partial output",
        "Post-mortem",
    ]
    assert section(body, "Error") == "HTTP 400: model not found"
    assert "Traceback: boom" in section(body, "stderr (tail)")
    assert "I was about to" in section(body, "Partial output")


def test_sections_are_omitted_when_empty() -> None:
    body = render(make_result(usage=ev.empty_usage(), model=None), [], stderr_tail="  \n")
    assert titles(body) == ["Error", "Status"]


def test_status_lists_only_what_is_abnormal() -> None:
    body = render(make_result(stopReason="error", exitCode=1, signal=None), [])
    assert section(body, "Status") == "status=failed stop=error exit=1"
    normal = render(make_result(stopReason="stop", exitCode=0, signal=None), [])
    assert section(normal, "Status") == "status=failed"
    length = render(make_result(stopReason="length", exitCode=0), [])
    assert "stop=" not in section(length, "Status")
    killed = render(
        make_result(stopReason=None, exitCode=None, signal="SIGKILL", status="aborted"), []
    )
    assert section(killed, "Status") == "status=aborted signal=SIGKILL"
    raw = render(make_result(stopReason="max_turns_custom", rawStopReason="error_max_turns"), [])
    assert "stop=max_turns_custom rawStop=error_max_turns" in section(raw, "Status")


def test_error_falls_back_on_error_events() -> None:
    body = render(make_result(errorMessage=None), [ev.error("stream said no", True)])
    assert section(body, "Error") == "stream said no"


def test_stderr_fence_is_longer_than_backtick_runs() -> None:
    stderr = "before\n`````\nafter"
    body = render(make_result(), [], stderr_tail=stderr)
    text = section(body, "stderr (tail)")
    lines = text.splitlines()
    assert lines[0] == "`" * 6 and lines[-1] == "`" * 6
    assert "`````" in lines[1:-1]
    assert fence("no ticks") == "```"
    assert fence("a `` b") == "```"
    assert fence("a ``` b") == "````"


def test_stderr_keeps_only_the_tail() -> None:
    stderr = "HEAD" + "x" * 3000 + "TAIL"
    body = render(make_result(), [], stderr_tail=stderr)
    text = section(body, "stderr (tail)")
    assert "TAIL" in text and "HEAD" not in text
    inner = text.split("```\n", 1)[1].rsplit("\n```", 1)[0]
    assert len(inner) == 2000
    assert "of 3008 characters" in text


def test_activity_shows_last_20_of_25_and_names_events_path() -> None:
    events = calls(25, failed=frozenset({23}), no_result=frozenset({24}))
    body = render(make_result(), events, events_path="/runs/r1/events.jsonl")
    assert (
        "## Activity (25 tool calls, showing the last 20; the older 5 in /runs/r1/events.jsonl)"
        in body
    )
    text = section(body, "Activity")
    items = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(items) == 20
    assert items[0] == "- $ step 5 (ok)"  # chronological, oldest shown first
    assert items[-2] == "- $ step 23 (failed)"
    assert items[-1] == "- $ step 24 (no result)"
    assert "step 4 " not in text


def test_activity_without_left_out_has_no_header() -> None:
    body = render(make_result(), calls(3))
    assert "showing the last" not in body


def test_activity_long_command_is_bounded_and_keeps_outcome() -> None:
    cmd = "npm run build -- " + "x" * 283
    assert len(cmd) == 300
    events = [ev.tool_call("1", "bash", {"command": cmd}), ev.tool_result("1", "bash", True, "")]
    text = section(render(make_result(), events), "Activity")
    line = next(line for line in text.splitlines() if line.startswith("- $ npm run build"))
    assert len(line) <= 256
    assert line.endswith("… (failed)")


def test_activity_uses_full_paths() -> None:
    path = "/home/user/project/" + "nested/" * 10 + "module.py"
    events = [
        ev.tool_call("1", "Read", {"file_path": path}),
        ev.tool_result("1", "Read", False, ""),
    ]
    assert f"- Reading {path} (ok)" in render(make_result(), events)


def test_usage_section() -> None:
    text = section(render(make_result(), []), "Usage before failure")
    assert "input 1,200" in text and "output 340" in text
    assert "cache read 5,000" in text and "cache write 10" in text
    assert "- cost: $0.012\n" in text + "\n"  # two significant digits
    assert "mock-model" in text
    usage = dict(make_result()["usage"], cost=None)
    no_cost = section(render(make_result(usage=usage), []), "Usage before failure")
    assert "cost not reported" in no_cost and "$" not in no_cost


def test_partial_output_from_last_assistant_text_and_bounded() -> None:
    long = "START" + "y" * 2000 + "END"
    events = [
        ev.assistant_text("older text", "toolUse", "toolUse", "m"),
        ev.assistant_text(long, None, None, "m"),
        ev.assistant_text("   ", None, None, "m"),
    ]
    text = section(render(make_result(finalText=None), events), "Partial output")
    assert "END" in text and "START" not in text and "older text" not in text
    assert "508 earlier characters dropped" in text  # 2008 - 1500


def test_partial_output_prefers_final_text() -> None:
    events = [ev.assistant_text("from events", "stop", "stop", "m")]
    text = section(render(make_result(finalText="from result"), events), "Partial output")
    assert "from result" in text and "from events" not in text


def test_postmortem_only_when_raw_file_exists(tmp_path: Path) -> None:
    raw = tmp_path / "raw file.jsonl"
    assert "Post-mortem" not in render(make_result(), [], raw_path=str(raw))
    assert "Post-mortem" not in render(make_result(), [])
    raw.write_text("{}\n")
    body = render(make_result(), [], raw_path=str(raw))
    assert f"jq . < '{raw}'" in section(body, "Post-mortem")


# --------------------------------------------------------------------------- nothing captured


@pytest.mark.parametrize(
    "events",
    [[], [ev.run_started("pi", None, None, "/r", 1), ev.run_finished("failed", 0, None, 10)]],
)
def test_nothing_captured_is_explicit(events: list[dict[str, Any]]) -> None:
    result = {"status": "failed", "exitCode": 0, "signal": None, "usage": ev.empty_usage()}
    body = render(result, events)
    assert body.startswith(NOTHING_CAPTURED)
    assert "status=failed" in body
    assert render({}, []).strip() == NOTHING_CAPTURED


def test_nothing_captured_still_points_at_raw(tmp_path: Path) -> None:
    raw = tmp_path / "raw.jsonl"
    raw.write_text("not json\n")
    body = render({"status": "failed", "exitCode": 3}, [], raw_path=str(raw))
    assert body.startswith(NOTHING_CAPTURED)
    assert "exit=3" in body and "jq . <" in body


def test_something_captured_is_not_called_empty() -> None:
    assert NOTHING_CAPTURED not in render({"status": "failed"}, [], stderr_tail="oops")
    assert NOTHING_CAPTURED not in render({"status": "failed"}, calls(1))


# --------------------------------------------------------------------------- cap


SUFFIX = re.compile(r"\n(`{3,}\n)?… \[truncated: (\d+) characters dropped\]$")


@pytest.mark.parametrize("cap", [300, 555, 1000, 2500, 4000])
def test_truncation_is_exact(cap: int) -> None:
    events = [*calls(25, failed=frozenset({3, 7})), ev.assistant_text("z" * 1400, None, None, "m")]
    kwargs: dict[str, Any] = {"stderr_tail": "e" * 1900, "events_path": "/runs/x/events.jsonl"}
    full = render(make_result(), events, cap=10**9, **kwargs)
    assert len(full) > cap
    out = render(make_result(), events, cap=cap, **kwargs)
    assert len(out) <= cap
    match = SUFFIX.search(out)
    assert match is not None, out[-200:]
    kept = out[: match.start()]
    dropped = int(match.group(2))
    assert full.startswith(kept)
    assert len(kept) + dropped == len(full)
    assert len(out) >= cap - 2  # the cut uses the room it has


def test_truncation_closes_an_open_fence() -> None:
    full = render(make_result(), [], stderr_tail="s" * 1500, cap=10**9)
    cut = render(make_result(), [], stderr_tail="s" * 1500, cap=400)
    match = SUFFIX.search(cut)
    assert match is not None and match.group(1) == "```\n"
    assert len(cut) <= 400
    assert len(cut[: match.start()]) + int(match.group(2)) == len(full)


def test_no_truncation_within_cap() -> None:
    body = render(make_result(), calls(2))
    assert "truncated" not in body
    assert len(body) < 8000


def test_default_cap_holds_for_huge_inputs() -> None:
    events = [ev.tool_call(f"c{i}", "bash", {"command": "x" * 1000}) for i in range(100)]
    events.append(ev.assistant_text("p" * 10_000, None, None, "m"))
    body = render(make_result(errorMessage="E" * 20_000), events, stderr_tail="s" * 50_000)
    assert len(body) <= 8000
    assert SUFFIX.search(body) is not None
