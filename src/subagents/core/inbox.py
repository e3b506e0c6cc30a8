"""A run's inbox on disk: ``RUN_DIR/inbox/``, one file per item waiting for a decision
(``ITEM.json``, written atomically by the run's supervisor) and one per decision taken
(``ITEM.decision.json``).

A decision is claimed, never overwritten: its file is published with a hard link, which
fails when the name is taken, so of two deciders racing on one item (a person and the
timeout, two people, the web and the parent) exactly one wins and the other reads the
winner's decision. Standard library only: the supervisor imports it.

While a run has an inbox its name is also kept in ``$SUBAGENTS_HOME/inboxes/`` (an empty
file a run, written with its first item, removed when the run ends), so whoever looks for
what waits (the CLI, the web, the Claude Code monitor every second) reads the runs with an
inbox, not every run ever kept. A name left by a supervisor that died is passed over once
its run has a result (and removed then).
"""

from __future__ import annotations

import contextlib
import os
import time

from subagents.core.files import make_private_dir, publish_once, read_json, write_json_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from subagents.types import ApprovalChoice, ApprovalDecision, ApprovalItem, ItemKind

INBOX = "inbox"
# Beside ``runs/``: the names of the runs with an inbox, while they run.
OPEN = "inboxes"
DECISION = ".decision.json"
CHOICES: tuple[ApprovalChoice, ...] = ("allow", "always", "deny", "answer")


def inbox_dir(run_dir: Path) -> Path:
    return run_dir / INBOX


def item_path(run_dir: Path, item_id: str) -> Path:
    return inbox_dir(run_dir) / f"{item_id}.json"


def decision_path(run_dir: Path, item_id: str) -> Path:
    return inbox_dir(run_dir) / f"{item_id}{DECISION}"


def _marker(run_dir: Path) -> Path:
    return run_dir.parent.parent / OPEN / run_dir.name


def write_item(run_dir: Path, item: ApprovalItem) -> None:
    make_private_dir(inbox_dir(run_dir))
    marker = _marker(run_dir)
    if not marker.exists():
        make_private_dir(marker.parent)
        marker.touch(mode=0o600)
    write_json_atomic(item_path(run_dir, item["id"]), item)


def close(run_dir: Path) -> None:
    """The run has ended: its inbox no longer counts as open (its records stay)."""
    with contextlib.suppress(OSError):
        _marker(run_dir).unlink()


def open_runs(runs: Path) -> list[Path]:
    """The run directories under ``runs`` whose inbox is open (the run has not ended)."""
    found: list[Path] = []
    markers = runs.parent / OPEN
    with contextlib.suppress(OSError):
        names = sorted(os.listdir(markers))
        for name in names:
            run_dir = runs / name
            if not os.path.isdir(inbox_dir(run_dir)):
                continue
            if os.path.exists(run_dir / "result.json"):  # (its supervisor died)
                with contextlib.suppress(OSError):
                    (markers / name).unlink()
                continue
            found.append(run_dir)
    return found


def read_item(run_dir: Path, item_id: str) -> ApprovalItem | None:
    """The item, or None when there is none (or it is not readable as one)."""
    try:
        value = read_json(item_path(run_dir, item_id))
    except (OSError, ValueError):
        return None
    if isinstance(value, dict) and value.get("id") == item_id:
        return value  # type: ignore[return-value]  # (written by the supervisor)
    return None


def read_decision(run_dir: Path, item_id: str) -> ApprovalDecision | None:
    try:
        value = read_json(decision_path(run_dir, item_id))
    except (OSError, ValueError):
        return None
    if isinstance(value, dict) and value.get("choice") in CHOICES:
        return value  # type: ignore[return-value]  # (written by claim)
    return None


def claim(
    run_dir: Path,
    item_id: str,
    choice: ApprovalChoice,
    by: str,
    reason: str | None = None,
    answers: list[str] | None = None,
) -> tuple[bool, ApprovalDecision]:
    """Decide ``item_id`` (a question: ``answer`` with its ``answers``): ``(True, the
    decision)`` when this call's decision is the one, ``(False, the one taken first)`` when
    another decider was first."""
    decision: ApprovalDecision = {"item": item_id, "choice": choice, "by": by, "at": time.time()}
    if reason:
        decision["reason"] = reason
    if answers is not None:
        decision["answers"] = answers
    if publish_once(decision_path(run_dir, item_id), decision):
        return True, decision
    # The winner's file is complete once it is there (published by a link).
    taken = read_decision(run_dir, item_id)
    return False, taken if taken is not None else decision


def kind_of(item: ApprovalItem) -> ItemKind:
    """What an item is (one written before questions existed is an approval)."""
    return "question" if item.get("kind") == "question" else "approval"


def item_ids(run_dir: Path) -> list[str]:
    """The ids of the run's items, decided or not, oldest first (ids sort by time)."""
    with contextlib.suppress(OSError):
        names = os.listdir(inbox_dir(run_dir))
        return sorted(
            n[: -len(".json")]
            for n in names
            if n.endswith(".json") and not n.endswith(DECISION) and not n.startswith(".")
        )
    return []


def pending(run_dir: Path) -> list[ApprovalItem]:
    """The run's items not decided yet, oldest first."""
    found: list[ApprovalItem] = []
    for item_id in item_ids(run_dir):
        if decision_path(run_dir, item_id).exists():
            continue
        item = read_item(run_dir, item_id)
        if item is not None:
            found.append(item)
    return found
