"""What can run here: ``agents`` and ``doctor``."""

from __future__ import annotations

import json
import sys

import click

from subagents.cli.app import fail, main

# ---- agents ------------------------------------------------------------------


@main.group(invoke_without_command=True)
@click.option(
    "--agent-scope",
    type=click.Choice(["user", "both"]),
    help="'both' also lists project-local agents.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def agents(ctx: click.Context, agent_scope: str | None, as_json: bool) -> None:
    """List agents: name, source, description. Broken files are reported, not hidden."""
    ctx.obj = {"scope": agent_scope}
    if ctx.invoked_subcommand is not None:
        return
    from subagents import service

    found = service.discover_agents(agent_scope)
    if as_json:
        for a in found.agents.values():
            click.echo(
                json.dumps(
                    {
                        "name": a.name,
                        "source": a.source,
                        "path": str(a.path) if a.path else None,
                        "description": a.description,
                        "backend": a.backend,
                        "model": a.model,
                    }
                )
            )
    else:
        width = max((len(n) for n in found.agents), default=4)
        for a in sorted(found.agents.values(), key=lambda x: x.name):
            click.echo(f"{a.name:<{width}}  {a.source:<8}  {a.description}")
    for problem in found.problems:
        click.echo(f"warning: {problem}", err=True)


@agents.command("show")
@click.argument("name")
@click.pass_context
def agents_show(ctx: click.Context, name: str) -> None:
    """Print one agent definition."""
    from subagents import api, service

    try:
        a = service.get_agent(name, (ctx.obj or {}).get("scope"))
    except api.BadRequest as exc:
        fail(str(exc))
    click.echo(f"name: {a.name}\nsource: {a.source}" + (f" ({a.path})" if a.path else ""))
    click.echo(f"description: {a.description}")
    for key in ("backend", "model", "thinking", "tools", "timeout"):
        value = getattr(a, key)
        if value is not None:
            click.echo(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    click.echo("\n" + a.system_prompt.rstrip())


# ---- doctor --------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--reindex",
    is_flag=True,
    help="Make the local index of jobs and session logs again from the files, then exit.",
)
def doctor(as_json: bool, reindex: bool) -> None:
    """For each backend: found or not, version, whether it looks usable, how to install it.

    Exits 1 when no backend is usable (nothing could run), 0 otherwise. With --reindex it
    only makes the index that `ps`, `history`, `cost` and the web fleet read again from the
    job files and session logs (they do it themselves when it is missing or damaged)."""
    from dataclasses import asdict

    if reindex:
        import sqlite3

        try:
            from subagents import service

            jobs, entries = service.reindex()
        except (sqlite3.Error, OSError) as exc:
            fail(f"cannot write the index: {exc}")
        click.echo(f"index made again: {jobs} jobs, {entries} session-log entries")
        return

    from subagents.cli.doctor import check_backends, render_text
    from subagents.config import load_settings
    from subagents.errors import ConfigError

    try:
        settings = load_settings()  # config [bins] count, as for a run
    except ConfigError as exc:
        fail(str(exc))
    checks = check_backends(settings=settings)
    if as_json:
        for c in checks:
            click.echo(json.dumps(asdict(c), ensure_ascii=False, allow_nan=False))
    else:
        import os

        from subagents.cli.doctor import warm_server_line

        click.echo(render_text(checks), nl=False)
        click.echo(f"\n{warm_server_line(os.environ)}")
    if not any(c.usable for c in checks):
        if not as_json:
            click.echo("subagents: no backend is usable here; install one (see above)", err=True)
        sys.exit(1)
