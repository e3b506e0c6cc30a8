"""The parent's answer: what a finished job tells whoever delegated it, for every face.

One place decides, for each mode (single, parallel, chain, council), what leads (the job's
answer, or each run's, or what went wrong), which runs are named and with what, and what
follows (a council's table, the status line); each face then words it its own way:

- :func:`terminal` — ``run`` and ``wait`` on a terminal: the answer(s) on stdout, what went
  wrong on stderr (a council's table there too);
- :func:`markdown` — an MCP tool's result text (``✓ completed · …`` status lines, ``**[1]
  agent**`` sections, diagnostics with bold section labels and short paths);
- :func:`parent_text` — the pi package's tool result, sent as the ``answer`` record that ends
  ``run``/``wait --progress jsonl`` (``# 1. task (agent): status`` sections; an error only
  when no run completed, or for a council by the job's status);
- :func:`describe` — ``show``: the job, its figures, one line per run and the answer.

The runs' texts are the children's: each face neutralizes them where it shows them.
Standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from subagents.present import outcome
from subagents.present.figures import money
from subagents.present.roles import limit_mark, limit_used, plain_why

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import CouncilMember, CouncilRecord, JobResult, JobRun, JobState

    # A finished job: its result, or the state of the job (which holds it once it ended).
    Outcome = JobResult | JobState


def _completed(run: JobRun) -> bool:
    return run.get("status") == "completed"


def _failure(run: JobRun) -> str | None:
    """What went wrong in ``run``, as its record says it (diagnostics first)."""
    why = run.get("diagnostics") or run.get("errorMessage")
    return str(why) if why else None


def _council_of(result: Outcome) -> CouncilRecord | None:
    council = result.get("council")
    return council if isinstance(council, dict) else None


def _council_table(council: CouncilRecord) -> str:
    from subagents.present.council import council_table

    return council_table(council)


def _is_split(result: Outcome) -> bool:
    """Whether each run answers for itself: a parallel job, or a council without a verdict."""
    council = _council_of(result)
    return result.get("mode") == "parallel" or (
        council is not None and not isinstance(council.get("verdict"), dict)
    )


# ---- the terminal (run, wait) ---------------------------------------------------------


# Plain classes, not dataclasses: making these three cost ~4 ms at import, paid on every
# `run` as it printed its answer (the last thing a caller waits for).
class TerminalAnswer:
    """What ``run``/``wait`` print, in this order: ``table`` (a council's, on stderr), the
    answers (stdout, each whole with its line ends: verbatim for a program reading them),
    then each failed run's diagnostics (stderr)."""

    __slots__ = ("answers", "failures", "table")

    def __init__(self, table: str | None = None) -> None:
        self.table = table
        self.answers: list[str] = []
        self.failures: list[str] = []


def terminal(result: Outcome) -> TerminalAnswer:
    runs = outcome.runs_of(result)
    council = _council_of(result)
    out = TerminalAnswer(table=_council_table(council) if council is not None else None)
    if _is_split(result):
        for i, r in enumerate(runs):
            label = f"[{i + 1}] {r.get('agent') or r.get('backend') or 'run'}: {r.get('status')}"
            out.answers.append(f"## {label}\n\n{(r.get('finalText') or '').rstrip()}\n\n")
    elif result.get("status") == "completed":
        text = result.get("finalText") or ""
        out.answers.append(text if text.endswith("\n") else text + "\n")
    out.failures += [str(_failure(r) or r.get("status")) for r in runs if not _completed(r)]
    return out


# ---- Markdown (an MCP tool's result) --------------------------------------------------

_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def short_paths(text: str, cwd: str | None = None) -> str:
    """``text`` with paths under the working directory made relative to it and paths under
    the home directory written ``~/…``."""
    for base, short in ((cwd or os.getcwd(), ""), (os.path.expanduser("~"), "~/")):
        base = base.rstrip("/")
        if len(base) > 1:
            text = text.replace(base + "/", short)
    return text


def readable_diagnostics(text: str, cwd: str | None = None) -> str:
    """A run's diagnostics for a person reading a tool result: sections as bold labels (a
    transcript shows ``##`` as it is), paths shortened."""
    return short_paths(_HEADING.sub(r"**\1**", text.rstrip()), cwd)


def cwd_of(result: Outcome) -> str | None:
    """The working directory of the job's first run that says one."""
    return next((str(r.get("cwd")) for r in outcome.runs_of(result) if r.get("cwd")), None)


def ids_of(result: Outcome) -> str:
    """``job J · run R`` for a job of one run, else ``job J``."""
    runs = [r.get("runId") for r in outcome.runs_of(result) if r.get("runId")]
    if len(runs) == 1:
        return f"job {result.get('jobId')} · run {runs[0]}"
    return f"job {result.get('jobId')}"


def _md_failure(run: JobRun, cwd: str | None) -> str:
    body = _failure(run) or f"the run ended {run.get('status')}"
    return readable_diagnostics(str(body), cwd)


def _md_run_line(run: JobRun) -> str:
    bits = [f"{outcome.mark(run.get('status'))} {run.get('status')}"]
    bits += outcome.figures(run.get("durationMs"), run.get("usage"))
    bits += outcome.live_notes(run)
    bits.append(f"run {run.get('runId')}")
    return " · ".join(bits)


def markdown(result: Outcome) -> str:
    """The answer (or each run's, for a parallel job) then the job's status line and ids; for
    a job that did not complete, the status line first, then what went wrong."""
    runs = outcome.runs_of(result)
    cwd = cwd_of(result)
    line = f"{outcome.status_line(result)} · {ids_of(result)}"
    council = _council_of(result)
    if result.get("mode") == "council" and council is not None:
        return _md_council(result, council, line)
    parts: list[str] = []
    if result.get("mode") == "parallel":
        for i, run in enumerate(runs):
            body = (
                (run.get("finalText") or "").rstrip() or "(no answer)"
                if _completed(run)
                else _md_failure(run, cwd)
            )
            parts.append(f"**[{i + 1}] {outcome.agent_of(run)}** · {_md_run_line(run)}\n\n{body}")
    elif result.get("status") == "completed":
        parts.append(
            str(result.get("finalText") or "").rstrip() or "(the agent gave an empty answer)"
        )
    else:
        # What went wrong leads: the status line, then each failed run's diagnostics.
        parts.append(line)
        for i, run in enumerate(runs):
            if _completed(run):
                continue
            label = f"**[{i + 1}] {outcome.agent_of(run)}**\n\n" if len(runs) > 1 else ""
            parts.append(f"{label}{_md_failure(run, cwd)}")
        if not runs:
            parts.append(str(result.get("errorMessage") or "no run was started"))
        return "\n\n".join(parts)
    parts.append(line)
    return "\n\n".join(parts)


def _md_council(result: Outcome, council: CouncilRecord, line: str) -> str:
    """The judge's merged answer, or (without a verdict) each member's answer, labelled; or,
    for a council short of its quorum, the status line and why. Then the answers side by
    side and the verdict, as ``show`` prints them (in a code block: Markdown keeps the
    columns), and the status line."""
    completed = result.get("status") == "completed"
    parts: list[str] = []
    if not completed:
        why = result.get("errorMessage")  # the status line names the failed runs
        parts.append(f"{line}\n\n{why}" if why else line)
    elif isinstance(council.get("verdict"), dict):
        merged = str(result.get("finalText") or "").rstrip()
        parts += [merged] if merged else []
    else:
        if result.get("errorMessage"):  # why there is no verdict
            parts.append(f"No verdict: {result.get('errorMessage')}")
        parts += [
            f"**[{m['label']}] {member_name(m)}**\n\n{member_answer(m)}" for m in council["members"]
        ]
    parts.append(f"```\n{_council_table(council)}\n```")
    if completed:
        parts.append(line)
    return "\n\n".join(parts)


def member_name(member: CouncilMember) -> str:
    """``pi (mock/mock-model)``: a council member's agent or backend, and its model."""
    who = str(member.get("agent") or member.get("backend") or "?")
    return f"{who} ({member['model']})" if member.get("model") else who


def member_answer(member: CouncilMember) -> str:
    """A member's answer as a parent reads it: its text (its structured answer is the same
    JSON), or why it did not answer."""
    if member.get("status") != "completed":
        return f"(no answer: {member.get('status')}: {member.get('errorMessage') or ''})".strip()
    return str(member.get("answer") or "").rstrip() or "(an empty answer)"


def answer_value(run: JobRun) -> object:
    """What a run answered, for a program: its structured answer (parsed JSON, under
    ``--output-schema``) when it has one, else its text."""
    structured = run.get("structured")
    return structured if structured is not None else run.get("finalText")


def answer_of(result: Outcome) -> object:
    """A job's answer, for a program: a single run's (parsed JSON under an output schema),
    a chain's last; a list of each run's for a parallel job and for a council without a
    verdict (its members'), the merged answer of a council's verdict."""
    runs = outcome.runs_of(result)
    council = _council_of(result)
    if council is not None and not isinstance(council.get("verdict"), dict):
        members = [
            r for r in runs if r.get("runId") in {m.get("runId") for m in council["members"]}
        ]
        return [answer_value(r) for r in members]
    if result.get("mode") == "parallel":
        return [answer_value(r) for r in runs]
    if result.get("mode") in ("single", "chain") and runs and result.get("status") == "completed":
        return answer_value(runs[-1])
    return result.get("finalText")


# ---- the parent's text (the pi package) -----------------------------------------------


class ParentAnswer:
    """The text a parent model reads, and whether its call failed."""

    __slots__ = ("is_error", "text")

    def __init__(self, text: str, is_error: bool) -> None:
        self.text = text
        self.is_error = is_error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ParentAnswer):
            return NotImplemented
        return (self.text, self.is_error) == (other.text, other.is_error)

    def __hash__(self) -> int:
        return hash((self.text, self.is_error))

    def __repr__(self) -> str:
        return f"ParentAnswer(text={self.text!r}, is_error={self.is_error!r})"


