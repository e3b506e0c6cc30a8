"""The supervisor's state machine, in process: its phases and their moves, why a run stops,
its deadlines, the outcome of an ended run, and what a normalizer's ``feed`` returns."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from subagents.backends import Fed, get_backend
from subagents.errors import PhaseError, SubagentsError
from subagents.supervisor.outcome import Ended, decide
from subagents.supervisor.phase import MAX_WAIT, NEXT, Deadlines, Phase, StallWatch
from subagents.supervisor.spec import RunSpec

if TYPE_CHECKING:
    from subagents.supervisor.phase import PhaseName
    from subagents.types import JsonObject

PHASES: list[PhaseName] = list(NEXT)


def at(name: PhaseName) -> Phase:
    """A phase moved to ``name`` the way a run gets there."""
    path: dict[PhaseName, list[PhaseName]] = {
        "starting": [],
        "running": ["running"],
        "at_rest": ["running", "at_rest"],
        "grace": ["running", "at_rest", "grace"],
        "stopping": ["running", "stopping"],
        "draining": ["running", "draining"],
        "finished": ["running", "draining", "finished"],
    }
    phase = Phase()
    for step in path[name]:
        phase.to(step)
    return phase


def test_a_run_goes_through_its_phases_in_order() -> None:
    phase = Phase()
    assert (phase.name, phase.cause, phase.terminal) == ("starting", None, False)
    seen = [phase.name]
    phase.to("running")
    seen.append(phase.name)
    phase.rest()  # the answer
    seen.append(phase.name)
    phase.to("grace")  # completion armed
    seen.append(phase.name)
    phase.exited()
    seen.append(phase.name)
    phase.to("finished")
    seen.append(phase.name)
    assert seen == ["starting", "running", "at_rest", "grace", "draining", "finished"]
    assert phase.terminal and not phase.stopped


@pytest.mark.parametrize(
    ("start", "to"),
    [(a, b) for a, b in itertools.product(PHASES, PHASES) if b not in NEXT[a]],
)
def test_every_move_not_in_the_table_raises(start: PhaseName, to: PhaseName) -> None:
    phase = at(start)
    with pytest.raises(PhaseError, match=f"from {start} to {to}"):
        phase.to(to)
    assert phase.name == start  # a refused move changes nothing


@pytest.mark.parametrize(("start", "to"), [(a, b) for a in PHASES for b in NEXT[a]])
def test_every_move_in_the_table_is_taken(start: PhaseName, to: PhaseName) -> None:
    phase = at(start)
    phase.to(to)
    assert phase.name == to


def test_a_phase_error_is_a_subagents_error() -> None:
    assert issubclass(PhaseError, SubagentsError)


def test_nothing_follows_finished_and_everything_reaches_it() -> None:
    assert NEXT["finished"] == ()
    reach = {"finished"}
    while True:  # the phases from which finished can be reached
        more = {a for a in PHASES if set(NEXT[a]) & reach} - reach
        if not more:
            break
        reach |= more
    assert reach == set(PHASES)


def test_the_first_cause_wins() -> None:
    phase = at("running")
    phase.stop_for("timeout")
    phase.stop_for("aborted")
    assert phase.cause == "timeout" and phase.stopped


def test_no_cause_after_an_answer_but_a_budget() -> None:
    """A run that answered completes, whatever stops its child after; a budget reached is
    still named (the limit record says so)."""
    phase = at("running")
    phase.rest()
    for cause in ("timeout", "aborted", "stalled", "tool_timeout"):
        phase.stop_for(cause)  # type: ignore[arg-type]
        assert phase.cause is None
    phase.stop_for("limit")
    assert phase.cause == "limit"


def test_going_on_disarms_completion() -> None:
    phase = at("grace")
    phase.go_on()
    assert phase.name == "running" and not phase.terminal
    phase.rest()
    assert phase.name == "at_rest"
    phase.go_on()  # a follow-up sent at rest
    assert phase.name == "running"


def test_a_stopping_or_draining_run_only_notes_the_turn() -> None:
    for name in ("stopping", "draining"):
        phase = at(name)
        phase.rest()
        assert phase.name == name and phase.terminal
        phase.go_on()
        assert phase.name == name and not phase.terminal


def test_a_signal_after_the_child_exited_leaves_it_draining() -> None:
    phase = at("draining")
    phase.signalled()  # its group signalled: a grandchild may hold stdout
    assert phase.name == "draining"
    phase.exited()
    assert phase.name == "draining"
    running = at("grace")
    running.signalled()
    assert running.name == "stopping"
    with pytest.raises(PhaseError):
        at("starting").signalled()


def test_deadlines_wake_at_the_soonest() -> None:
    d = Deadlines(100.0, None, None, None)
    assert d.next_wakeup(100.0) is None  # nothing to wait for
    d.grace, d.drain = 103.0, 101.5
    assert d.next_wakeup(100.0) == 1.5
    assert d.next_wakeup(100.0, 100.5, None) == 0.5  # another's sooner (the endpoint)
    assert d.next_wakeup(110.0) == 0.0  # passed: at once
    assert Deadlines.passed(d.grace, 103.0) and not Deadlines.passed(None, 1e9)


def test_a_timeout_is_set_from_the_start_and_waited_a_day_at_a_time() -> None:
    d = Deadlines(10.0, 5.0, None, None)
    assert d.timeout == 15.0
    assert Deadlines(10.0, 0, None, None).timeout is None  # 0: no timeout
    d.timeout = 10.0 + 10 * MAX_WAIT
    assert d.next_wakeup(10.0) == MAX_WAIT


def test_the_watchdog_is_waited_for_only_while_nothing_is_being_stopped() -> None:
    d = Deadlines(0.0, None, 30.0, None)
    assert d.next_wakeup(0.0) == 30.0
    d.kill = 100.0
    assert d.next_wakeup(0.0) == 100.0
    d.abort = 50.0
    assert d.next_wakeup(0.0) == 50.0


def test_a_new_child_starts_with_its_own_grace_kill_and_drain() -> None:
    d = Deadlines(0.0, 60.0, None, None)
    d.grace, d.kill, d.drain, d.abort = 1.0, 2.0, 3.0, 4.0
    d.new_child()
    assert (d.grace, d.kill, d.drain) == (None, None, None)
    assert (d.timeout, d.abort) == (60.0, 4.0)  # the run's, not the child's


def test_stall_watch_once_per_silence_and_never_during_a_tool_call() -> None:
    w = StallWatch(10.0, 5.0, 0.0)
    assert w.due(9.0) is None and w.next_point() == 10.0
    assert w.due(10.0) == "stalled"
    assert w.due(11.0) is None and w.next_point() is None  # said once
    w.heard(20.0)
    w.tool_started("c1", 20.0)
    assert w.due(24.0) is None and w.next_point() == 25.0
    assert w.due(25.0) == "tool_timeout"
    w.tool_ended("c1")
    assert w.next_point() == 30.0


def spec(**fields: object) -> RunSpec:
    base: dict[str, object] = {
        "runId": "r",
        "backend": "pi",
        "argv": ["pi"],
        "cwd": "/",
        "task": "t",
    }
    return RunSpec(**{**base, **fields})


def ended(terminal: bool = False, **fields: object) -> Ended:
    norm = get_backend("pi").normalizer()
    norm.failed = bool(fields.pop("failed", False))
    norm.stop_reason = "stop" if terminal else None
    tail = fields.pop("tail", lambda: pytest.fail("stderr read when not needed"))
    return Ended(spec(timeout=5), norm, tail, terminal=terminal, **fields)  # type: ignore[arg-type]


def test_decide_names_the_supervisors_cause() -> None:
    assert decide(ended(cause="timeout")) == ("timeout", "timed out after 5s")
    assert decide(ended(cause="aborted", abort_signal="SIGTERM")) == (
        "aborted",
        "aborted: the supervisor received SIGTERM",
    )
    assert decide(ended(cause="aborted", abort_why="process 7 ended")) == (
        "aborted",
        "aborted: process 7 ended",
    )


def test_decide_an_answer_before_the_budget_completes_the_run() -> None:
    assert decide(ended(True, limit_error="the turn limit of 3 turns is reached")) == (
        "completed",
        None,
    )
    assert decide(ended(limit_error="the turn limit of 3 turns is reached")) == (
        "failed",
        "the turn limit of 3 turns is reached",
    )


def test_decide_without_an_answer_reads_stderr_only_for_an_exit_code() -> None:
    assert decide(ended(sig="SIGKILL")) == (
        "failed",
        "pi was killed by SIGKILL before a final answer",
    )
    assert decide(ended(exit_code=0)) == ("failed", "pi exited without a final answer")
    status, error = decide(ended(exit_code=3, tail=lambda: "warn\nboom\n\n"))
    assert (status, error) == ("failed", "pi exited with code 3: boom")


def test_fed_is_the_events_with_what_else_a_line_did() -> None:
    fed = Fed()
    assert fed == [] and fed.terminal is None and fed.writes == () and fed.receipts == ()
    fed.write(b"a\n")
    fed.receipt("m1", "queued")
    other = Fed([{"type": "notice"}])  # type: ignore[list-item]
    assert other.writes == () and other.receipts == ()  # nothing shared between lines
    assert fed.writes == (b"a\n",) and fed.receipts == (("m1", "queued", None),)


def test_feed_reports_the_turns_state_and_a_started_turn_clears_it() -> None:
    norm = get_backend("claude").normalizer()
    fed = norm.feed({"type": "result", "subtype": "success", "result": "hi", "usage": {}})
    assert fed.terminal is True and [e["type"] for e in fed][-1] == "usage"
    turn = norm.follow_up("m1", "more")
    assert turn.terminal is False and not norm.terminal and turn.writes
    assert norm.held_input() is not None  # the follow-up not echoed yet: claude holds it
    fed = norm.feed({"type": "user", "isReplay": True, "message": {"content": "more"}})
    assert fed.receipts == (("m1", "delivered", None),) and fed.terminal is False


def test_the_conformance_kit_names_a_feed_that_returns_no_fed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A normalizer written to the old interface (a list of events) is found before any
    supervisor runs it."""
    from subagents.backends.pi import PiBackend, PiNormalizer
    from subagents.testing import conformance

    class OldNormalizer(PiNormalizer):
        def feed(self, obj: JsonObject) -> Fed:
            return list(super().feed(obj))  # type: ignore[return-value]

    class OldBackend(PiBackend):
        def normalizer(self) -> OldNormalizer:
            return OldNormalizer()

    monkeypatch.setattr(conformance, "get_backend", lambda name: OldBackend())
    stream = tmp_path / "s.jsonl"
    stream.write_text('{"type":"agent_start"}\n')
    with pytest.raises(TypeError, match=r"OldNormalizer\.feed returned a list, not a Fed"):
        conformance.normalize_stream("old", stream)
    problems = conformance.check_backend("old", [conformance.Case(stream, "completed")], tmp_path)
    assert problems == ["s.jsonl: OldNormalizer.feed returned a list, not a Fed"]
