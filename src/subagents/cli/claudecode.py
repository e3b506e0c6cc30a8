"""``subagents claude-code …``: what the Claude Code plugin (``integrations/claude-code``)
runs, through its launcher ``scripts/subagents-plugin``.

- ``monitor``: the plugin's monitor, armed by Claude Code at session start. It prints one
  line for each background job of the session that ends, and one for each request or
  question of the session's runs that starts waiting on a decision (the approvals inbox);
  Claude Code shows the line ("Monitor event: …") and hands it to the model, which wakes an
  idle session.
- ``prompt-hook`` (``UserPromptSubmit``): the ends nobody told yet go to the model with the
  prompt (where there is no monitor: ``claude -p``); and the ``/subagents:jobs`` command
  (list, ``show``, ``cost``, ``stop``, and the inbox's ``inbox``, ``approve``, ``deny``,
  ``answer``: cli/claudeinbox.py) is done by the hook itself and shown to the user as
  the reason it blocks the prompt: no model turn (a plugin command's own output reaches
  only the model in Claude Code 2.1.330).
- ``stop-hook`` (``Stop``): each foreground call's outcome line (status, time, tokens,
  cost), as a system message at the end of the turn: Claude Code shows an MCP call only as
  "Called plugin:subagents:subagents", and a tool hook's message only inside that row.
- ``session-start`` (``SessionStart``): checks that the plugin's MCP server can start here,
  and says what is wrong, once, when it cannot.
- ``statusline``: a status line of the session's running jobs, for users who set it as their
  ``statusLine`` (Claude Code 2.1.330 lets a plugin set only ``agent`` and
  ``subagentStatusLine``, not the status line).

Every end is told once per Claude session, by whichever of them comes first (one record,
``lifecycle.notices``), never for a job stopped through this session's MCP server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

from subagents.cli.app import main

if TYPE_CHECKING:
    from pathlib import Path

    from subagents.service import JobStore
    from subagents.types import AgentEvent, JobState, JsonObject, JsonValue

EXIT_HOOK_ERROR = 1  # Claude Code shows a hook's stderr for it; 2 would block the prompt
JOBS_COMMAND = "/subagents:jobs"
_JOBS_PROMPT = re.compile(rf"^\s*{re.escape(JOBS_COMMAND)}(?:\s+(.*))?$", re.DOTALL)
HOOK_TABLE_WIDTH = 110  # columns of a table shown in Claude Code's transcript
RESULT_WAIT_SECONDS = 2.0  # an end entry is logged just before the job's result (ms before)
# /subagents:jobs words for the approvals inbox (cli/claudeinbox.py).
INBOX_VERBS = ("inbox", "approve", "deny", "answer")
# How often the monitor looks at the inbox for the session's items (docs/approvals.md).
INBOX_EVERY = 1.0


def _hook_fail(message: str) -> NoReturn:
    click.echo(f"subagents claude-code: {message}", err=True)
    sys.exit(EXIT_HOOK_ERROR)


def _hook_input() -> JsonObject:
    try:
        payload: JsonValue = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        _hook_fail(f"the hook input is not JSON: {exc}")
    if not isinstance(payload, dict):
        _hook_fail("the hook input is not a JSON object")
    return payload


def _session(claude_id: object, where: str) -> str:
    """The lifecycle session of a Claude Code session id (``claude-<id>``)."""
    from subagents.errors import UsageError
    from subagents.lifecycle import notices

    if not isinstance(claude_id, str) or not claude_id:
        _hook_fail(f"{where} has no Claude Code session id")
    try:
        return notices.claude_session(claude_id)
    except (ValueError, UsageError) as exc:
        _hook_fail(f"{where}: {exc}")


def _for_session(where: str, make: Callable[[str], str]) -> str:
    """``make(session)`` for the Claude Code session of the hook input on stdin (``where``
    names that input in a failure)."""
    payload = _hook_input()
    session = _session(payload.get("session_id"), where)
    try:
        return make(session)
    except (ValueError, OSError) as exc:
        _hook_fail(str(exc))


def _with_result(store: JobStore, entry: AgentEvent) -> JobState | None:
    """The job of an end entry, with its result (waited for briefly: the entry is logged
    just before it); None when its directory is gone."""
    from subagents import service

    job_id = str(entry.get("jobId"))
    try:
        state = store.load(job_id)
        if state.get("runs") is None:
            state = service.wait_job(store, job_id, RESULT_WAIT_SECONDS) or state
    except (OSError, ValueError):
        return None
    return state


def untold_ends(session: str, reader: str) -> list[tuple[AgentEvent, JobState | None]]:
    """The ends of the session's background jobs this *reader* was not told yet, each with
    its job (None when its directory is gone: told rather than lost); from now on they count
    as told. Foreground jobs are left out: their caller had the answer."""
    from subagents.core import paths
    from subagents.lifecycle import notices
    from subagents.service import JobStore

    home = paths.state_home()
    store = JobStore(home)
    out = []
    for entry in notices.take_new_ends(home, session, reader):
        job = _with_result(store, entry)
        if job is None or job.get("background", True):
            out.append((entry, job))
    return out


# ---- the /subagents:jobs command, shown by the prompt hook ------------------------------


def _render(renderable: Any) -> str:
    """A rich renderable as plain text (the transcript shows no colours)."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=HOOK_TABLE_WIDTH, color_system=None, highlight=False).print(
        renderable
    )
    return buffer.getvalue().rstrip()