class _Part:
    """One run as the parent's text names it: the step asked, and how it ended (``text``:
    the answer, or what went wrong; ``mark``: a budget that ended it, ``⏹ turn limit 3 ·
    wrapped up (4 turns used)``)."""

    __slots__ = ("agent", "error", "index", "mark", "status", "task", "text")

    def __init__(
        self,
        index: int,
        task: str,
        agent: str | None,
        status: str,
        text: str,
        error: str | None,
        mark: str | None = None,
    ) -> None:
        self.index, self.task, self.agent, self.status = index, task, agent, status
        self.text, self.error, self.mark = text, error, mark


def _said(run: JobRun, status: str) -> str:
    """A run's answer, or what went wrong: a stop in plain words (its diagnostics tell the
    parent nothing those do not), else its diagnostics."""
    if status == "completed":
        return str(run.get("finalText") or "")
    if status == "aborted":
        return plain_why(status, run.get("errorMessage"))
    return _failure(run) or ""


def _parts(result: Outcome, tasks: Sequence[str]) -> list[_Part]:
    """The job's runs, then the steps it never reached (``not run``)."""
    parts: list[_Part] = []
    for i, r in enumerate(outcome.runs_of(result)):
        status = str(r.get("status") or "failed")
        done = status == "completed"
        task = tasks[i] if i < len(tasks) and tasks[i] else outcome.first_line(r.get("task"))
        mark = limit_mark(r)
        parts.append(
            _Part(
                index=i,
                task=task,
                agent=r.get("agent"),
                status=status,
                text=_said(r, status),
                error=None if done else plain_why(status, r.get("errorMessage")),
                mark=f"{mark} ({limit_used(r)})" if mark else None,
            )
        )
    for i in range(len(parts), len(tasks)):
        parts.append(_Part(i, tasks[i], None, "not run", "", None))
    return parts


