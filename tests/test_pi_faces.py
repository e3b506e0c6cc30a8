"""What the engine knows, shown where a pi user looks: a council as members and a judge, a
budget's stop as its own mark, a background job's runs each in the widget and its usage in
the footer, `/subagents` at 80 columns. The real pi TUI in tmux, every model a mock on
127.0.0.1, its calls run through the real ``subagents`` CLI. Where the subject is only what
pi shows of its children (a council, a background parallel job, a map, `/subagents`, Esc), the
children are a stand-in playing pi's stream (``Parent.stand_in``: a real pi's start is ~0.9
CPU-s); a budget's stop and the live transcript steer real pi children (they take input), as
do test_pi_tui's foreground row and widget and test_pi_package's calls.

Each screen is looked at 80 and 200 columns wide in one session, as a person who resizes the
window sees it (a change of width makes pi draw the whole session again); a run whose command
waits on ``gate`` (a lock the test holds) keeps a live view there until both widths are seen.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.checks import on_screen
from support.gate import gate
from support.pi_parent import Parent, delegating
from support.pi_parent import needs_pi_parent as needs_pi
from support.pi_tui import PiTui
from support.pistream import Played, fails, replies

from subagents.demo.mockmodel import Script

pytestmark = [
    pytest.mark.e2e,
    needs_pi,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

SPINNER = "[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"
VERDICT = {
    "best": "B",
    "agreement": "partial",
    "reasons": ["B names the file"],
    "merged": "Hello from the merged answer.",
}
NARROW, WIDE = 80, 200


def tool_results(parent: Parent) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in parent.session_file().read_text().splitlines() if x]
    return [
        e["message"]
        for e in lines
        if e["type"] == "message" and e["message"].get("role") == "toolResult"
    ]


def bg_ended(pi: PiTui) -> bool:
    """A background job's end notice is on the screen."""
    return bool(re.search(r"background subagent job \S+ ended", pi.capture()))


def gated(word: str) -> list[Played]:
    """A child's run whose bash call ``flock -s gate echo WORD`` waits on the test's gate, then
    answers as the mock model does after a tool call."""
    command = ["flock", "-s", "gate", "echo", word]
    return replies(f"I ran bash and it printed: {word}", command, f"{word}\n")


def fits(pi: PiTui, *texts: str) -> str:
    """The one screen line holding every text (so none of them wrapped onto the next)."""
    return pi.line(*texts)


