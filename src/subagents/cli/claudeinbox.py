"""The approvals inbox in Claude Code (docs/claude-code.md, docs/approvals.md): what the
plugin's monitor says when a job of the session starts waiting on a decision (the line wakes
an idle session, as a job's end does), and ``/subagents:jobs inbox | approve | deny |
answer``, done by the prompt hook with no model turn. Decisions go through the one service
(``service.decide``), by the user's login, as from ``subagents approve``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.types import ApprovalItem

JOBS_COMMAND = "/subagents:jobs"
USAGE = (
    f"usage: {JOBS_COMMAND} inbox | approve ITEM [--always] | deny ITEM [REASON…]"
    " | answer ITEM TEXT… | answer ITEM --choice N"
)


def session_items(session: str) -> list[ApprovalItem]:
    """The items waiting in the inbox for a decision on a run of this session's jobs."""
    from subagents import service
    from subagents.service import JobStore

    store = JobStore()
    sessions: dict[str, object] = {}
    found = []
    for item in service.inbox():
        job_id = item["jobId"]
        if job_id is None:
            continue
        if job_id not in sessions:
            try:
                sessions[job_id] = store.load(job_id).get("session")
            except (OSError, ValueError):
                sessions[job_id] = None
        if sessions[job_id] == session:
            found.append(item)
    return found


def waiting_notice(item: ApprovalItem) -> str:
    """The monitor's line for an item that started waiting: who decides it and how."""
    from subagents.core.childtext import one_line

    what = one_line(item["summary"])
    job = f"job {item['jobId']}" if item["jobId"] else f"run {item['runId']}"
    asks = "asks the user" if item.get("kind") == "question" else "asks to"
    if item["policy"] == "parent":
        how = f"decide it with subagent_decide (item {item['id']})"
    elif item.get("kind") == "question":
        how = f"the user answers with {JOBS_COMMAND} answer {item['id']} TEXT (or --choice N)"
    else:
        how = f"the user decides with {JOBS_COMMAND} approve|deny {item['id']}"
    return f"⏸ subagents: {job} ({item['backend']}) {asks}: {what} · {how}"


def inbox_view(session: str, words: list[str]) -> str:
    """What ``/subagents:jobs inbox|approve|deny|answer …`` does and shows the user."""
    from subagents import service
    from subagents.cli.inbox import item_lines
    from subagents.core import questions
    from subagents.core.approve import decided_words
    from subagents.core.childtext import neutralize
    from subagents.errors import UsageError

    verb, rest = words[0], words[1:]
    if verb == "inbox":
        if rest:
            return USAGE
        items = session_items(session)
        others = len(service.inbox()) - len(items)
        elsewhere = f"\n({others} more in other sessions: `subagents inbox`)" if others else ""
        if not items:
            return "Nothing of this session waits for a decision." + elsewhere
        lines = item_lines(items, time.time())
        return neutralize("Waiting for a decision:\n" + "\n".join(lines) + elsewhere)
    if not rest:
        return USAGE
    item, args = rest[0], rest[1:]
    try:
        if verb == "approve" and args in ([], ["--always"]):
            decision = service.decide(item, "always" if args else "allow")
        elif verb == "deny":
            decision = service.decide(item, "deny", reason=" ".join(args) or None)
        elif verb == "answer" and args[:1] == ["--choice"] and len(args) == 2:
            found = [i for i in service.inbox() if i["id"].startswith(item)]
            asked = found[0].get("questions") if len(found) == 1 else None
            if not asked or len(asked) != 1:
                raise UsageError(f"--choice here answers one question: {JOBS_COMMAND} inbox")
            picked = questions.pick(asked[0], args[1])
            decision = service.decide(item, "answer", answers=[picked])
        elif verb == "answer" and args:
            decision = service.decide(item, "answer", answers=[" ".join(args)])
        else:
            return USAGE
    except (UsageError, ValueError) as exc:
        return neutralize(str(exc))
    reason = decision.get("reason")
    return neutralize(
        decided_words(decision["choice"], decision["item"]) + (f" ({reason})" if reason else "")
    )
