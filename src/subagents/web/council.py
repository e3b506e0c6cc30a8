"""A council on its job page: the members side by side (status, time, tokens, cost, answer)
and the judge's verdict, from the job's council record (``templates/_council.html``; every
value escaped: the answers are the children's text, untrusted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from subagents.present.council import HEADERS, member_row, said, verdict_of
from subagents.web.templates import render

if TYPE_CHECKING:
    from subagents.types import CouncilRecord, StructuredComparison


@dataclass
class CouncilView:
    record: CouncilRecord
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]
    agreement: StructuredComparison | None
    agree: str
    differ: list[tuple[str, str]]
    verdict: tuple[str, list[str]] | None
    merged: object


def council_view(record: CouncilRecord) -> CouncilView:
    agreement = record.get("agreement")
    agree = agreement.get("agree") if agreement is not None else None
    differ = agreement.get("differ") if agreement is not None else None
    merged = record.get("verdict")
    return CouncilView(
        record=record,
        headers=tuple(HEADERS),
        rows=[tuple(member_row(m)) for m in record.get("members") or []],
        agreement=agreement,
        agree=", ".join(agree or []) or "nothing",
        differ=[(p, said(v)) for p, v in (differ or {}).items()],
        verdict=verdict_of(record),
        merged=merged.get("merged") if isinstance(merged, dict) else None,
    )


def render_council(record: CouncilRecord) -> str:
    """The ``council`` section: a table a member a row, what agrees and differs, the verdict
    (its line, reasons and merged answer) or why there is none."""
    return render("_council.html", council=council_view(record))