def jobs_view(session: str, args: str) -> str:
    """What ``/subagents:jobs ARGS`` does and shows the user: the session's jobs (no
    arguments), one job (``show JOB``), the session's cost (``cost``), or stops a job
    (``stop JOB``: its end is then no news to this session) and says how it ended."""
    from subagents import service
    from subagents.cli.jobs import jobs_table
    from subagents.core.childtext import neutralize
    from subagents.errors import JobIdError
    from subagents.service import TERMINAL, JobStore

    words = args.split()
    if words and words[0] in INBOX_VERBS:
        from subagents.cli.claudeinbox import inbox_view

        return inbox_view(session, words)
    if not words:
        items = service.list_jobs(20, session=session)
        if not items:
            return "No subagents jobs in this session yet."
        return "Subagents jobs of this session:\n" + "\n".join(
            jobs_table(items, wide=True).lines(HOOK_TABLE_WIDTH)
        )
    if words[0] in ("show", "stop") and len(words) == 2:
        store = JobStore()
        try:
            job_id = store.resolve(words[1])
            state = service.job_state(store, job_id)
        except JobIdError as exc:
            return str(exc)
        if words[0] == "stop":
            return neutralize(_stop(store, session, state))
        text = service.describe_job(state)
        if state.get("status") not in TERMINAL:
            activity = service.current_activity(store.home, state.get("runIds") or [])
            text += f"\nnow: {activity}" if activity else ""
        return neutralize(text)
    if words == ["cost"]:
        from subagents.core import paths
        from subagents.lifecycle import cost

        total = cost.totals(cost.end_entries(paths.state_home(), session))["total"]
        return f"Subagents cost of this session: {cost.describe(total)}"
    return f"usage: {JOBS_COMMAND} [show JOB | stop JOB | cost | inbox | approve ITEM | deny ITEM]"


STOP_GRACE_SECONDS = 5.0  # a run's grace after SIGTERM: the hook's timeout holds two


def _stop(store: JobStore, session: str, state: JobState) -> str:
    """Stop the job of ``state`` and say how it ended (or that it had already)."""
    from subagents import service
    from subagents.lifecycle import notices
    from subagents.present import outcome
    from subagents.service import TERMINAL

    job_id = state["jobId"]
    if state.get("status") in TERMINAL:
        return f"Job {job_id} had already ended: {outcome.job_line(state)}"
    if state.get("session") == session:  # stopped from this session: its end is no news
        notices.mark_told(store.home, session, job_id, notices.CLAUDE_READER)
    ended = service.stop_job(store, job_id, grace=STOP_GRACE_SECONDS)
    if ended.get("runs") is None:
        return f"Job {job_id}: {ended.get('status')}"
    return f"Stopped: {outcome.job_line(ended)}"


@main.group("claude-code")
def claude_code() -> None:
    """What the Claude Code plugin runs: its monitor and its hooks (see docs/claude-code.md)."""


@claude_code.command("prompt-hook")
def prompt_hook() -> None:
    """Claude Code's UserPromptSubmit hook: the hook's JSON on stdin, its answer on stdout.

    Ends of background jobs not told yet go to the model as additional context; the
    /subagents:jobs command's view goes to the user as a system message.
    """
    run_prompt_hook()


