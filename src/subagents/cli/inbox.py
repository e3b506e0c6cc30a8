"""The approvals inbox (docs/approvals.md): ``inbox`` (``-f`` to follow), ``approve``, ``deny``,
``answer`` (a child's question)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from subagents.cli.app import echo_child_text, main, print_json
from subagents.core.approve import decided_words

if TYPE_CHECKING:
    from subagents.types import ApprovalChoice, ApprovalDecision, ApprovalItem

# How often `inbox -f` looks again.
FOLLOW_EVERY = 0.5


def item_lines(items: list[ApprovalItem], now: float) -> list[str]:
    """Each item as two lines: what it is and who waits; then its run's task."""
    from subagents.present.humanize import duration

    lines: list[str] = []
    for item in items:
        waited = duration(max(0.0, now - item["requestedAt"]) * 1000) or "0s"
        who = "the parent decides" if item["policy"] == "parent" else "waiting"
        asked = item.get("questions") if item.get("kind") == "question" else None
        what = "asks" if asked else item["summary"]
        lines.append(
            f"{item['id']}  {item['backend']}  run {item['runId']}  {who} {waited}: {what}"
        )
        for q in asked or []:
            lines.append(f"    {q['question']}" + ("  (any of)" if q["multiSelect"] else ""))
            lines += [
                f"      {n}. {o['label']}" + (f" — {o['description']}" if o["description"] else "")
                for n, o in enumerate(q["options"], 1)
            ]
        lines.append(f"    task: {' '.join(item['task'].split())[:200]}")
    return lines


@main.command()
@click.argument("run", required=False, metavar="[RUN]")
@click.option("--follow", "-f", is_flag=True, help="Keep showing the inbox as it changes.")
@click.option("--json", "as_json", is_flag=True, help="The items as JSON.")
def inbox(run: str | None, follow: bool, as_json: bool) -> None:
    """Requests of running children that wait for a decision (runs started with
    --approvals ask or parent), oldest first; of one RUN if given. Decide one with
    `subagents approve ITEM` or `subagents deny ITEM`; answer a child's question with
    `subagents answer ITEM TEXT` or `--choice N`.

    \b
    Examples:
      subagents inbox              # what waits now
      subagents inbox -f           # follow it (Ctrl-C to stop)
    """
    from subagents import service

    if as_json and not follow:
        print_json(service.inbox(run))
        return
    shown: list[str] | None = None
    while True:
        items = service.inbox(run)
        ids = [item["id"] for item in items]
        if ids != shown:
            shown = ids
            lines = item_lines(items, time.time()) or ["nothing waits for a decision"]
            if follow:
                click.echo(f"-- {time.strftime('%H:%M:%S')}", err=True)
            for line in lines:
                echo_child_text(line)
        if not follow:
            return
        time.sleep(FOLLOW_EVERY)


def _decided(decision: ApprovalDecision, as_json: bool) -> None:
    if as_json:
        print_json(decision)
        return
    reason = decision.get("reason")
    text = decided_words(decision["choice"], decision["item"])
    echo_child_text(text + (f" ({reason})" if reason else ""))


def _decide(
    item: str,
    choice: ApprovalChoice,
    reason: str | None,
    as_json: bool,
    answers: list[str] | None = None,
) -> None:
    from subagents import service

    _decided(service.decide(item, choice, reason=reason, answers=answers), as_json)


@main.command()
@click.argument("item")
@click.option(
    "--always", is_flag=True, help="Allow the same tool for the rest of the run without asking."
)
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
def approve(item: str, always: bool, as_json: bool) -> None:
    """Allow an inbox ITEM (its id or an unambiguous prefix): the child's request goes
    ahead. An unknown or decided item, or a run that ended: one line, exit 2."""
    _decide(item, "always" if always else "allow", None, as_json)


@main.command()
@click.argument("item")
@click.option("--reason", help="What the child is told (it sees the refusal and goes on).")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
def deny(item: str, reason: str | None, as_json: bool) -> None:
    """Deny an inbox ITEM (its id or an unambiguous prefix): the child is told no, with
    --reason. An unknown or decided item, or a run that ended: one line, exit 2."""
    _decide(item, "deny", reason, as_json)


@main.command()
@click.argument("item")
@click.argument("text", nargs=-1)
@click.option(
    "--choice",
    "choices",
    multiple=True,
    metavar="N",
    help="The option numbered N (as `inbox` shows it); '1,3' where several may be chosen."
    " Once per question, in order.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
def answer(item: str, text: tuple[str, ...], choices: tuple[str, ...], as_json: bool) -> None:
    """Answer a child's question (an inbox ITEM of kind question): TEXT in your own words,
    or --choice N for an option; one answer per question, in order. The child reads the
    answer as yours. `subagents deny ITEM` leaves it unanswered.

    \b
    Examples:
      subagents answer 01m8hssqet --choice 2
      subagents answer 01m8hssqet "Blue, but darker"
    """
    from subagents import service
    from subagents.core import questions
    from subagents.errors import UsageError

    if bool(text) == bool(choices):
        raise UsageError("give the answer as TEXT or as --choice N, one of the two", "answer")
    answers = list(text)
    if choices:
        found = [i for i in service.inbox() if i["id"].startswith(item)]
        asked = found[0].get("questions") if len(found) == 1 else None
        if not asked:  # (not waiting, not a question: the decision says which, in one line)
            answers = list(choices)
        else:
            if len(choices) != len(asked):
                n = len(asked)
                raise UsageError(f"it asks {n} question(s): give --choice once for each", "choice")
            try:
                answers = [questions.pick(q, c) for q, c in zip(asked, choices, strict=True)]
            except ValueError as exc:
                raise UsageError(str(exc), "choice") from None
    _decide(item, "answer", None, as_json, answers)