def parent_text(result: Outcome, tasks: Sequence[str] = ()) -> ParentAnswer:
    """One run: its answer (or why it failed); a chain that completed: its last answer;
    otherwise a section per run (``# 1. task (agent): status``), led by which did not
    complete. An error only when no run completed. ``tasks``: each step's first line, as
    asked (steps a chain never reached are named ``not run``)."""
    parts = _parts(result, tasks)
    if result.get("mode") == "council":
        return _parent_council(result, _council_of(result), parts)
    return _parent_runs(result, parts)


def _parent_runs(result: Outcome, parts: list[_Part]) -> ParentAnswer:
    bad = [p for p in parts if p.status != "completed"]
    is_error = len(bad) == len(parts)
    if len(parts) == 1:
        only = parts[0]
        text = only.text or only.error or f"the run ended {only.status}"
        return ParentAnswer(_marked(text, only.mark), is_error)
    if not bad and result.get("mode") == "chain" and not any(p.mark for p in parts):
        return ParentAnswer(parts[-1].text, is_error)
    sections = []
    for p in parts:
        title = (
            f"# {p.index + 1}. {p.task or 'task'}{f' ({p.agent})' if p.agent else ''}: {p.status}"
            + (f" · {p.mark}" if p.mark else "")
        )
        body = "(not run)" if p.status == "not run" else (p.text or p.error or "").strip()
        sections.append(f"{title}\n\n{body}")
    if bad:
        named = ", ".join(f'"{p.task or f"task {p.index + 1}"}" ({p.status})' for p in bad)
        sections.insert(0, f"{len(bad)} of {len(parts)} tasks did not complete: {named}.")
    return ParentAnswer("\n\n".join(sections), is_error)