def run_prompt_hook() -> None:
    from subagents.lifecycle import notices

    payload = _hook_input()
    session = _session(payload.get("session_id"), "the hook input")
    command = _JOBS_PROMPT.match(str(payload.get("prompt") or ""))
    output: dict[str, object] = {}
    try:
        if command:
            # Done here, shown to the user, and the prompt goes no further: no model turn.
            # (The ends not told yet wait for the next prompt or the monitor.)
            output = {
                "decision": "block",
                "reason": jobs_view(session, command.group(1) or ""),
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "suppressOriginalPrompt": True,
                },
            }
        elif ended := untold_ends(session, notices.CLAUDE_READER):
            output["hookSpecificOutput"] = {
                "hookEventName": "UserPromptSubmit",
                "additionalContext": notices.notice_text(ended),
            }
    except (ValueError, OSError) as exc:
        _hook_fail(str(exc))
    if output:
        click.echo(json.dumps(output, ensure_ascii=False, allow_nan=False))


@claude_code.command("stop-hook")
def stop_hook() -> None:
    """Claude Code's Stop hook: the outcome line (status, time, tokens, cost) of each
    foreground call of the plugin's tools that ended this turn, shown to the user as a
    system message (Claude Code shows an MCP call only as "Called …")."""
    message = _for_session("the hook input", lambda session: "\n".join(outcome_lines(session)))
    if message:
        click.echo(json.dumps({"systemMessage": message}, ensure_ascii=False, allow_nan=False))


OUTCOME_READER = "claude-code-outcomes"  # the Stop hook's own record of the ends it showed


def outcome_lines(session: str) -> list[str]:
    """``subagents: ✓ completed · pi · 3.4s · 60 tokens · $0.00004 · job 01m8…`` for each
    foreground job of the session that ended since the last time (background ones have
    their notices)."""
    from subagents.core import paths
    from subagents.core.childtext import neutralize
    from subagents.lifecycle import notices
    from subagents.present import outcome
    from subagents.service import JobStore

    home = paths.state_home()
    store = JobStore(home)
    lines = []
    for entry in notices.take_new_ends(home, session, OUTCOME_READER):
        job = _with_result(store, entry)
        if job is None or job.get("background", True) or job.get("runs") is None:
            continue
        lines.append(neutralize(f"subagents: {outcome.status_line(job)} · job {job['jobId']}"))
    return lines


@claude_code.command("monitor")
def monitor() -> None:
    """The plugin's monitor: one line per background job of this Claude Code session that
    ends ($CLAUDE_CODE_SESSION_ID), until Claude Code ($CLAUDE_PID) is gone."""
    from subagents.core import paths, procs
    from subagents.lifecycle import history, notices, sessionlog

    session = _session(os.environ.get(notices.CLAUDE_SESSION_ENV), "the environment")
    claude = None
    if os.environ.get("CLAUDE_PID", "").isdigit():
        try:
            claude = procs.identity(int(os.environ["CLAUDE_PID"]))
        except Exception:
            claude = None
    parent = os.getppid()

    def gone() -> bool:
        if claude is not None:
            return not procs.is_alive(claude)
        return os.getppid() != parent

    def tell() -> None:
        try:
            ends = untold_ends(session, notices.CLAUDE_READER)
        except (OSError, ValueError) as exc:  # a monitor that ends is news: say it, go on
            click.echo(f"subagents claude-code monitor: {exc}", err=True)
            return
        with _SAYING:
            for entry, job in ends:
                click.echo(notices.describe_end(entry, job, answer=True))
            sys.stdout.flush()

    log = sessionlog.session_path(paths.state_home(), session)
    signal.signal(signal.SIGTERM, _stopped_monitor)
    threading.Thread(target=_watch_inbox, args=(session, gone), daemon=True).start()
    try:
        # From the log's start: ends nobody told yet are told at once (each at most once).
        for entry in history.follow(log, stop=gone, from_start=True):
            if entry.get("eventType") in sessionlog.END_EVENT_TYPES:
                tell()
    except (BrokenPipeError, KeyboardInterrupt):
        return


# One line at a time on the monitor's stdout (its ends and the inbox's watch).
_SAYING = threading.Lock()


def _watch_inbox(session: str, gone: Callable[[], bool]) -> None:
    """The monitor's second half: a line for each item of the session that starts waiting
    on a decision (each once while this monitor lives), which wakes an idle session."""
    from subagents.cli.claudeinbox import session_items, waiting_notice

    told: set[str] = set()
    while not gone():
        try:
            items = [i for i in session_items(session) if i["id"] not in told]
        except (OSError, ValueError):
            items = []  # (looked at again in a second)
        if items:
            with _SAYING:
                for item in items:
                    click.echo(waiting_notice(item))
                sys.stdout.flush()
            told.update(i["id"] for i in items)
        time.sleep(INBOX_EVERY)


