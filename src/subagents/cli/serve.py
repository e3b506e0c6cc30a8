"""``subagents mcp`` (the MCP server over stdio or HTTP) and ``subagents web`` (the dashboard)."""

from __future__ import annotations

import click

from subagents.cli.app import fail, main

# ---- MCP server ------------------------------------------------------------------------


@main.command("mcp")
@click.option(
    "--http",
    "http",
    is_flag=True,
    help="Serve streamable HTTP on 127.0.0.1 instead of stdio (bearer token required).",
)
@click.option(
    "--port",
    type=int,
    default=8765,
    show_default=True,
    help="With --http: the port (0 picks a free one).",
)
@click.option(
    "--claude-session",
    is_flag=True,
    help="Stdio only: record jobs in the lifecycle session of the Claude Code session that "
    "started the server (claude-$CLAUDE_CODE_SESSION_ID), where the plugin's hook looks.",
)
def mcp_server(http: bool, port: int, claude_session: bool) -> None:
    """Serve the subagents MCP server: stdio, or with --http streamable HTTP on 127.0.0.1.

    With --http every request needs `Authorization: Bearer <token>`: the token is
    $SUBAGENTS_MCP_TOKEN, else a new one printed on stderr at start. See docs/mcp.md.
    """
    import os

    from subagents.lifecycle import notices

    session = None
    if claude_session:
        if http:
            fail("--claude-session is for stdio: over HTTP each MCP session has its own")
        session = claude_session_of(os.environ.get(notices.CLAUDE_SESSION_ENV, ""))
        if session is None:  # still serve: only the end notices need the link
            click.echo(
                f"subagents mcp: --claude-session: ${notices.CLAUDE_SESSION_ENV} is not set; "
                "using a session of this server's own",
                err=True,
            )
    try:
        from subagents.mcp import serve_http, serve_stdio
    except ImportError as exc:
        fail(f"the MCP server needs the 'mcp' package (pip install 'mcp>=2.3'): {exc}")
    if http:
        serve_http(port)
    else:
        serve_stdio(session)


def claude_session_of(claude_id: str) -> str | None:
    """The lifecycle session ``--claude-session`` records in for this Claude Code session id
    (None without one); a UsageError naming the variable when the id is not path-safe."""
    from subagents.errors import UsageError
    from subagents.lifecycle import notices

    try:
        return notices.claude_session(claude_id) if claude_id else None
    except (ValueError, UsageError) as exc:
        raise UsageError(f"${notices.CLAUDE_SESSION_ENV}: {exc}") from None


# ---- web dashboard ---------------------------------------------------------------------


@main.command("web")
@click.option(
    "--port", type=int, default=8766, show_default=True, help="The port (0 picks a free one)."
)
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in the browser.")
def web(port: int, open_browser: bool) -> None:
    """Serve the web dashboard on 127.0.0.1: every job live, transcripts, diffs, cost.

    It prints its address once, with the token that signs a browser in: the token is
    $SUBAGENTS_WEB_TOKEN, else web_token in the config, else a new one. Programs may send
    `Authorization: Bearer <token>`. See docs/web.md.
    """
    from subagents.web import serve_web

    serve_web(port, open_browser=open_browser)
