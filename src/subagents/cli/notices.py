"""``subagents notices``: the background jobs that ended since the last look, each told once.
(``--claude-hook`` is the Claude Code plugin's ``UserPromptSubmit`` hook, as
``subagents claude-code prompt-hook``.)"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from subagents.cli.app import fail, main

RESULT_WAIT_SECONDS = 2.0  # an end entry is logged just before the job's result (ms before)


def _with_result(store: Any, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The job of an end entry, with its result (waited for briefly: the entry is logged
    just before it); None when its directory is gone."""
    from subagents import api

    job_id = str(entry.get("jobId"))
    try:
        state: dict[str, Any] = store.load(job_id)
        if state.get("runs") is None:
            state = api.wait_job(store, job_id, RESULT_WAIT_SECONDS) or state
    except (OSError, ValueError):
        return None
    return state


def untold_ends(session: str, reader: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The ends of the session's background jobs this *reader* was not told yet, each with
    its job (None when its directory is gone: told rather than lost); from now on they count
    as told. Foreground jobs are left out: their caller had the answer."""
    from subagents.core import paths
    from subagents.jobs import JobStore
    from subagents.lifecycle import notices

    home = paths.state_home()
    store = JobStore(home)
    out = []
    for entry in notices.take_new_ends(home, session, reader):
        job = _with_result(store, entry)
        if job is None or job.get("background", True):
            out.append((entry, job))
    return out


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
    from subagents.lifecycle import notices, sessionlog

    if claude_hook:
        from subagents.cli.claudecode import run_prompt_hook

        run_prompt_hook()
        return
    try:
        ended = untold_ends(session or sessionlog.default_session_id(), "cli")
    except (ValueError, OSError) as exc:
        fail(str(exc))
    for entry, job in ended:
        click.echo(
            json.dumps(entry, ensure_ascii=False) if as_json else notices.describe_end(entry, job)
        )
