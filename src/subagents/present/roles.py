"""Each run of a job as a face shows it, in words for people: its place in the job (a
council's member ``A``, ``B``, … or its ``judge``; a chain's ``step 2/3``), a mark for a
budget that ended it (``⏹ turn limit 3 · wrapped up``), why it did not complete in plain
words ("stopped by you", "timed out after 10m", not "the supervisor received SIGTERM"), and a
judge's verdict as words rather than its JSON.

The pi package draws these as they come in its feed (present/feed.py); the parent's text
(present/answer.py) says the same. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from subagents.present.figures import elapsed, money, tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import CouncilRecord, JobPlanRecord

JUDGE = "judge"
# What a judge's row says it does (its task is the members' answers, not for a row).
JUDGE_TASK_LABEL = "judge the answers: best, agreement, merged"
BUDGET_MARK = "⏹"

_LIMIT_NAMES = {"turns": "turn", "tokens": "token", "cost": "cost"}
_LIMIT_DONE = {
    "wrap-up": "wrapped up",
    "abort": "stopped",
    "stop": "ended at its answer",
    "refuse": "the rest not started",
}
# How a stop arrives, by signal: a person's (Esc in pi, Ctrl+C, `subagents stop`), or a
# terminal that closed.
_SIGNAL_WORDS = {
    "SIGTERM": "stopped by you",
    "SIGINT": "stopped by you",
    "SIGHUP": "stopped: its terminal closed",
}
_TIMED_OUT = re.compile(r"^timed out after (\d+(?:\.\d+)?)s$")
_SIGNAL = re.compile(r"\b(?:the )?supervisor received (SIG[A-Z]+)\b")


# A chain step's placeholder for the answer before it (jobs.spec.PREVIOUS: present is below
# jobs, a test holds the two the same).
PREVIOUS = "{previous}"


def template_words(task: str, index: int) -> str:
    """A chain step's task before it starts, its template said as one: ``{previous}`` is
    ``⟨step 1's answer⟩`` (``index``: the step's, from 0)."""
    return task.replace(PREVIOUS, f"⟨step {index}'s answer⟩") if index else task


def member_label(i: int) -> str:
    """A council member's label: A, B, ... Z, then A2, B2, ... (as the judge reads them)."""
    return chr(ord("A") + i % 26) + (str(i // 26 + 1) if i >= 26 else "")


def roles(plan: JobPlanRecord) -> list[str | None]:
    """Each run's place in the job, in plan order: a council's members ``A``, ``B``, … then
    ``judge`` (when it has one); a chain's ``step 1/3``, …; None for runs that stand alone."""
    n = len(plan.get("requests") or [])
    mode = plan.get("mode")
    if mode == "council":
        extra = plan.get("extra")
        judged = isinstance(extra, Mapping) and bool(extra.get("judge"))
        members = n - 1 if judged and n else n
        out: list[str | None] = [member_label(i) for i in range(members)]
        return out + ([JUDGE] if judged and n else [])
    if mode == "chain" and n > 1:
        return [f"step {i + 1}/{n}" for i in range(n)]
    return [None] * n


def _amount(kind: str, value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "?"
    return money(value) if kind == "cost" else f"{int(value)}"


def limit_mark(run: Mapping[str, object]) -> str | None:
    """``⏹ turn limit 3 · wrapped up`` for a run a budget ended (the job's budget says so:
    ``⏹ job's cost limit $0.50 · stopped``); None for one it did not."""
    limit = run.get("limit")
    if not isinstance(limit, Mapping):
        return None
    kind = str(limit.get("kind") or "")
    name = _LIMIT_NAMES.get(kind, kind)
    whose = "job's " if limit.get("scope") == "job" else ""
    action = str(limit.get("action") or "")
    done = _LIMIT_DONE.get(action, action)
    return f"{BUDGET_MARK} {whose}{name} limit {_amount(kind, limit.get('limit'))} · {done}"


def limit_used(run: Mapping[str, object]) -> str | None:
    """``4 turns used`` beside a budget's mark; None without one."""
    limit = run.get("limit")
    if not isinstance(limit, Mapping):
        return None
    kind = str(limit.get("kind") or "")
    used = _amount(kind, limit.get("used"))
    return f"{used} used" if kind == "cost" else f"{used} {kind or 'units'} used"


def budget_progress(
    limits: object, turns: object, usage: Mapping[str, object] | None
) -> str | None:
    """A running run's budget as it goes: ``turns 2/5 · tokens 1.2k/10k · $0.01/$0.50``
    (each limit it has, what it used so far); None for a run without one."""
    if not isinstance(limits, Mapping) or not limits:
        return None
    usage = usage or {}
    parts = []
    for kind, used in (
        ("turns", turns),
        ("tokens", usage.get("totalTokens")),
        ("cost", usage.get("cost")),
    ):
        limit = limits.get(kind)
        if limit is None:
            continue
        spent = used if isinstance(used, int | float) and not isinstance(used, bool) else 0
        if kind == "cost":
            parts.append(f"{money(spent)}/{_amount(kind, limit)}")
        elif kind == "tokens":
            total = limit if isinstance(limit, int | float) else 0
            parts.append(f"tokens {tokens(int(spent))}/{tokens(int(total))}")
        else:
            parts.append(f"turns {int(spent)}/{_amount(kind, limit)}")
    return " · ".join(parts) or None


def plain_why(status: object, error: object) -> str:
    """Why a run did not complete, in words for the person who asked: a stop by Esc, Ctrl+C
    or ``subagents stop`` is "stopped by you", a closed terminal says so, a timeout says how
    long in the figures' words ("timed out after 10m00s"); any other reason as the engine
    wrote it (its first line)."""
    text = str(error or "").strip().splitlines()[0].strip() if str(error or "").strip() else ""
    found = _TIMED_OUT.match(text)
    if found is not None:
        return f"timed out after {elapsed(float(found.group(1)))}"
    if status == "timeout":
        return text or "timed out"
    if status == "aborted":
        sig = _SIGNAL.search(text)
        if sig is not None:
            return _SIGNAL_WORDS.get(sig.group(1), f"stopped ({sig.group(1)})")
        reason = text.removeprefix("aborted:").strip()
        return reason or "stopped"
    return text or str(status or "failed")


def verdict_lines(record: CouncilRecord) -> list[str]:
    """A judge's verdict as words: ``best A · agreement full`` (the rows name each member by
    its label), its reasons as a list, then its merged answer; why there is none when the
    judge fell short; nothing for a council without a judge."""
    verdict = record.get("verdict")
    if isinstance(verdict, Mapping):
        lines = [f"best {verdict.get('best') or '?'} · agreement {verdict.get('agreement') or '?'}"]
        reasons = verdict.get("reasons")
        if isinstance(reasons, Sequence) and not isinstance(reasons, str):
            lines += [f"- {str(r).strip()}" for r in reasons if str(r).strip()]
        merged = str(verdict.get("merged") or "").strip()
        if merged:
            lines += ["", merged]
        return lines
    if record.get("judgeRunId") is not None or record.get("judgeError"):
        return [f"no verdict: {plain_why('failed', record.get('judgeError'))}"]
    return []
