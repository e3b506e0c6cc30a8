"""The approvals inbox (docs/approvals.md): ``inbox`` (``-f`` to follow), ``approve``, ``deny``."""

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
        lines.append(
            f"{item['id']}  {item['backend']}  run {item['runId']}  {who} {waited}:"
            f" {item['summary']}"
        )
        lines.append(f"    task: {' '.join(item['task'].split())[:200]}")
    return lines


@main.command()
@click.argument("run", required=False, metavar="[RUN]")
@click.option("--follow", "-f", is_flag=True, help="Keep showing the inbox as it changes.")
@click.option("--json", "as_json", is_flag=True, help="The items as JSON.")
def inbox(run: str | None, follow: bool, as_json: bool) -> None:
    """Requests of running children that wait for a decision (runs started with
    --approvals ask or parent), oldest first; of one RUN if given. Decide one with
    `subagents approve ITEM` or `subagents deny ITEM`.

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


def _decide(item: str, choice: ApprovalChoice, reason: str | None, as_json: bool) -> None:
    from subagents import service

    _decided(service.decide(item, choice, reason=reason), as_json)


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