MONITOR_OFF = (
    "subagents: job-end notices are off for this session: a background job's end no longer"
    " shows here as it happens nor wakes the session; it is told with the next prompt"
    " instead, and /subagents:jobs lists the jobs."
)


def _stopped_monitor(signum: int, frame: object) -> None:
    """The monitor stopped (Claude Code's "x to stop"): say what is lost, then end."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(MONITOR_OFF)
        sys.stdout.flush()
    os._exit(0)


@claude_code.command("statusline")
def statusline() -> None:
    """A Claude Code status line (``statusLine`` in your settings; a plugin cannot set it):
    this session's running subagents jobs and what each does now, or nothing."""
    line = _for_session("the status line input", running_line)
    if line:
        click.echo(line)


def running_line(session: str, limit: int = 20) -> str:
    """``subagents: 2 running · 01m8…: $ sleep 3 (12s) · 01m9…: starting (2s)``, or ""."""
    import time

    from subagents import service
    from subagents.core.childtext import neutralize
    from subagents.present.figures import elapsed
    from subagents.service import TERMINAL

    running = [
        j for j in service.list_jobs(limit, session=session) if j.get("status") not in TERMINAL
    ]
    if not running:
        return ""
    parts = [f"subagents: {len(running)} running"]
    for job in running:
        took = time.time() - float(job.get("createdAt") or time.time())
        now = job.get("activity") or "starting"
        parts.append(f"{job['jobId']}: {now} ({elapsed(took)})")
    return neutralize(" · ".join(parts))


@claude_code.command("session-start")
def session_start() -> None:
    """Claude Code's SessionStart hook: is the plugin's MCP server able to start here? Says
    what is wrong, once, when it is not (nothing when all is well)."""
    payload = _hook_input()
    problem = server_problem(payload.get("session_id"))
    if problem is None:
        return
    click.echo(
        json.dumps(
            {
                "systemMessage": f"subagents plugin: its MCP server cannot serve: {problem}",
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": (
                        "The subagents plugin's MCP server cannot serve this session "
                        f"({problem}): its subagent tools are not available."
                    ),
                },
            },
            ensure_ascii=False,
        )
    )


def server_problem(claude_id: object) -> str | None:
    """Why the plugin's MCP server would not start or not serve here, or None: the steps
    ``subagents mcp --claude-session`` takes before it serves (the session, the MCP SDK),
    then what every call needs (the config files, a writable state directory)."""

    from subagents.cli.serve import claude_session_of
    from subagents.config import load_settings
    from subagents.core import paths
    from subagents.core.files import describe_os_error, make_private_dir, write_json_atomic

    try:
        session = claude_session_of(claude_id if isinstance(claude_id, str) else "")
        home = paths.state_home()
        stamp = home / SERVER_CHECKED
        installed = _installed()
        trusted = installed is not None and _read_stamp(stamp) == installed
        if not trusted:
            from subagents.mcp import SubagentsMCP

            SubagentsMCP(session=session).close()
        load_settings(paths.working_dir(), os.environ)
        make_private_dir(home)
        if not os.access(home, os.W_OK):
            return f"{home}: not writable"
        if installed is not None and not trusted:
            write_json_atomic(stamp, installed)
    except OSError as exc:
        return describe_os_error(exc)
    except Exception as exc:  # whatever stops the server stops it here too: say it
        return str(exc) or type(exc).__name__
    return None


# The server's import and making cost ~1.5 s of CPU (the MCP SDK's types), at every Claude
# session's start, while Claude starts the server itself: done once per installation. The
# stamp names what the outcome depends on; a change to any of it checks again.
SERVER_CHECKED = "mcp-server-checked.json"


def _installed() -> list[object] | None:
    """This interpreter, the MCP SDK's install directory (pip adds or removes a dist-info in
    it with every install or upgrade there) and our MCP modules, with their times; None
    when the SDK cannot be found (the full check then says why)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("mcp")  # found, not imported
    ours = importlib.util.find_spec("subagents.mcp")
    if spec is None or spec.origin is None or ours is None or ours.origin is None:
        return None
    site = Path(spec.origin).parent.parent
    modules = Path(ours.origin).parent
    newest = max((f.stat().st_mtime_ns for f in modules.glob("*.py")), default=0)
    return [sys.executable, str(site), site.stat().st_mtime_ns, str(modules), newest]


def _read_stamp(path: Path) -> object:
    from subagents.core.files import read_json

    try:
        return read_json(path)
    except (OSError, ValueError):
        return None
