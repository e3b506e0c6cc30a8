"""Approvals without a child (docs/approvals.md): the rules, the inbox's one-winner claim,
the supervisor's side (a request let through by a rule, denied by the policy, waiting until
decided or timed out, denied when the run ends), the watchdog's pause, and bad input refused
in one line with nothing changed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from support.approvals import FakeSupervisor, write_item
from support.cli import invoke

import subagents
from subagents.core import approve, inbox
from subagents.core.paths import runs_dir
from subagents.errors import UsageError
from subagents.supervisor.approvals import Approvals
from subagents.supervisor.phase import StallWatch
from subagents.types import ApprovalPolicy

# ---- rules ---------------------------------------------------------------------------------


def test_rules_split_on_commas_outside_parentheses() -> None:
    assert approve.split_rules("Read, Bash(git log --format=%h,%s*) ,Edit(src/*)") == [
        "Read",
        "Bash(git log --format=%h,%s*)",
        "Edit(src/*)",
    ]


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ("", "names no rule"),
        ("(ls)", "without a tool's name"),
        ("Bash(ls", "parenthesis is not closed"),
        ("Bash()", "empty pattern"),
    ],
)
def test_bad_rules_are_named(rules: str, problem: str) -> None:
    found = approve.rules_problem(rules)
    assert found is not None and problem in found


def test_a_rule_matches_the_command_or_the_path_inside_the_tree(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    rules = ["Bash(git status*)", "Edit(src/*)", "Read"]
    assert approve.passes(rules, False, "Bash", {"command": "git status -s"}, cwd) == rules[0]
    assert approve.passes(rules, False, "Bash", {"command": "git push"}, cwd) is None
    edit = {"file_path": str(tmp_path / "src" / "a.py")}
    assert approve.passes(rules, False, "Edit", edit, cwd) == rules[1]
    assert approve.passes(rules, False, "Write", edit, cwd) is None  # another tool
    assert approve.passes(rules, False, "Read", {"file_path": "/etc/passwd"}, cwd) == "Read"


def test_edits_in_the_tree_pass_and_edits_outside_it_do_not(tmp_path: Path) -> None:
    cwd = str(tmp_path / "tree")
    (tmp_path / "tree").mkdir()
    inside = {"file_path": str(tmp_path / "tree" / "x.py")}
    outside = {"file_path": str(tmp_path / "x.py")}
    escape = {"file_path": str(tmp_path / "tree" / ".." / "x.py")}
    assert approve.passes([], True, "Write", inside, cwd) == "edits in the tree"
    assert approve.passes([], True, "Write", outside, cwd) is None
    assert approve.passes([], True, "Edit", escape, cwd) is None
    assert approve.passes([], True, "Bash", {"command": "rm -rf x"}, cwd) is None


def test_a_summary_is_one_line_without_control_sequences() -> None:
    line = approve.summary("Bash", {"command": "echo \x1b]0;owned\x07hi\nrm -rf /"})
    assert line == "Bash: echo hi rm -rf /"
    assert len(approve.summary("Bash", {"command": "x" * 5000})) == approve.SUMMARY_LIMIT


# ---- the inbox -----------------------------------------------------------------------------


_item = write_item


def _run_dir(home: Path, run_id: str = "01m8aaaaaa-aaaaaaaa") -> Path:
    run_dir = runs_dir(home) / run_id
    run_dir.mkdir(parents=True)
    return run_dir


def test_of_deciders_racing_on_one_item_exactly_one_wins(isolated_state: Path) -> None:
    run_dir = _run_dir(isolated_state)
    _item(run_dir, "01m8bbbbbb-bbbbbbbb")
    outcomes: list[str] = []
    go = threading.Barrier(8)

    def decider(n: int) -> None:
        go.wait()
        try:
            subagents.decide("01m8bbbbbb", "deny" if n % 2 else "allow", reason=f"d{n}")
            outcomes.append("won")
        except UsageError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=decider, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("won") == 1
    decision = inbox.read_decision(run_dir, "01m8bbbbbb-bbbbbbbb")
    assert decision is not None
    losers = [o for o in outcomes if o != "won"]
    assert all("was decided already" in o and f"({decision['reason']})" in o for o in losers)
    assert subagents.inbox() == []


def test_bad_decisions_are_one_line_and_change_nothing(isolated_state: Path) -> None:
    run_dir = _run_dir(isolated_state)
    _item(run_dir, "01m8cccccc-cccccccc")
    _item(run_dir, "01m8cccccc-dddddddd")
    for args, message in [
        (["approve", "01m8zz"], "no inbox item 01m8zz"),
        (["approve", "not/an/id"], "not an item id"),
        (["deny", "01m8cccccc"], "is ambiguous"),
    ]:
        out = invoke(args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert message in out.stderr
    assert len(subagents.inbox()) == 2
    (run_dir / "result.json").write_text("{}")  # the run ended
    out = invoke(["approve", "01m8cccccc-cccccccc"])
    assert out.returncode == 2 and "has ended" in out.stderr
    assert inbox.read_decision(run_dir, "01m8cccccc-cccccccc") is None
    assert subagents.inbox() == []  # an ended run's items wait for nothing


def test_inbox_lists_what_waits_and_json_says_it_whole(isolated_state: Path) -> None:
    run_dir = _run_dir(isolated_state)
    _item(run_dir, "01m8eeeeee-eeeeeeee", summary="Bash: rm \x1b[2Jall")
    shown = invoke(["inbox"])
    assert shown.returncode == 0 and "01m8eeeeee-eeeeeeee  claude" in shown.stdout
    assert "\x1b" not in shown.stdout and "Bash: rm all" in shown.stdout
    assert '"tool": "Bash"' in invoke(["inbox", "--json"]).stdout
    (run_dir.parent / "01m8ffffff-ffffffff").mkdir()
    assert "nothing waits" in invoke(["inbox", "01m8ffffff"]).stdout
    unknown = invoke(["inbox", "01m8zzzzzz"])
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1


# ---- the supervisor's side -----------------------------------------------------------------


_Sup = FakeSupervisor


def _policy(**kw: Any) -> ApprovalPolicy:
    return {"policy": "ask", "rules": [], "editsInTree": False, "timeout": 60.0, **kw}


def test_a_waiting_request_is_answered_once_decided(isolated_state: Path) -> None:
    sup = _Sup(_run_dir(isolated_state))
    approvals = Approvals(sup, _policy())
    answers: list[tuple[str, str | None]] = []
    approvals.ask("Bash", {"command": "make"}, lambda c, why, _a: answers.append((c, why)))
    (item,) = inbox.pending(sup.run_dir)
    assert answers == [] and sup.watch.paused_at is not None
    subagents.decide(item["id"], "always")
    approvals.poll()
    assert answers == [("always", None)] and sup.watch.paused_at is None
    # "always": the same tool passes for the rest of the run, unasked.
    approvals.ask("Bash", {"command": "make install"}, lambda c, why, _a: answers.append((c, why)))
    assert answers[-1] == ("allow", None) and inbox.pending(sup.run_dir) == []
    assert [e.get("by") for e in sup.events if e["state"] == "decided"][-1] == "rule"


def test_an_item_keeps_a_large_input_bounded(isolated_state: Path) -> None:
    sup = _Sup(_run_dir(isolated_state))
    big = {"file_path": "/tmp/x", "content": "x" * 200_000}
    Approvals(sup, _policy()).ask("Write", big, lambda c, why, _a: None)
    (item,) = inbox.pending(sup.run_dir)
    assert item["input"] == {"file_path": "/tmp/x", "truncated": True}


def test_a_request_left_when_the_run_ends_is_denied(isolated_state: Path) -> None:
    sup = _Sup(_run_dir(isolated_state))
    approvals = Approvals(sup, _policy())
    answers: list[tuple[str, str | None]] = []
    approvals.ask("Bash", {"command": "make"}, lambda c, why, _a: answers.append((c, why)))
    records = approvals.finish()
    assert answers == [("deny", "denied by subagents: the run ended before a decision")]
    assert records[0]["choice"] == "deny" and records[0]["by"] == "subagents"


def test_the_watchdog_takes_the_wait_off_its_clocks() -> None:
    watch = StallWatch(10.0, 20.0, 0.0)
    watch.tool_started("t1", 5.0)
    watch.pause(6.0)
    assert watch.due(1000.0) is None and watch.next_point() is None
    watch.resume(106.0)  # waited 100 s
    assert watch.tools_open["t1"] == 105.0 and watch.next_point() == 125.0
    assert watch.due(124.0) is None and watch.due(125.0) == "tool_timeout"


# ---- bad input at the start ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "pi", "--approvals", "ask"], "pi has no way to ask before it acts"),
        (["--backend", "gemini", "--approvals", "parent"], "gemini has no way to ask"),
        (["--backend", "claude", "--approve", "Bash"], "only with --approvals ask"),
        (["--backend", "claude", "--approvals", "ask", "--approve", "Bash("], "not closed"),
    ],
)
def test_a_policy_that_cannot_be_kept_is_refused_in_one_line(
    args: list[str], message: str, isolated_state: Path
) -> None:
    out = invoke(["run", *args, "do it"])
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert message in out.stderr
    assert not runs_dir(isolated_state).exists() or not any(runs_dir(isolated_state).iterdir())


def test_an_agents_frontmatter_gives_its_runs_a_policy(tmp_path: Path) -> None:
    agents = tmp_path / "config" / "agents"
    agents.mkdir(parents=True)
    (agents / "careful.md").write_text(
        "---\nname: careful\ndescription: asks first\nbackend: pi\napprovals: ask\n"
        "approve: Bash(git status*)\n---\nWork.\n"
    )
    (agents / "broken.md").write_text(
        "---\nname: broken\ndescription: bad rules\nbackend: claude\napprove: Bash(\n---\nWork.\n"
    )
    out = invoke(["run", "--agent", "careful", "do it"])
    assert out.returncode == 2 and "pi has no way to ask before it acts" in out.stderr
    out = invoke(["run", "--agent", "broken", "do it"])
    assert out.returncode == 2 and "parenthesis is not closed" in out.stderr


def test_an_inbox_that_cannot_be_written_denies_at_once(isolated_state: Path) -> None:
    sup = _Sup(_run_dir(isolated_state))
    (sup.run_dir / inbox.INBOX).write_text("not a directory")
    answers: list[tuple[str, str | None]] = []
    Approvals(sup, _policy()).ask(
        "Bash", {"command": "make"}, lambda c, w, _a: answers.append((c, w))
    )
    ((choice, why),) = answers
    assert choice == "deny" and why is not None and "the inbox could not be written" in why
    assert sup.watch.paused_at is None  # nothing waits
