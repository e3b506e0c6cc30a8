"""mcp — the MCP server: the tools and resources (``server``), their arguments (``args``), the
results they answer (``results``), progress notifications (``progress``), the foreground jobs
it drives and aborts with their call (``foreground``), job-ended notifications to resource
subscribers (``notify``), and serving over stdio or HTTP behind a bearer token (``transport``).

May import: everything below the surfaces (api, jobs, lifecycle, runs, present, core, config).
"""

from subagents.core.lazy import exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.mcp.args import build_spec as build_spec
    from subagents.mcp.results import answer_text as answer_text
    from subagents.mcp.results import compact_result as compact_result
    from subagents.mcp.server import SubagentsMCP as SubagentsMCP
    from subagents.mcp.transport import DEFAULT_PORT as DEFAULT_PORT
    from subagents.mcp.transport import TOKEN_ENV as TOKEN_ENV
    from subagents.mcp.transport import http_token as http_token
    from subagents.mcp.transport import serve_http as serve_http
    from subagents.mcp.transport import serve_stdio as serve_stdio

_NAMES = {
    "SubagentsMCP": "server",
    "serve_stdio": "transport",
    "serve_http": "transport",
    "http_token": "transport",
    "DEFAULT_PORT": "transport",
    "TOKEN_ENV": "transport",
    "answer_text": "results",
    "compact_result": "results",
    "build_spec": "args",
}
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
if not TYPE_CHECKING:
    __getattr__ = exports(__name__, _NAMES)
