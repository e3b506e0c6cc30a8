"""The approvals inbox from any process (docs/approvals.md): the items waiting in every
running run's inbox, and a decision on one. The one implementation behind ``subagents
inbox|approve|deny``, the API's ``inbox()``/``decide()``, the MCP tools and the web page.

A decision is refused in one line, with nothing changed, for an item that does not exist,
that was decided already (the decision taken first is named), or whose run has ended. Two
deciders racing on one item: the inbox's claim lets exactly one win; the other is told.
Once claimed, the run's supervisor is told at its control endpoint (it would also find the
decision on its own within a second)."""

from __future__ import annotations

import contextlib
import getpass
import os
from pathlib import Path

from subagents.core import approve, controlsock, inbox, questions
from subagents.core.approve import CHOICE_WORDS
from subagents.core.clock import iso
from subagents.core.ids import is_valid_id_prefix
from subagents.core.paths import runs_dir, state_home
from subagents.errors import UsageError
from subagents.types import ApprovalChoice, ApprovalDecision, ApprovalItem

# Who the records name when the parent agent decides (the MCP tool): bounded by the user's
# parent_may_approve.
PARENT_DECIDER = "parent"
# How long the supervisor has to take the word that an item was decided (it polls anyway).
TELL_WITHIN = 5.0


def person() -> str:
    """Who decides from this process, as the records name them: the user's login."""
    with contextlib.suppress(Exception):
        return getpass.getuser()
    return "user"


def _open_runs(home: Path) -> list[Path]:
    """The run directories with an inbox whose run has not ended."""
    return inbox.open_runs(runs_dir(home))


def pending_items(home: Path | None = None, run_id: str | None = None) -> list[ApprovalItem]:
    """Every item waiting for a decision (of one run: ``run_id``), oldest first."""
    home = home or state_home()
    runs = _open_runs(home)
    if run_id is not None:
        runs = [r for r in runs if r.name == run_id]
    items = [item for run_dir in runs for item in inbox.pending(run_dir)]
    return sorted(items, key=lambda item: item["id"])


def _find(home: Path, item_ref: str) -> tuple[Path, ApprovalItem]:
    """The item ``item_ref`` names (its id, or an unambiguous prefix), and its run dir."""
    if not is_valid_id_prefix(item_ref):
        raise UsageError(f"not an item id: {item_ref!r} (`subagents inbox` lists them)", "item")
    matches: list[tuple[Path, str]] = []
    with contextlib.suppress(OSError), os.scandir(runs_dir(home)) as entries:
        for entry in entries:
            run_dir = Path(entry.path)
            matches += [(run_dir, i) for i in inbox.item_ids(run_dir) if i.startswith(item_ref)]
    if not matches:
        raise UsageError(f"no inbox item {item_ref} (`subagents inbox` lists them)", "item")
    if len(matches) > 1 and not any(i == item_ref for _, i in matches):
        raise UsageError(f"item {item_ref} is ambiguous: give more of its id", "item")
    run_dir, item_id = next(((r, i) for r, i in matches if i == item_ref), matches[0])
    item = inbox.read_item(run_dir, item_id)
    if item is None:
        raise UsageError(f"approval item {item_id} is damaged: {run_dir / inbox.INBOX}", "item")
    return run_dir, item


def _taken(decision: ApprovalDecision) -> str:
    why = f" ({decision['reason']})" if decision.get("reason") else ""
    word = CHOICE_WORDS[decision["choice"]]
    return f"{word} by {decision['by']} at {iso(decision['at'])}{why}"


def _fits(item: ApprovalItem, choice: ApprovalChoice, answers: list[str] | None) -> None:
    """UsageError unless ``choice`` (and ``answers``) decide ``item``: a question is
    answered or denied, a request to act allowed or denied."""
    item_id = item["id"]
    if inbox.kind_of(item) == "question":
        if choice in ("allow", "always"):
            raise UsageError(
                f"item {item_id} is a question: answer it (`subagents answer {item_id} TEXT`)"
                " or deny it",
                "choice",
            )
        if choice == "answer":
            problem = questions.answers_problem(item.get("questions") or [], answers or [])
            if problem is not None:
                raise UsageError(f"item {item_id}: {problem}", "answers")
    elif choice == "answer":
        raise UsageError(f"item {item_id} is not a question: approve or deny it", "choice")
    if answers is not None and choice != "answer":
        raise UsageError("answers go only with the choice 'answer'", "answers")


def _bound(item: ApprovalItem, choice: ApprovalChoice) -> None:
    """UsageError when the parent may not take this decision: under the user's
    ``parent_may_approve``, it allows only what those rules cover, once (``always`` would
    let what they do not cover pass later); it may always deny, and answer a question."""
    bound = item.get("parentMay")
    if bound is None or choice not in ("allow", "always") or inbox.kind_of(item) == "question":
        return
    item_id, rules = item["id"], ",".join(bound)
    if choice == "always":
        raise UsageError(
            f"item {item_id}: the parent may allow once only (parent_may_approve: {rules})",
            "choice",
        )
    if approve.passes(bound, False, item["tool"], item["input"], item.get("cwd") or "/") is None:
        raise UsageError(
            f"item {item_id}: {item['summary']} is outside what the parent may allow"
            f" (parent_may_approve: {rules}); it waits for a person",
            "item",
        )


def decide(
    item_ref: str,
    choice: ApprovalChoice,
    *,
    by: str | None = None,
    reason: str | None = None,
    answers: list[str] | None = None,
    home: Path | None = None,
) -> ApprovalDecision:
    """Decide an item: a request to act ``allow`` (once), ``always`` (the same tool for the
    rest of the run) or ``deny`` (``reason`` is what the child is told); a question
    ``answer`` (``answers``: one per question, in order, each an option's label or words of
    one's own) or ``deny`` (not answered). UsageError, nothing changed, when it cannot be
    decided."""
    if choice not in inbox.CHOICES:
        raise UsageError(f"choice: must be allow, always, deny or answer, not {choice!r}", "choice")
    home = home or state_home()
    run_dir, item = _find(home, item_ref)
    item_id = item["id"]
    _fits(item, choice, answers)
    if by == PARENT_DECIDER:
        _bound(item, choice)
    earlier = inbox.read_decision(run_dir, item_id)
    if earlier is not None:
        raise UsageError(f"item {item_id} was decided already: {_taken(earlier)}", "item")
    if (run_dir / "result.json").exists():
        raise UsageError(f"item {item_id}: run {run_dir.name} has ended", "item")
    won, decision = inbox.claim(run_dir, item_id, choice, by or person(), reason, answers)
    if not won:
        raise UsageError(f"item {item_id} was decided already: {_taken(decision)}", "item")
    with contextlib.suppress(OSError, ValueError):
        controlsock.request(run_dir, {"v": 1, "op": "decided", "item": item_id}, TELL_WITHIN)
    return decision
