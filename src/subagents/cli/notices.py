"""``subagents notices``: the background jobs that ended since the last look, each told once.
(``--claude-hook`` is the Claude Code plugin's ``UserPromptSubmit`` hook, as
``subagents claude-code prompt-hook``.)"""

from __future__ import annotations

import json

import click

from subagents.cli.app import fail, main


@main.command("notices")
@click.option("--session", "-s", help="Session (default: $SUBAGENTS_SESSION or 'default').")
@click.option(
    "--claude-hook",
    is_flag=True,
    help="Run as Claude Code's UserPromptSubmit hook (as `subagents claude-code prompt-hook`).",
)
@click.option("--json", "as_json", is_flag=True, help="The end entries as JSON lines.")
def notices_command(session: str | None, claude_hook: bool, as_json: bool) -> None:
    """The background jobs of a session that ended since the last call, each told once.

    Which ends were told is kept per session under $SUBAGENTS_HOME/notices/, so a job's end
    is announced exactly once, whoever asks when.
    """
    from subagents.cli.claudecode import run_prompt_hook, untold_ends
    from subagents.lifecycle import notices, sessionlog

    if claude_hook:
        run_prompt_hook()
        return
    try:
        ended = untold_ends(session or sessionlog.default_session_id(), "cli")
    except (ValueError, OSError) as exc:
        fail(str(exc))
    for entry, job in ended:
        click.echo(
            json.dumps(entry, ensure_ascii=False, allow_nan=False)
            if as_json
            else notices.describe_end(entry, job)
        )
