"""Approvals' policy from config and the parent's bound (docs/approvals.md), in process: the
config's ``approvals``/``approve``/``approval_timeout`` as every run's default, under the
step's and the agent's; a project file that would loosen the user's policy refused in one
line; ``parent_may_approve`` bounding what the parent (the MCP tool's decider) may allow,
an item outside it left for a person; and a question's answers checked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from support.approvals import FakeSupervisor

import subagents
from subagents.config import Settings, load_settings
from subagents.core import inbox, questions
from subagents.core.paths import runs_dir
from subagents.errors import ConfigError, UsageError
from subagents.jobs.planning import plan
from subagents.jobs.spec import JobSpec, Step
from subagents.runs import RunRequest
from subagents.service import decide
from subagents.supervisor.approvals import Approvals
from subagents.types import ApprovalPolicy, Question

# ---- the config's default ------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "config" / "agents").mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(tmp_path),
        "SUBAGENTS_CONFIG_DIR": str(tmp_path / "config"),
        "SUBAGENTS_CLAUDE_BIN": sys.executable,
        "PATH": "/usr/bin:/bin",
    }


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_user_config_and_the_environment_set_every_runs_policy(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _write(
        tmp_path / "config" / "config.toml",
        'approvals = "ask"\napprove = "Read,Bash(git status*)"\napproval_timeout = 90\n',
    )
    s = load_settings(tmp_path, env)
    assert (s.approvals, s.approve, s.approval_timeout) == ("ask", "Read,Bash(git status*)", 90)
    s = load_settings(tmp_path, {**env, "SUBAGENTS_APPROVALS": "deny"})
    assert s.approvals == "deny"
    with pytest.raises(
        ConfigError,
        match=r"SUBAGENTS_APPROVALS: must be .auto., .ask., .deny. or .parent., not .sometimes.",
    ):
        load_settings(tmp_path, {**env, "SUBAGENTS_APPROVALS": "sometimes"})
    with pytest.raises(ConfigError, match=r"SUBAGENTS_APPROVE: .*not closed"):
        load_settings(tmp_path, {**env, "SUBAGENTS_APPROVE": "Bash(ls"})
    # Rules without a policy that asks narrow nothing: said, not ignored.
    _write(tmp_path / "config" / "config.toml", 'approve = "Read"\n')
    with pytest.raises(ConfigError, match="approve: rules narrow approvals ask"):
        load_settings(tmp_path, env)


@pytest.mark.parametrize(
    ("users", "projects", "problem"),
    [
        ('approvals = "ask"', 'approvals = "auto"', "'auto' is looser than 'ask'"),
        ('approvals = "ask"', 'approvals = "parent"', "'parent' is looser than 'ask'"),
        ('approvals = "deny"', 'approvals = "ask"', "'ask' is looser than 'deny'"),
        ('approvals = "ask"', 'approve = "Bash"', "a project's rules would let through"),
        ("", 'parent_may_approve = "Bash"', "not allowed in a project config"),
    ],
)
def test_a_project_may_not_loosen_the_users_policy(
    tmp_path: Path, users: str, projects: str, problem: str
) -> None:
    env = _env(tmp_path)
    _write(tmp_path / "config" / "config.toml", users + "\n")
    project = tmp_path / "repo"
    _write(project / ".subagents" / "config.toml", projects + "\n")
    with pytest.raises(ConfigError, match=problem) as raised:
        load_settings(project, env)
    assert "\n" not in str(raised.value) and str(project) in str(raised.value)


def test_a_project_may_make_the_policy_stricter(tmp_path: Path) -> None:
    env = _env(tmp_path)
    project = tmp_path / "repo"
    _write(project / ".subagents" / "config.toml", 'approvals = "ask"\napprove = "Read"\n')
    s = load_settings(project, env)
    assert (s.approvals, s.approve) == ("ask", "Read")  # the user's is auto: anything is stricter
    _write(tmp_path / "config" / "config.toml", 'approvals = "parent"\n')
    _write(project / ".subagents" / "config.toml", 'approvals = "deny"\n')
    assert load_settings(project, env).approvals == "deny"


def _planned(tmp_path: Path, s: Settings, *steps: Step) -> list[RunRequest]:
    spec = JobSpec(mode="parallel", steps=list(steps))
    return plan(spec, s, cwd=tmp_path, env=_env(tmp_path)).requests


def test_the_step_comes_before_the_agent_and_the_agent_before_the_config(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    (Path(env["SUBAGENTS_CONFIG_DIR"]) / "agents" / "careful.md").write_text(
        "---\nname: careful\ndescription: asks\nbackend: claude\napprovals: deny\n"
        "approve: Read\n---\nWork.\n"
    )
    s = Settings(
        bins={"claude": sys.executable},
        default_backend="claude",
        approvals="ask",
        approve="Bash(git status*)",
        approval_timeout=90.0,
    )
    plain, step_auto, agents, steps = _planned(
        tmp_path,
        s,
        Step(task="a"),
        Step(task="b", approvals="auto"),
        Step(task="c", agent="careful"),
        Step(task="d", agent="careful", approvals="parent", approve="Edit"),
    )
    assert (plain.approvals, plain.approve, plain.approval_timeout) == (
        "ask",
        "Bash(git status*)",
        90.0,
    )
    # A step's auto is today's behaviour: the config's rules and timeout do not follow it.
    assert (step_auto.approvals, step_auto.approve, step_auto.approval_timeout) == (
        "auto",
        None,
        None,
    )
    assert (agents.approvals, agents.approve) == ("deny", "Read")
    assert (steps.approvals, steps.approve) == ("parent", "Edit")


# ---- the parent's bound --------------------------------------------------------------------


_Sup = FakeSupervisor


def _sup(home: Path) -> _Sup:
    run_dir = runs_dir(home) / "01m8aaaaaa-aaaaaaaa"
    run_dir.mkdir(parents=True)
    return _Sup(run_dir)


def _parent(**kw: Any) -> ApprovalPolicy:
    policy: ApprovalPolicy = {"policy": "parent", "rules": [], "editsInTree": False}
    return {**policy, "timeout": 60.0, "parentMay": ["Bash(git *)"], **kw}


def test_the_parent_may_allow_only_what_the_users_bound_covers(isolated_state: Path) -> None:
    sup = _sup(isolated_state)
    answers: list[tuple[str, str | None]] = []
    approvals = Approvals(sup, _parent(rules=["Bash(rm *)"]))
    keep = lambda c, why, _a: answers.append((c, why))  # noqa: E731
    approvals.ask("Bash", {"command": "git push"}, keep)
    # A rule the run was given (the parent may have given it) passes nothing outside the bound.
    approvals.ask("Bash", {"command": "rm -rf build"}, keep)
    inside, outside = inbox.pending(sup.run_dir)
    assert (inside["policy"], outside["policy"]) == ("parent", "ask")
    assert [e.get("waitsFor") for e in sup.events] == ["parent", "person"]

    with pytest.raises(UsageError, match="outside what the parent may allow") as refused:
        decide(outside["id"], "allow", by="parent")
    assert "(parent_may_approve: Bash(git *)); it waits for a person" in str(refused.value)
    with pytest.raises(UsageError, match="the parent may allow once only"):
        decide(inside["id"], "always", by="parent")
    assert len(inbox.pending(sup.run_dir)) == 2  # nothing changed
    decide(inside["id"], "allow", by="parent")
    decide(outside["id"], "allow")  # a person may
    approvals.poll()
    assert answers == [("allow", None), ("allow", None)]


def test_the_parent_may_deny_anything_and_answer_a_question(isolated_state: Path) -> None:
    sup = _sup(isolated_state)
    approvals = Approvals(sup, _parent())
    got: list[tuple[str, list[str] | None]] = []
    approvals.ask("Bash", {"command": "rm -rf /"}, lambda c, _w, a: got.append((c, a)))
    asked = {
        "questions": [{"question": "Which?", "header": "", "options": [], "multiSelect": False}]
    }
    approvals.ask("AskUserQuestion", asked, lambda c, _w, a: got.append((c, a)))
    outside, question = inbox.pending(sup.run_dir)
    assert question["policy"] == "parent" and question["kind"] == "question"
    decide(outside["id"], "deny", by="parent")
    decide(question["id"], "answer", by="parent", answers=["the left one"])
    approvals.poll()
    assert got == [("deny", None), ("answer", ["the left one"])]
    record = approvals.records[1]
    assert record["answers"] == ["the left one"] and record["kind"] == "question"


def test_the_bound_is_the_users_setting_not_the_runs(isolated_state: Path) -> None:
    from subagents.backends import get_backend
    from subagents.runs.approvalcheck import approval_policy

    req = RunRequest(task="t", backend="claude", approvals="parent")
    bounded = approval_policy(get_backend("claude"), req, Settings(parent_may_approve="Read"))
    assert bounded is not None and bounded["parentMay"] == ["Read"]
    unbounded = approval_policy(get_backend("claude"), req, Settings())
    assert unbounded is not None and "parentMay" not in unbounded
    asking = RunRequest(task="t", backend="claude", approvals="ask")
    policy = approval_policy(get_backend("claude"), asking, Settings(parent_may_approve="Read"))
    assert policy is not None and "parentMay" not in policy  # (a person decides anyway)


# ---- a question's answers ------------------------------------------------------------------

COLOURS: Question = {
    "question": "Which colours?",
    "header": "Colours",
    "options": [{"label": "Red", "description": ""}, {"label": "Blue", "description": ""}],
    "multiSelect": True,
}


def test_an_option_is_picked_by_its_number() -> None:
    assert questions.pick(COLOURS, "2") == "Blue"
    assert questions.pick(COLOURS, "1, 2") == "Red, Blue"  # claude reads several so
    with pytest.raises(ValueError, match="no option '3': choose 1 to 2"):
        questions.pick(COLOURS, "3")
    with pytest.raises(ValueError, match="takes one option"):
        questions.pick({**COLOURS, "multiSelect": False}, "1,2")


def test_answers_must_fit_the_questions() -> None:
    assert questions.answers_problem([COLOURS], ["Red"]) is None
    assert "give one answer for each" in str(questions.answers_problem([COLOURS], []))
    assert "answer 1 is empty" in str(questions.answers_problem([COLOURS], [" "]))


def test_a_question_is_answered_not_approved_and_an_approval_is_not_answered(
    isolated_state: Path,
) -> None:
    sup = _sup(isolated_state)
    approvals = Approvals(sup, {**_parent(), "policy": "ask"})
    asked = {"questions": [COLOURS]}
    approvals.ask("AskUserQuestion", asked, lambda *_: None)
    approvals.ask("Bash", {"command": "make"}, lambda *_: None)
    question, request = inbox.pending(sup.run_dir)
    with pytest.raises(UsageError, match="is a question: answer it"):
        subagents.decide(question["id"], "allow")
    with pytest.raises(UsageError, match="it asks 1 question: give one answer"):
        subagents.decide(question["id"], "answer", answers=["Red", "Blue"])
    with pytest.raises(UsageError, match="is not a question: approve or deny it"):
        subagents.decide(request["id"], "answer", answers=["yes"])
    with pytest.raises(UsageError, match="answers go only with the choice 'answer'"):
        subagents.decide(request["id"], "allow", answers=["yes"])
    assert len(inbox.pending(sup.run_dir)) == 2


def test_codexs_question_is_asked_and_answered_in_its_own_words() -> None:
    from subagents.backends import codexask

    params = {"questions": [{"id": "c", "header": "H", "question": "Which?", "options": None}]}
    tool, asked = codexask.request(codexask.QUESTION, params, None)
    assert tool == "AskUserQuestion"
    assert questions.questions_of(tool, asked) == [
        {"question": "Which?", "header": "H", "options": [], "multiSelect": False}
    ]
    ids = codexask.question_ids(params)
    assert codexask.answer(codexask.QUESTION, "answer", ids, ["this"]) == {
        "answers": {"c": {"answers": ["this"]}}
    }
    assert codexask.answer(codexask.QUESTION, "deny", ids) == {"answers": {}}


def test_a_question_for_the_parent_says_how_to_answer_it() -> None:
    from subagents.core import events as ev
    from subagents.present.progress import approval_words

    asked = ev.approval(
        "01m8x", "AskUserQuestion", "Which? (A | B)", waits_for="parent", kind="question"
    )
    assert approval_words(asked) == (
        "⏸ waiting for your answer (subagent_decide, choice answer, item 01m8x): Which? (A | B)"
    )
    answered = ev.approval(
        "01m8x", "AskUserQuestion", "Which? (A | B)", "answer", "ann", kind="question"
    )
    answered["answers"] = ["B"]
    assert approval_words(answered) == "✓ answered by ann: Which? (A | B) → B"
    unanswered = ev.approval(
        "01m8x",
        "AskUserQuestion",
        "Which?",
        "deny",
        "timeout",
        "no decision within 4 s",
        kind="question",
    )
    assert (
        approval_words(unanswered) == "✗ not answered by timeout (no decision within 4 s): Which?"
    )


def test_only_runs_with_an_open_inbox_are_looked_at(isolated_state: Path) -> None:
    sup = _sup(isolated_state)
    approvals = Approvals(sup, {**_parent(), "policy": "ask"})
    approvals.ask("Bash", {"command": "make"}, lambda *_: None)
    marker = isolated_state / inbox.OPEN / sup.run_dir.name
    assert marker.exists() and inbox.open_runs(runs_dir(isolated_state)) == [sup.run_dir]
    approvals.finish()  # the run ends: its name goes
    assert not marker.exists() and subagents.inbox() == []
    # A supervisor that died leaves its name: passed over (and removed) once the run has a
    # result (written by whoever recovered the run).
    other = runs_dir(isolated_state) / "01m8zzzzzz-zzzzzzzz"
    other.mkdir()
    Approvals(_Sup(other), {**_parent(), "policy": "ask"}).ask("Read", {}, lambda *_: None)
    assert len(subagents.inbox()) == 1
    (other / "result.json").write_text("{}")
    assert subagents.inbox() == [] and not (isolated_state / inbox.OPEN / other.name).exists()
