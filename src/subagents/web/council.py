"""A council on its job page: the members side by side (status, time, tokens, cost, answer)
and the judge's verdict, rendered on the server from the job's council record. Every value
goes through ``esc``: the answers are the children's text, untrusted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.present.council import HEADERS, member_row, said, verdict_of
from subagents.web.layout import badge, esc

if TYPE_CHECKING:
    from subagents.types import CouncilRecord


def render_council(record: CouncilRecord) -> str:
    """The ``council`` section: a table a member a row, what agrees and differs, the verdict
    (its line, reasons and merged answer) or why there is none."""
    head = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    rows = []
    for member in record.get("members") or []:
        label, who, status, took, toks, cost, answer = member_row(member)
        rows.append(
            f'<tr data-member="{esc(label)}"><td>{esc(label)}</td><td>{esc(who)}</td>'
            f'<td>{badge(status)}</td><td class="num">{esc(took)}</td>'
            f'<td class="num">{esc(toks)}</td><td class="num">{esc(cost)}</td>'
            f'<td><pre class="member-answer">{esc(answer)}</pre></td></tr>'
        )
    out = [
        '<section class="council"><h2>Council</h2>'
        f'<table class="members"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f"<p>{esc(record.get('answered', 0))} answered (quorum {esc(record.get('quorum', 1))})</p>"
    ]
    agreement = record.get("agreement")
    if agreement is not None:
        agree = ", ".join(agreement.get("agree") or []) or "nothing"
        differ = "".join(
            f"<li><code>{esc(path)}</code>: " + esc(said(values)) + "</li>"
            for path, values in (agreement.get("differ") or {}).items()
        )
        out.append(
            f"<p>agree: {esc(agree)}</p>" + (f'<ul class="differ">{differ}</ul>' if differ else "")
        )
    verdict = verdict_of(record)
    if verdict is not None:
        line, reasons = verdict
        merged = record.get("verdict")
        merged = merged.get("merged") if isinstance(merged, dict) else None
        out.append(
            f'<div class="verdict"><h3>Verdict</h3><p>{esc(line)}</p>'
            + (f"<ul>{''.join(f'<li>{esc(r)}</li>' for r in reasons)}</ul>" if reasons else "")
            + (f'<pre class="merged">{esc(merged)}</pre>' if isinstance(merged, str) else "")
            + "</div>"
        )
    elif record.get("judgeError"):
        out.append(f'<p class="problem">judge: no verdict: {esc(record.get("judgeError"))}</p>')
    out.append("</section>")
    return "".join(out)
