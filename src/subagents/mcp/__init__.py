"""mcp — the MCP server: the tools and resources (``server``), their arguments (``args``), the
results they answer (``results``), progress notifications (``progress``), the foreground jobs
it drives and aborts with their call (``foreground``), job-ended notifications to resource
subscribers (``notify``), and serving over stdio or HTTP behind a bearer token (``transport``).

May import: everything below the surfaces but jobs, which it reaches through the service
(api, service, lifecycle, runs, present, core, config).
"""

from subagents.mcp.args import build_spec
from subagents.mcp.results import answer_text, compact_result
from subagents.mcp.server import SubagentsMCP
from subagents.mcp.transport import DEFAULT_PORT, TOKEN_ENV, http_token, serve_http, serve_stdio

__all__ = [
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "SubagentsMCP",
    "answer_text",
    "build_spec",
    "compact_result",
    "http_token",
    "serve_http",
    "serve_stdio",
]
