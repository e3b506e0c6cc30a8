"""How a finished job is told in one line: a mark, who ran, how long, tokens, cost, and the
answer's first line or why it failed.

``✓ job 01m8… · pi · 3.4s · 60 tokens · $0.00004 · "DONE"`` is the command line's last line,
the notice of a background job's end (Claude Code plugin, ``subagents notices``) and the
status line of an MCP result alike. The session log's ``summary`` is worded from the same
pieces. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from subagents.core.childtext import neutralize
from subagents.present.figures import elapsed, money, tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JobResult, JobRun, JobState

    # A finished job: its result, or its ``job.json`` (which holds the result's keys).
    FinishedJob = JobResult | JobState

MARKS = {"completed": "✓", "failed": "✗", "timeout": "✗", "aborted": "■"}

_NOT_SPACE = re.compile(r"\S")
# How much of the first non-blank line is read: far more than any summary shows.
FIRST_LINE_MAX = 1 << 16
# The most of an answer's first line an end line quotes, and of why a run failed: a line a
# terminal holds (a 20 kB answer is not one 20 kB line), as the activity lines are cut.
QUOTE_LIMIT = 80
WHY_LIMIT = 160
# The most an end line holds, whatever it lists (a parallel job's failures).
END_LINE_LIMIT = 400


def mark(status: object) -> str:
    return MARKS.get(str(status), "•")


def runs_of(job_result: FinishedJob) -> list[JobRun]:
    """The job's runs (those that are records: a job.json is read as it is)."""
    runs = job_result.get("runs") or []
    return [r for r in runs if isinstance(r, dict)]


def agent_of(run: JobRun) -> str:
    return str(run.get("agent") or run.get("backend") or "agent")


def agent_names(job_result: FinishedJob) -> str | None:
    """The job's agents in run order, repeats dropped, joined with ``", "``."""
    names = list(dict.fromkeys(agent_of(r) for r in runs_of(job_result)))
    return ", ".join(names) if names else None


def first_line(text: object) -> str:
    """The first non-blank line of ``text``, stripped (its first ``FIRST_LINE_MAX``
    characters): found without splitting the whole text, which may be a 20 MB answer."""
    whole = str(text or "")
    found = _NOT_SPACE.search(whole)
    if found is None:
        return ""
    start = found.start()
    return whole[start : start + FIRST_LINE_MAX].splitlines()[0].strip()


def cut(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, an ellipsis ending one that was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def why(run: Mapping[str, object]) -> str:
    """Why a run did not complete, in one line and in words for people ("stopped by you",
    "timed out after 10m00s": present/roles.py; the signal stays in its ``errorMessage``)."""
    from subagents.present.roles import plain_why

    message = first_line(run.get("errorMessage"))
    status = run.get("status")
    if message:
        return cut(plain_why(status, message), WHY_LIMIT)
    return "timed out" if status == "timeout" else str(status or "unknown")


def word(run: JobRun) -> str:
    """A run's status as a session log entry words it (a timeout is a failure)."""
    status = str(run.get("status") or "unknown")
    return "failed" if status == "timeout" else status


def quote(text: object) -> str:
    line = cut(first_line(text), QUOTE_LIMIT)
    return f'"{line}"' if line else "(no answer)"


def detail(job_result: FinishedJob) -> str:
    """What a job came to, after its figures: the answer's first line (quoted), or why it
    failed; for parallel and chain jobs how many runs completed and which did not."""
    mode = str(job_result.get("mode") or "single")
    runs = runs_of(job_result)
    if not runs:
        return why(job_result) if job_result.get("errorMessage") else "no run was started"
    council = job_result.get("council")
    if mode == "council" and isinstance(council, Mapping):
        return _council_detail(job_result, council)
    bad = [r for r in runs if r.get("status") != "completed"]
    if mode == "single" or (len(runs) == 1 and mode != "parallel"):
        run = runs[0]
        if (run.get("status") or job_result.get("status")) == "completed":
            return quote(run.get("finalText") or job_result.get("finalText"))
        return why(run)
    done = f"{len(runs) - len(bad)}/{len(runs)} completed"
    if mode == "chain":
        if not bad:
            last = runs[-1]
            answer = quote(last.get("finalText") or job_result.get("finalText"))
            return f"{done}: {agent_of(last)} — {answer}"
        step = runs.index(bad[0]) + 1
        return f"{done}; {word(bad[0])} at step {step}: {agent_of(bad[0])} — {why(bad[0])}"
    if not bad:
        return done
    named = (f"{word(r)}: [{runs.index(r) + 1}] {agent_of(r)}{_asked(r)} — {why(r)}" for r in bad)
    return f"{done}; " + "; ".join(named)


TASK_WORDS = 40  # characters of a task's first line that name it in one line


def task_words(run: Mapping[str, object]) -> str:
    """The first words of what ``run`` was asked (``list the files``), or ""."""
    return cut(first_line(run.get("task")), TASK_WORDS)


def _asked(run: JobRun) -> str:
    words = task_words(run)
    return f' "{words}"' if words else ""


def _council_detail(job_result: FinishedJob, council: Mapping[str, object]) -> str:
    """A council: how many members answered, then the judge's merged answer, or why there
    is no verdict, or (without a judge) each member's answer."""
    members = council.get("members")
    members = [m for m in members if isinstance(m, Mapping)] if isinstance(members, list) else []
    done = f"{council.get('answered', 0)}/{len(members)} answered"
    if isinstance(council.get("verdict"), Mapping):
        return f"{done}: {quote(job_result.get('finalText'))}"
    if council.get("judgeError"):
        return f"{done}; no verdict: {why({'status': 'failed', 'errorMessage': council.get('judgeError')})}"
    said = [
        f"{m.get('label')} {quote(m.get('answer'))}"
        if m.get("status") == "completed"
        else f"{m.get('label')} {'failed' if m.get('status') == 'timeout' else m.get('status')} — {why(m)}"
        for m in members
    ]
    return "; ".join([done, *said])


def figures(duration_ms: object, usage: object) -> list[str]:
    """``["3.4s", "60 tokens", "$0.00004"]``: what is known of them."""
    out = []
    if isinstance(duration_ms, int | float) and not isinstance(duration_ms, bool):
        out.append(elapsed(duration_ms / 1000))
    usage = usage if isinstance(usage, Mapping) else {}
    if usage.get("totalTokens") is not None:
        out.append(f"{tokens(usage.get('totalTokens'))} tokens")
    if usage.get("cost") is not None:
        out.append(money(usage.get("cost")))
    return out


def limit_text(holder: Mapping[str, object]) -> str | None:
    """``⏹ turn limit 3 · wrapped up (4 turns used)``: what a budget did at its limit, for a
    run or a job holding a ``limit`` record (present/roles.py words it); None without one."""
    from subagents.present.roles import limit_mark, limit_used

    mark = limit_mark(holder)
    return f"{mark} ({limit_used(holder)})" if mark else None


def limit_of(job_result: Mapping[str, object]) -> object:
    """The budget that stopped a job: its own (a job's budget), else its first run's."""
    if job_result.get("limit") is not None:
        return job_result.get("limit")
    runs = job_result.get("runs")
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, Mapping) and run.get("limit") is not None:
            return run.get("limit")
    return None


