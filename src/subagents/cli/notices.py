"""``subagents notices``: the background jobs that ended since the last look, each told once
(the Claude Code plugin's ``UserPromptSubmit`` hook runs ``subagents notices --claude-hook``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from subagents.cli.app import fail, main
from subagents.errors import UsageError

HOOK_EVENT = "UserPromptSubmit"
EXIT_HOOK_ERROR = 1  # Claude Code shows a hook's stderr for it; 2 would block the prompt


def _background_only(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop the ends of foreground jobs: their caller already had the answer."""
    from subagents.jobs import JobStore

    store = JobStore()
    out = []
    for entry in entries:
        try:
            background = store.load(str(entry.get("jobId"))).get("background", True)
        except (OSError, ValueError):
            background = True  # its directory is gone: tell rather than lose it
        if background:
            out.append(entry)
    return out


def _hook_session() -> str:
    """The lifecycle session of the Claude Code session named by the hook's stdin JSON."""
    from subagents.lifecycle import notices

    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        click.echo(f"subagents notices: the hook input is not JSON: {exc}", err=True)
        sys.exit(EXIT_HOOK_ERROR)
    claude_id = payload.get("session_id") if isinstance(payload, dict) else None
    if not isinstance(claude_id, str) or not claude_id:
        click.echo("subagents notices: the hook input has no session_id", err=True)
        sys.exit(EXIT_HOOK_ERROR)
    try:
        return notices.claude_session(claude_id)
    except (ValueError, UsageError) as exc:
        click.echo(f"subagents notices: {exc}", err=True)
        sys.exit(EXIT_HOOK_ERROR)


@main.command("notices")
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
@click.option(
    "--claude-hook",
    is_flag=True,
    help="Run as Claude Code's UserPromptSubmit hook: the hook's JSON on stdin, the "
    "notice as additionalContext on stdout.",
)
@click.option("--json", "as_json", is_flag=True, help="The end entries as JSON lines.")
def notices_command(session: str | None, claude_hook: bool, as_json: bool) -> None:
    """The background jobs of a session that ended since the last call, each told once.

    Which ends were told is kept per session under $SUBAGENTS_HOME/notices/, so a job's end
    is announced exactly once, whoever asks when.
    """
    from subagents.core import paths
    from subagents.lifecycle import notices, sessionlog

    reader = "claude-code" if claude_hook else "cli"
    if claude_hook:
        session = _hook_session()
    try:
        session = session or sessionlog.default_session_id()
        ended = notices.take_new_ends(paths.state_home(), session, reader)
    except (ValueError, OSError) as exc:
        if claude_hook:
            click.echo(f"subagents notices: {exc}", err=True)
            sys.exit(EXIT_HOOK_ERROR)
        fail(str(exc))
    ended = _background_only(ended)
    if claude_hook:
        if ended:
            context = notices.notice_text(ended)
            output = {
                "hookSpecificOutput": {"hookEventName": HOOK_EVENT, "additionalContext": context}
            }
            click.echo(json.dumps(output, ensure_ascii=False))
        return
    for entry in ended:
        click.echo(
            json.dumps(entry, ensure_ascii=False) if as_json else notices.describe_end(entry)
        )