def _marked(text: str, mark: str | None) -> str:
    """The answer, then the budget that ended its run (the parent should know the child was
    cut short, not only read its last words)."""
    return f"{text.rstrip()}\n\n{mark}: the run was ended by its budget" if mark else text


def _parent_council(
    result: Outcome, council: CouncilRecord | None, parts: list[_Part]
) -> ParentAnswer:
    """The judge's merged answer; without a verdict each member's answer leads (with why
    there is none); short of its quorum, the status and why. Then the answers side by side
    and the verdict (without a council record: each run's section). An error only when the
    council failed (short of its quorum)."""
    status = result.get("status")
    is_error = status != "completed"
    why = result.get("errorMessage")
    if is_error:
        answered = sum(1 for p in parts if p.status == "completed")
        lead = [f"council {status}: {why or f'{answered} of {len(parts)} runs completed'}"]
    elif council is not None and not isinstance(council.get("verdict"), dict):
        lead = [f"No verdict: {why}"] if why else []
        lead += [
            f"# {m['label']}. {member_name(m)}: {m.get('status')}\n\n{member_answer(m)}"
            for m in council["members"]
        ]
    else:
        merged = str(result.get("finalText") or "").strip()
        lead = [merged] if merged else []
    rest = _council_table(council) if council is not None else _parent_runs(result, parts).text
    return ParentAnswer("\n\n".join([*lead, rest]), is_error)


# ---- a map ----------------------------------------------------------------------------


def map_summary(result: Outcome) -> str:
    """A finished map in one line: how many rows completed, why the others did not."""
    record = result.get("map")
    if record is None:
        why = result.get("errorMessage")
        return f"map {result['jobId']}: {result['status']}" + (f": {why}" if why else "")
    words = f"map {result['jobId']}: {record['completed']}/{record['total']} rows completed"
    if record["completed"] != record["total"]:
        words += f" ({record['summary']})"
    if record.get("out"):
        words += f"; results in {record.get('out')}"
    return words