def notes(job_result: FinishedJob) -> list[str]:
    """What a job's status line adds to its status: the budget that stopped it
    (``⏹ turn limit 3 · wrapped up (4 turns used)``), a council's missing verdict."""
    out = []
    limit = limit_text({"limit": limit_of(job_result)})
    if limit:
        out.append(limit)
    council = job_result.get("council")
    if isinstance(council, Mapping) and council.get("judgeError"):
        out.append("no verdict: the judge failed")
    return out


def live_notes(run: Mapping[str, object]) -> list[str]:
    """What live control did in a run, for its summary line: ``1 message``, ``⏹ turn limit
    3 · wrapped up (4 turns used)``; nothing where it did nothing."""
    out = []
    messages = run.get("messages")
    sent = messages.get("sent") if isinstance(messages, Mapping) else None
    if isinstance(sent, int) and sent:
        out.append(f"{sent} message{'' if sent == 1 else 's'}")
    limit = limit_text(run)
    if limit:
        out.append(limit)
    return out


def status_line(job_result: FinishedJob) -> str:
    """``✓ completed · pi · 3.4s · 60 tokens · $0.00004``: a job's outcome without its answer."""
    status = str(job_result.get("status") or "unknown")
    mode = str(job_result.get("mode") or "single")
    who = agent_names(job_result)
    parts = [f"{mark(status)} {status}"]
    if mode != "single":
        parts.append(mode)
    if who:
        parts.append(who)
    parts += figures(job_result.get("durationMs"), job_result.get("usage"))
    parts += notes(job_result)
    return " · ".join(parts)


def end_line(
    job_id: object,
    status: object,
    who: object,
    duration_ms: object,
    usage: object,
    what: str,
    mode: object = "single",
    marks: list[str] | None = None,
    task: str = "",
) -> str:
    """``✓ job <id> · pi · 3.4s · 60 tokens · $0.00004 · "DONE"``; a job that did not
    complete says how it ended after its id (``✗ job <id> failed · …``), and ``task`` (its
    first words) follows in brackets where given. Terminal escapes and control characters
    in what it quotes are removed."""
    status = str(status or "unknown")
    head = f"{mark(status)} job {job_id}" + ("" if status == "completed" else f" {status}")
    if task:
        head += f" ({task})"
    parts = [head]
    if mode and mode != "single":
        parts.append(str(mode))
    if who:
        parts.append(str(who))
    parts += figures(duration_ms, usage)
    parts += marks or []
    if what:
        parts.append(what)
    # It quotes a child: no escapes reach a terminal, and no line longer than one holds.
    return cut(neutralize(" · ".join(parts)), END_LINE_LIMIT)


def job_line(job_result: FinishedJob, *, named: bool = False) -> str:
    """:func:`end_line` for a job result (``job.json`` once it ended); ``named``: with the
    first words of its (first) task."""
    runs = runs_of(job_result)
    return end_line(
        job_result.get("jobId"),
        job_result.get("status"),
        agent_names(job_result),
        job_result.get("durationMs"),
        job_result.get("usage"),
        detail(job_result),
        job_result.get("mode"),
        notes(job_result),
        task_words(runs[0]) if named and runs else "",
    )
