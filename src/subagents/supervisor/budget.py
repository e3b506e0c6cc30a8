"""A run's budget: the most model turns, tokens and cost it may use, counted from its live
usage, and what to do at the limit (docs/live-control.md).

Where the child takes messages (``graceful``) the limit is met with a wrap-up message and a
grace of some turns, then an abort; elsewhere with an abort. Tokens and cost are met one
turn early where there is a wrap-up: when the next turn, as big as the last, would reach the
limit, so the child's answer lands near it rather than a whole turn past. Standard library
only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.supervisor.phase import BudgetState
    from subagents.types import LimitAction, LimitKind, LimitRecord, Limits, LimitScope, Usage

KINDS: tuple[LimitKind, ...] = ("turns", "tokens", "cost")
# What each action makes of the budget's state.
STATE_AFTER: dict[LimitAction, BudgetState] = {
    "wrap-up": "wrapping",
    "abort": "aborting",
    "stop": "stopped",
}
NAMES = {"turns": "turn", "tokens": "token", "cost": "cost"}


def describe(kind: str, value: float) -> str:
    """``3 turns``, ``1200 tokens``, ``$0.50``."""
    if kind == "cost":
        return f"${value:.2f}" if value >= 0.01 else f"${value:.4g}"
    number = int(value)
    return f"{number} {kind[:-1] if number == 1 else kind}"


def used_of(kind: str, turns: int, usage: Usage) -> float | None:
    if kind == "turns":
        return turns
    if kind == "tokens":
        return usage["totalTokens"]
    return usage["cost"]


class Budget:
    """``check`` after each report of the child's: ``"wrap-up"`` (ask it to finish),
    ``"abort"`` (stop it) or None. ``record`` says what was reached and done."""

    def __init__(
        self,
        limits: Limits,
        *,
        grace: int,
        graceful: bool,
        job: dict[str, float] | None = None,
    ) -> None:
        self.limits = limits
        self.grace = grace
        self.graceful = graceful
        # The kinds whose limit is what the run's job had left (a chain's later step), with
        # what the job had used before this run: the record speaks of the job's budget.
        self.job = dict(job or {})
        self._forced = False  # the job said its budget was reached (its figures are kept)
        self.by_cli = False  # the CLI's own bound behind this budget stopped the run
        self.record: LimitRecord | None = None
        self.state: BudgetState = "ok"
        # The turn count the wrap-up's grace runs from: when it was sent, then when the
        # child took it in (a turn already under way when it was sent did not see it).
        self._wrap_turn = 0
        self._wrap_seen = False
        # Tokens and cost as last seen, and at the end of the turn before (to size a turn).
        self._turns = 0
        self._now: dict[str, float] = {}
        self._before: dict[str, float] = {}
        self._cost_unknown_noted = False

    def check(self, turns: int, usage: Usage, terminal: bool) -> str | None:
        """What the limit asks for now that the child has done ``turns`` turns and used
        ``usage``; ``terminal``: its last turn was its answer (nothing to wrap up)."""
        if turns != self._turns:
            self._turns, self._before = turns, self._now
        self._now = {
            k: v for k in ("tokens", "cost") if (v := used_of(k, turns, usage)) is not None
        }
        if self.state != "ok":
            if self.state == "wrapping" and not terminal and self._grace_over(turns):
                return self._act("abort", turns, usage)
            return None
        if terminal:
            return None
        for kind in KINDS:
            limit = self.limits.get(kind)
            used = used_of(kind, turns, usage)
            if limit is None or used is None:
                continue
            # Abort-only: at the limit. With a wrap-up: when the next turn would reach it.
            ahead = 0.0
            if self.graceful and kind != "turns":
                ahead = used - self._before.get(kind, 0.0)
            if used + ahead >= limit:
                self._reached(kind, limit)
                return self._act("wrap-up" if self.graceful else "abort", turns, usage)
        return None

    def _grace_over(self, turns: int) -> bool:
        # Not yet taken in: one more turn (the one under way when it was sent) before the
        # grace counts, so a CLI that never says so still ends at the limit.
        grace = self.grace if self._wrap_seen else self.grace + 1
        return turns - self._wrap_turn >= grace

    def wrap_up_taken(self, turns: int) -> None:
        """The child took the wrap-up message in after ``turns`` turns: its grace runs from
        there (a job's limit is met at any moment, often while a turn is under way)."""
        if self.state == "wrapping" and not self._wrap_seen:
            self._wrap_seen = True
            self._wrap_turn = max(self._wrap_turn, turns)

    def cost_unknown(self, usage: Usage) -> bool:
        """True once: a cost limit is set and the child reported usage without a cost (an
        unpriced model), so that limit cannot be counted. A cost of 0 for tokens used is
        one too: pi reports 0 for a model its ``models.json`` gives no price."""
        unpriced = usage["cost"] is None or (usage["cost"] == 0 and usage["totalTokens"] > 0)
        if "cost" not in self.limits or not unpriced or self._cost_unknown_noted:
            return False
        self._cost_unknown_noted = True
        return True

    def force(
        self, kind: LimitKind, limit: float, used: float, turns: int, usage: Usage
    ) -> str | None:
        """The job's budget was reached (the job says so): act on it now, unless this run's
        own is already being acted on."""
        if self.state != "ok":
            return None
        self._forced = True
        # The job's limit is already past: one turn to answer the wrap-up, no more.
        self.grace = min(self.grace, 1)
        self.record = {
            "kind": kind,
            "limit": limit,
            "used": used,
            "action": "wrap-up",
            "scope": "job",
        }
        return self._act("wrap-up" if self.graceful else "abort", turns, usage)

    def spent(self, turns: int, usage: Usage) -> tuple[LimitKind, float] | None:
        """A limit reached (or acted on) by now: its kind and the run's limit; None while
        none is."""
        if self.record is not None:
            kind = self.record["kind"]
            return kind, self.limits.get(kind, self.record["limit"])
        for kind in KINDS:
            limit = self.limits.get(kind)
            used = used_of(kind, turns, usage)
            if limit is not None and used is not None and used >= limit:
                return kind, limit
        return None

    def stop(self, spent: tuple[LimitKind, float], turns: int, usage: Usage) -> LimitRecord:
        """The limit was reached at an answer: the run ends there (``stop``)."""
        self._reached(*spent)
        self._act("stop", turns, usage)
        assert self.record is not None
        return self.record

    def stopped_by_cli(self, kind: str, turns: int, usage: Usage) -> bool:
        """The CLI's own bound (passed behind this budget) stopped the run: True when that
        is news (the budget had not acted yet)."""
        for known in KINDS:
            limit = self.limits.get(known)
            if known == kind and limit is not None and self.state in ("ok", "wrapping"):
                if self.record is None:
                    self._reached(known, limit)
                self.by_cli = True
                self._act("abort", turns, usage)
                return True
        return False

    def _reached(self, kind: LimitKind, limit: float) -> None:
        scope: LimitScope = "job" if kind in self.job else "run"
        limit += self.job.get(kind, 0)
        self.record = {"kind": kind, "limit": limit, "used": 0, "action": "wrap-up", "scope": scope}

    def _act(self, action: LimitAction, turns: int, usage: Usage) -> str:
        assert self.record is not None
        self.record["action"] = action
        self.state = STATE_AFTER[action]
        self._wrap_turn = turns
        self.settle(turns, usage)
        return action

    def settle(self, turns: int, usage: Usage) -> None:
        """What was used, as of now (the run's end). A job's budget keeps the job's total
        from when it was reached (the job counts it)."""
        if self.record is None or self._forced:
            return
        kind = self.record["kind"]
        used = used_of(kind, turns, usage)
        if used is not None:
            # (a sum of costs in floating point: 0.12000000000000001 is 0.12)
            self.record["used"] = round(used + self.job.get(kind, 0), 10)

    def message(self) -> str | None:
        """The error message of a run this budget stopped."""
        record = self.record
        if record is None or record["action"] != "abort":
            return None
        kind = record["kind"]
        whose = "its job's" if record["scope"] == "job" else "the"
        text = (
            f"stopped at {whose} {NAMES[kind]} limit of {describe(kind, record['limit'])}:"
            f" {describe(kind, record['used'])} used"
        )
        if self.by_cli:
            text += " (the CLI's own bound behind it ended the run)"
        elif self.graceful and self.grace:
            text += f" (no answer to the wrap-up within {describe('turns', self.grace)})"
        return text