def test_a_council_is_its_members_a_judge_and_a_verdict_in_words(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    members = ["pi:child/mock-model", "pi:other/mock-model"]
    args = {"task": "say hello", "council": members, "judge": "pi:judge/mock-model"}
    with delegating(tmp_path, args, answer="Judged.") as (parent, _):
        parent.stand_in(
            child=replies("Hello from the mock model."),
            other=replies("Hello from B."),
            judge=replies(json.dumps(VERDICT)),
        )
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("ask the council")
        assert on_screen(lambda: pi.shows("subagent council \u00d72 + judge say hello"), 60)
        assert on_screen(lambda: pi.shows("Judged."), 120), pi.screen
        for cols in (NARROW, WIDE):
            pi.resize(cols)
            # The call line counts the members and the judge: three rows follow, not two.
            assert pi.shows("subagent council \u00d72 + judge say hello"), pi.screen
            # A row per member, labelled, named by where it ran; the judge's row is "judge".
            a = fits(pi, "✓ A pi · child/mock-model")
            b = fits(pi, "✓ B pi · other/mock-model")
            judged = fits(pi, "✓ judge pi · judge/mock-model")
            assert a and b and judged, pi.screen
            # The verdict in words, not the judge's JSON; and the members' count.
            assert fits(pi, "best B · agreement partial"), pi.screen
            assert "- B names the file" in pi.screen or "• B names the file" in pi.screen
            assert "Hello from the merged answer." in pi.screen
            assert '"best"' not in pi.screen and '"merged"' not in pi.screen, pi.screen
            assert fits(pi, "2/2 members answered · verdict: best B · agreement partial · 45 tok")
            print(f"\n--- council at {cols} columns ---\n{pi.screen}")
    (result,) = tool_results(parent)
    assert result["isError"] is False
    assert result["content"][0]["text"].startswith("Hello from the merged answer.")
    assert [r["role"] for r in result["details"]["runs"]] == ["A", "B", "judge"]


def test_a_budget_stop_is_its_own_mark_in_the_row_the_result_and_the_entry(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    task = "loop until told otherwise, then list every file you looked at"
    args = {"task": task, "model": "child/mock-model", "maxTurns": 2}
    child = Script(loop=True, command="sleep 0.2")
    with delegating(tmp_path, args, answer="Stopped early.", child=child) as (parent, _):
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("delegate it")
        assert on_screen(lambda: pi.shows("Stopped early."), 120), pi.screen
        for cols in (NARROW, WIDE):
            pi.resize(cols)
            # Not a ✓: the mark, the limit and what was done, on the row itself.
            row = fits(pi, "⏹ loop until told", "turn limit 2 · wrapped up · ")
            assert row and "✓ loop until" not in pi.screen, pi.screen
            # The call line: the model is the first to go at 80 columns, the task stays.
            call = fits(pi, "subagent single loop until told otherwise, then list every")
            assert call and ("child/mock-model" in call) == (cols == WIDE), call
            print(f"\n--- budget stop at {cols} columns ---\n{pi.screen}")
    (result,) = tool_results(parent)
    text = result["content"][0]["text"]
    # The parent model is told the run was cut short, not only its last words.
    assert "⏹ turn limit 2 · wrapped up (" in text and "turns used" in text, text
    assert result["details"]["runs"][0]["mark"] == "⏹ turn limit 2 · wrapped up"
    (end,) = [e for e in parent.agent_events() if e["eventType"] != "subagent:start"]
    assert "⏹ turn limit 2 · wrapped up" in end["summary"]


def test_a_background_parallel_job_has_a_widget_row_per_run_and_its_usage_in_the_footer(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    tasks = [
        {"task": "Tidy the imports", "model": "slow/mock-model"},
        {"task": "Sort the tests", "model": "slow/mock-model"},
    ]
    args = {"tasks": tasks, "background": True}
    with delegating(tmp_path, args) as (parent, _), gate(parent.work) as release:
        parent.stand_in(slow=gated("tidied"))
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("start it in the background")
        head = "subagents · 1 background job running, 2 runs"
        # A row per running run: its spinner, the job's id, its task, what it does, its time.
        tidy = re.compile(rf"^  {SPINNER} \w{{10}} Tidy the imports · .* · \d+\.\ds")
        sort = re.compile(rf"^  {SPINNER} \w{{10}} Sort the tests · .* · \d+\.\ds")

        def both() -> bool:
            lines = pi.capture().splitlines()
            return any(tidy.match(ln) for ln in lines) and any(sort.match(ln) for ln in lines)

        doing = ("Sort the tests", "$ flock -s gate echo tidied")
        for cols in (NARROW, WIDE):  # both runs wait on the gate meanwhile
            pi.resize(cols)
            assert on_screen(lambda: pi.shows(head), 60), pi.screen
            assert on_screen(both, 60), pi.screen
            assert on_screen(lambda: bool(pi.line(*doing)), 60), pi.screen
            print(f"\n--- background widget at {cols} columns ---\n{pi.screen}")
        release()
        # Its end: the widget goes; what it used stays in the footer.
        for cols in (WIDE, NARROW):
            pi.resize(cols)
            assert on_screen(lambda: bg_ended(pi), 120), pi.screen
            assert on_screen(lambda: not pi.shows(head), 30), pi.screen
            assert on_screen(lambda: bool(re.search(r"bg \d+ tok", pi.capture())), 30)
            print(f"\n--- after its end at {cols} columns ---\n{pi.screen}")


def test_subagents_fits_the_width_and_keeps_up_with_the_job_while_open(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    task = "Keep polling the service for a healthy answer"
    args = {"task": task, "model": "slow/mock-model", "background": True}
    with delegating(tmp_path, args) as (parent, _), gate(parent.work) as release:
        parent.stand_in(slow=gated("healthy"))
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("start it in the background")
        assert on_screen(lambda: bool(pi.line("Keep polling", "$ flock -s gate")), 90), pi.screen
        assert on_screen(lambda: pi.shows("I ran subagent"), 60)
        pi.type("/subagents")
        assert on_screen(lambda: pi.shows("Subagent jobs of this session"), 60), pi.screen
        for cols in (NARROW, WIDE):  # the view stays open while the window is resized
            pi.resize(cols)
            # At 80 the least useful columns went; what is left is on one line, under its label.
            kept = ("JOB", "TASK", "STATUS", "ELAPSED", "TOKENS", "COST")
            head = pi.line(*kept)
            assert head and ("BACKENDS" in head and "AGENTS" in head) == (cols == WIDE)
            row = pi.line("Keep polling the serv", "running")
            assert row, pi.screen  # the task whole enough to tell
            assert (task in row) == (cols == WIDE), row
            assert row.index("running") == head.index("STATUS")
            assert len(row.rstrip()) > head.index("COST") and len(row) <= cols
            print(f"\n--- /subagents at {cols} columns ---\n{pi.screen}")
            # While it stays open: the elapsed time goes on.
            first = float(re.findall(r"(\d+\.\d)s", row)[0])

            def ticked(first: float = first) -> bool:
                now = re.findall(r"(\d+\.\d)s", pi.line("Keep polling the serv", "running"))
                return bool(now) and float(now[0]) >= first + 2

            assert on_screen(ticked, 30), pi.screen
        release()
        # The job's end shows in its row, the view still open.
        ended = ("→ ", "Keep polling the serv", "completed")
        for cols in (WIDE, NARROW):
            pi.resize(cols)
            assert on_screen(lambda: bool(pi.line(*ended)), 90), pi.screen
            assert pi.shows("Subagent jobs of this session", "esc close"), pi.screen
            print(f"\n--- /subagents at {cols} columns, still open, after the job's end ---")
            print(pi.screen)
        pi.keys("Escape")
        assert on_screen(lambda: not pi.shows("esc close"), 30), pi.screen


def test_esc_stops_a_run_said_as_stopped_by_you(tmp_path: Path, tmux: Callable[..., str]) -> None:
    args = {"task": "Watch the logs", "model": "slow/mock-model"}
    with delegating(tmp_path, args) as (parent, _):
        parent.stand_in(slow=replies("never", ["sleep", "300"]))
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("delegate it")
        running = ("Watch the logs", "⎿ $ sleep 300")
        for cols in (NARROW, WIDE):
            pi.resize(cols)
            assert on_screen(lambda: pi.shows(*running), 90), pi.screen
        pi.keys("Escape")
        for cols in (WIDE, NARROW):
            pi.resize(cols)
            # The row says how it ended in the words of the person who stopped it.
            assert on_screen(lambda: bool(pi.line("■ Watch the logs", "aborted")), 60)
            assert on_screen(lambda: pi.shows("stopped by you"), 30), pi.screen
            assert "SIGTERM" not in pi.screen, pi.screen
            print(f"\n--- Esc at {cols} columns ---\n{pi.screen}")


MAP_ROWS = "name,provider\nalpha,slow\nbeta,slow\ngamma,broken\ndelta,slow\n"


def test_a_map_is_one_progress_row_with_its_failures_grouped(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    args = {
        "task": "Say the word {name}",
        "model": "{provider}/mock-model",
        "concurrency": 2,
        "jobMaxCost": 5,
        "map": {"input": "words.csv", "key": "name"},
    }
    with (
        delegating(tmp_path, args, answer="Mapped.") as (parent, _),
        gate(parent.work) as release,
    ):
        parent.stand_in(slow=gated("said"), broken=fails())
        (parent.work / "words.csv").write_text(MAP_ROWS)
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("map it")
        assert on_screen(lambda: pi.shows("subagent map Say the word {name}"), 60), pi.screen
        # While it runs (its first two rows wait on the gate): one row of counts, never a row
        # per dataset row.
        live = re.compile(
            rf"{SPINNER} map rows [0-4]/4 · [12] running · [01] failed · ETA \S+ · \$"
        )
        for cols in (NARROW, WIDE):
            pi.resize(cols)
            assert on_screen(lambda: bool(live.search(pi.capture())), 90), pi.screen
            assert "Say the word alpha" not in pi.screen, pi.screen
            print(f"\n--- a map running at {cols} columns ---\n{pi.screen}")
        release()
        assert on_screen(lambda: pi.shows("Mapped."), 120), pi.screen
        for cols in (WIDE, NARROW):
            pi.resize(cols)
            # Its end: the counts, the failure under it grouped by why, where the answers are.
            row = fits(pi, "◐ map rows 4/4 · 3 completed · 1 failed")
            assert row and len(row.rstrip()) <= cols, pi.screen
            assert fits(pi, "⎿ 1 row: "), pi.screen
            assert fits(pi, "each row's answer: subagents show --rows"), pi.screen
            assert "Say the word alpha" not in pi.screen, pi.screen
            print(f"\n--- a map's end at {cols} columns ---\n{pi.screen}")
    (result,) = tool_results(parent)
    assert result["isError"] is False
    assert "3/4 rows completed (1 row: " in result["content"][0]["text"]
    details = result["details"]
    assert details["mode"] == "map" and details["runs"] == []
    assert details["map"]["failures"][0]["rows"] == 1 and details["map"]["maxCost"] == 5
    (end,) = [e for e in parent.agent_events() if e["eventType"] != "subagent:start"]
    assert end["mode"] == "map" and "3/4 rows completed" in end["summary"]


def test_a_background_map_is_one_row_in_the_widget(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    args = {
        "task": "Say the word {name}",
        "model": "{provider}/mock-model",
        "concurrency": 1,
        "background": True,
        "map": {"input": "words.csv"},
    }
    with delegating(tmp_path, args) as (parent, _), gate(parent.work) as release:
        parent.stand_in(slow=gated("said"), broken=fails())
        (parent.work / "words.csv").write_text(MAP_ROWS)
        pi = PiTui(tmux, parent, cols=80)
        pi.type("map it in the background")
        # (its first row waits on the gate meanwhile)
        row = re.compile(rf"^  {SPINNER} \w{{10}} map rows [0-3]/4 · 1 running · [01] failed")
        assert on_screen(lambda: any(row.match(ln) for ln in pi.capture().splitlines()), 90), (
            pi.screen
        )
        print(f"\n--- a background map in the widget at 80 columns ---\n{pi.screen}")
        release()
        assert on_screen(lambda: bg_ended(pi), 180), pi.screen
        assert on_screen(lambda: bool(pi.line("map rows 4/4 · 3 completed · 1 failed")), 30)
        assert fits(pi, "1 row: "), pi.screen
        print(f"\n--- its end notice at 80 columns ---\n{pi.screen}")


CHECKED = "$ sleep 1; echo checked"
HINTS = "s steer · f follow-up · x stop · esc back"


def test_a_jobs_transcript_is_live_in_subagents_with_its_budget_steer_and_stop(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    task = "Keep checking the build until told otherwise"
    args = {"task": task, "model": "slow/mock-model", "background": True, "maxTurns": 40}
    looping = Script(loop=True, command="sleep 1; echo checked", loop_limit=40)
    with delegating(tmp_path, args, slow=looping) as (parent, _):
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("start it in the background")
        assert on_screen(lambda: bool(pi.line("Keep checking", "$ sleep 1")), 90), pi.screen
        assert on_screen(lambda: pi.shows("I ran subagent"), 60)
        pi.type("/subagents")
        assert on_screen(lambda: pi.shows("Subagent jobs of this session"), 60), pi.screen
        pi.keys("Enter")
        assert on_screen(lambda: pi.shows("Show the transcript (live"), 30), pi.screen
        pi.keys("Enter")
        # The transcript, the job's status and its run's budget as it goes.
        budget = re.compile(r"job \S+ · running · turns \d+/40")
        for cols in (NARROW, WIDE):  # the view stays open while the window is resized
            pi.resize(cols)
            # (One look holds both: pi draws this view anew as it grows, and a look may come
            # while it is half drawn.)
            assert on_screen(lambda: bool(budget.search(pi.capture())) and HINTS in pi.screen, 60)
            # New lines come while it stays open: the turns grow, and (at the first width,
            # while the view is shorter than the window) the commands' count on screen too;
            # a view as tall as the window shows the transcript's tail, the same lines.
            seen = pi.screen.count(CHECKED) if cols == NARROW else -1
            turns = int(re.findall(r"turns (\d+)/40", pi.screen)[-1])

            def more(seen: int = seen, turns: int = turns) -> bool:
                screen = pi.capture()
                now = re.findall(r"turns (\d+)/40", screen)
                return bool(now) and int(now[-1]) > turns and screen.count(CHECKED) > seen

            assert on_screen(more, 60), pi.screen
            assert all(len(ln) <= cols for ln in pi.screen.splitlines()), pi.screen
            print(f"\n--- the live transcript at {cols} columns ---\n{pi.screen}")
        # Steer from the viewer: the message goes in, the view opens again, the job ends.
        pi.keys("s")
        assert on_screen(lambda: pi.shows("steer Message for job"), 30), pi.screen
        pi.type("stop here and answer")
        assert on_screen(lambda: bool(budget.search(pi.capture())) or pi.shows("completed"), 30)
        done = re.compile(r"job \S+ · completed")
        assert on_screen(lambda: bool(done.search(pi.capture())), 90), pi.screen

        # The view opened again holds the transcript up to the child's answer to the steer.
        def answered_in_the_view() -> bool:
            screen = pi.capture()
            if not done.search(screen):
                return False
            view = screen[screen.rindex(done.findall(screen)[-1]) :]
            return 'You said: "stop here and answer"' in view and "Finished: completed" in view

        for cols in (WIDE, NARROW):
            pi.resize(cols)
            assert on_screen(answered_in_the_view, 30), pi.screen
            assert all(len(ln) <= cols for ln in pi.screen.splitlines()), pi.screen
            print(f"\n--- after a steer, still open, at {cols} columns ---\n{pi.screen}")
        pi.keys("Escape")
        assert on_screen(lambda: not pi.shows("esc back"), 30), pi.screen


ACP_AGENT = Path(__file__).parent / "support" / "acpagent.py"


def choose(pi: PiTui, option: str) -> None:
    """Move pi's select to ``option`` (a line of its own on the screen) and take it."""
    lines = pi.capture().splitlines()
    listed = [i for i, ln in enumerate(lines) if ln.strip().lstrip("→ ").strip() == option]
    marked = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("→ ")]
    assert listed and marked, pi.screen
    steps = listed[-1] - marked[-1]
    for _ in range(abs(steps)):
        pi.keys("Down" if steps > 0 else "Up")
    pi.keys("Enter")


def test_a_run_waiting_on_a_person_is_a_notice_and_decided_from_subagents(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    """pi cannot ask before it acts, but a pi parent may delegate to a child that can (here a
    scripted ACP agent that asks to edit two files): each request is a notice where the
    person looks, and `/subagents` decides it. The first request is decided at 80 columns,
    the second at 200; the notices and the decisions are looked at both widths."""
    inside, outside = tmp_path / "project" / "a.txt", tmp_path / "b.txt"
    agent = shlex.join([sys.executable, str(ACP_AGENT), "client", str(inside), str(outside)])
    args = {
        "task": "edit the two files",
        "backend": "acp",
        "acpCommand": agent,
        "approvals": "ask",
        "background": True,
    }
    waits = re.compile(r"subagent job \S+ waits for your decision: Edit")
    with delegating(tmp_path, args) as (parent, _):
        pi = PiTui(tmux, parent, cols=NARROW)
        pi.type("start it")
        assert on_screen(lambda: bool(waits.search(pi.capture())), 90), pi.screen
        print(f"\n--- the notice at {NARROW} columns ---\n{pi.screen}")
        pi.type("/subagents inbox")
        assert on_screen(lambda: pi.shows("Inbox: 1 request wait"), 30), pi.screen
        pi.keys("Enter")  # its one item
        assert on_screen(lambda: pi.shows("Deny (with a reason"), 30), pi.screen
        print(f"\n--- an item's choices at {NARROW} columns ---\n{pi.screen}")
        choose(pi, "Deny (with a reason the child reads)")
        assert on_screen(lambda: pi.shows("Why (the child reads it)"), 30), pi.screen
        pi.type("not that file")
        assert on_screen(lambda: pi.shows("Denied: Edit"), 30), pi.screen
        # The second request: `/subagents` offers the inbox first while something waits.
        assert on_screen(lambda: pi.capture().count("waits for your decision") >= 2, 60)
        pi.resize(WIDE)
        assert len(waits.findall(pi.capture())) >= 2 and pi.shows("Denied: Edit"), pi.screen
        print(f"\n--- the notices at {WIDE} columns ---\n{pi.screen}")
        pi.type("/subagents")
        assert on_screen(lambda: pi.shows("Inbox: 1 request waits for you"), 30), pi.screen
        pi.keys("Enter")
        # The inbox's own list (its title: "wait", where the menu's entry says "waits"; at
        # this width the status widget shows b.txt's path too, so that alone says nothing).
        assert on_screen(lambda: pi.shows("1 request wait for you"), 30), pi.screen
        assert pi.shows("b.txt"), pi.screen
        pi.keys("Enter")
        assert on_screen(lambda: pi.shows("Deny (with a reason"), 30), pi.screen
        print(f"\n--- an item's choices at {WIDE} columns ---\n{pi.screen}")
        choose(pi, "Approve")
        assert on_screen(lambda: pi.shows("Approved: Edit"), 30), pi.screen
        assert on_screen(lambda: bg_ended(pi), 90), pi.screen
        for cols in (WIDE, NARROW):
            pi.resize(cols)
            # (a decision's word stays until the next one's replaces it)
            assert pi.shows("Approved: Edit") and bg_ended(pi), pi.screen
            print(f"\n--- decided, and its end, at {cols} columns ---\n{pi.screen}")
    (end,) = [e for e in parent.agent_events() if e["eventType"] != "subagent:start"]
    assert end["status"] == "completed"
    (run_id,) = end["runIds"]
    result = json.loads((Path(end["runDir"]) / "result.json").read_text())
    assert result["runId"] == run_id
    assert [r["choice"] for r in result["approvals"]] == ["deny", "allow"]
    got = json.loads(result["finalText"])
    assert got["permission_inside"]["outcome"]["optionId"] == "no"
    assert got["permission_outside"]["outcome"]["optionId"] == "yes"
