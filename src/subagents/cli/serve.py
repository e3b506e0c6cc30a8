"""``subagents mcp``: the MCP server over stdio or HTTP."""

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
def mcp_server(http: bool, port: int) -> None:
    """Serve the subagents MCP server: stdio, or with --http streamable HTTP on 127.0.0.1.

    With --http every request needs `Authorization: Bearer <token>`: the token is
    $SUBAGENTS_MCP_TOKEN, else a new one printed on stderr at start. See docs/mcp.md.
    """
    try:
        from subagents.mcp import serve_http, serve_stdio
    except ImportError as exc:
        fail(f"the MCP server needs the 'mcp' package (pip install 'mcp>=2.3'): {exc}")
    if http:
        serve_http(port)
    else:
        serve_stdio()