def map_answer(result: Outcome) -> dict[str, object]:
    """A map's ``answer`` record (``--progress jsonl``, last): its summary as the parent
    reads it, an error only when no row completed, its duration, and its rows counted."""
    record = result.get("map")
    return {
        "type": "answer",
        "jobId": result["jobId"],
        "status": result.get("status"),
        "text": map_summary(result)
        + (
            ""
            if record and record.get("out")
            else f"; each row's answer: `subagents show --rows {result['jobId']}`"
        ),
        "isError": result.get("status") != "completed"
        and (record is None or record["completed"] == 0),
        "durationMs": result.get("durationMs"),
        "map": record,
    }


# ---- show -----------------------------------------------------------------------------


def describe(state: JobState, continues: Callable[[str], list[str]]) -> str:
    """``show``: the job, its figures and note, one line per run (with its worktree and live
    notes, and the runs it continues: ``continues(run_id)``), then the job's answer."""
    lines = [f"job {state['jobId']} · {state.get('mode')} · {state.get('status')}"]
    usage = state.get("usage")
    if state.get("durationMs") is not None:
        cost = usage.get("cost") if usage else None
        lines.append(
            f"{state['durationMs'] / 1000:.1f}s · {usage.get('totalTokens', 0) if usage else 0} tokens"
            + (f" · {money(cost)}" if cost is not None else "")
        )
    if state.get("errorMessage"):
        label = "note" if state.get("status") == "completed" else "error"
        said = state["errorMessage"]
        # A stop in plain words (the signal stays in `show --json`); any other error whole.
        said = plain_why("aborted", said) if state.get("status") == "aborted" else said
        lines.append(f"{label}: {said}")
    runs = state.get("runs")
    record = state.get("map")
    if record is not None:  # the rows: `show --rows`
        lines.append(
            f"rows: {record['completed']}/{record['total']} completed; {record['summary']}"
        )
    elif runs is None and state.get("mode") == "map":
        lines.append("rows: see `subagents show --rows`")
    elif runs is None:
        lines.append(
            "runs: " + ", ".join(r or "(not started)" for r in state.get("runIds") or [])
            or "runs: none yet"
        )
    else:
        for i, r in enumerate(runs):
            what = (
                (r.get("finalText") or "").strip().splitlines()[:1]
                if _completed(r)
                else [outcome.why(r) if r.get("errorMessage") else ""]
            )
            lines.append(
                f"  [{i + 1}] {r.get('agent') or r.get('backend')} {r.get('status')} {r.get('runId') or ''}: {(what or [''])[0][:120]}"
            )
            lines += _run_notes(r, continues)
    if state.get("finalText"):
        lines += ["", str(state["finalText"]).rstrip()]
    return "\n".join(lines)


def _run_notes(r: JobRun, continues: Callable[[str], list[str]]) -> list[str]:
    """What ``show`` adds under a run: its worktree branch, and the runs it continues."""
    notes: list[str] = []
    if "paths" not in r:  # a run never started
        return notes
    wt = r.get("worktree")
    if isinstance(wt, dict):
        if wt.get("error"):
            notes.append(f"      worktree: {wt['error']}")
        elif wt.get("filesChanged"):
            notes.append(
                f"      branch {wt.get('branch')}: {wt['filesChanged']}"
                f" file{'s' if wt['filesChanged'] != 1 else ''} changed,"
                f" +{wt.get('insertions', 0)} -{wt.get('deletions', 0)}"
                f" (subagents apply {r.get('runId')})"
            )
        elif not wt.get("uncommitted"):
            notes.append("      worktree: no changes (branch removed)")
        if wt.get("uncommitted"):
            notes.append(
                f"      worktree: {', '.join(wt['uncommitted'])}: changes a commit cannot hold"
                f" (a submodule's, a nested repository's), kept in {wt['path']}"
            )
    live = outcome.live_notes(r)
    if live:
        notes.append("      " + " · ".join(live))
    if r.get("continuedFrom") and r.get("runId"):
        notes.append("      continues: " + " → ".join(continues(r["runId"])))
    return notes
