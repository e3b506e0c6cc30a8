"""A council's answers side by side (``show``, the end of ``run --council``): one row a
member with its status, time, tokens and cost, then where the structured answers agree and
differ, and the judge's verdict. Plain text: the same words on a terminal and in a pipe."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from subagents.present.figures import elapsed, money, tokens
from subagents.present.humanize import head, one_line

if TYPE_CHECKING:
    from subagents.types import CouncilMember, CouncilRecord, JsonValue

HEADERS = ("", "member", "status", "time", "tokens", "cost", "answer")


def member_row(m: CouncilMember) -> tuple[str, ...]:
    """One member's cells under ``HEADERS``: its answer whole (its structured answer as
    JSON, or why it did not complete)."""
    who = m.get("agent") or m.get("backend") or "?"
    if m.get("model"):
        who += f" ({m.get('model')})"
    value = m.get("structured")
    text = json.dumps(value, ensure_ascii=False) if value is not None else m.get("answer")
    if m.get("status") != "completed":
        text = m.get("errorMessage") or ""
    ms = m.get("durationMs")
    return (
        str(m.get("label") or ""),
        who,
        str(m.get("status") or ""),
        elapsed(ms / 1000 if isinstance(ms, (int, float)) else None),
        tokens(m.get("tokens")),
        money(m.get("cost")),
        str(text or ""),
    )


def said(values: dict[str, JsonValue]) -> str:
    """What each member said where their structured answers differ: ``A="x"; B=2``."""
    return "; ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in values.items())


def verdict_of(record: CouncilRecord) -> tuple[str, list[str]] | None:
    """The judge's verdict as a line and its reasons; None when there is none."""
    verdict = record.get("verdict")
    if not isinstance(verdict, dict):  # the judge's JSON, under council.VERDICT_SCHEMA
        return None
    reasons = verdict.get("reasons")
    return (
        f"best {verdict.get('best')}, agreement {verdict.get('agreement')}",
        [str(r) for r in reasons] if isinstance(reasons, list) else [],
    )


def council_table(record: CouncilRecord, width: int = 100) -> str:
    """The council record (``JobResult.council``) as a table and its verdict."""
    rows: list[tuple[str, ...]] = [HEADERS]
    for m in record.get("members") or []:
        *cells, text = member_row(m)
        rows.append((*cells, one_line(text)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS) - 1)]
    room = max(20, width - sum(widths) - 2 * len(widths))
    lines = [
        "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), head(r[-1], room)])
        for r in rows
    ]
    lines.append(f"{record.get('answered', 0)} answered (quorum {record.get('quorum', 1)})")
    agreement = record.get("agreement")
    if agreement is not None:
        agree = ", ".join(agreement.get("agree") or []) or "nothing"
        lines.append(f"agree: {agree}")
        for path, values in (agreement.get("differ") or {}).items():
            lines.append(f"differ: {path}: {head(said(values), room)}")
    verdict = verdict_of(record)
    if verdict is not None:
        lines.append(f"verdict: {verdict[0]}")
        lines += [f"  - {one_line(reason)}" for reason in verdict[1]]
    elif record.get("judgeError"):
        lines.append(f"judge: no verdict: {record.get('judgeError')}")
    return "\n".join(lines)
