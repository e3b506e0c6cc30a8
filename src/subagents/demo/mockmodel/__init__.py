"""A loopback mock model server speaking the APIs of the agent CLIs.

Used to run real agent CLIs end to end without a real model::

    with MockModelServer(Script(command="ls")) as srv:
        env = {**os.environ, **write_pi_config(tmp / "pi-agent", srv.url)}
        subprocess.run(["pi", "--mode", "json", "-p", "--no-session",
                        "--provider", "mock", "--model", "mock-model", "list files"],
                       stdin=subprocess.DEVNULL, env=env, timeout=60)

One server answers every API on the same port (``srv.url`` = ``http://HOST:PORT``):

=================  ==========================================================  ============
API                endpoints                                                   used by
=================  ==========================================================  ============
OpenAI Chat        ``POST /v1/chat/completions`` (SSE and plain),              pi, opencode
                   ``GET /v1/models``
Anthropic          ``POST /v1/messages`` (SSE and plain),                      claude
                   ``POST /v1/messages/count_tokens``, ``GET /v1/models``
OpenAI Responses   ``POST /v1/responses`` (SSE and plain)                      codex
Gemini             ``POST /v1beta/models/M:streamGenerateContent[?alt=sse]``,  gemini
                   ``:generateContent``, ``:countTokens``,
                   ``GET /v1beta/models``
=================  ==========================================================  ============

The answer is decided *statelessly* from the request's conversation (see
:class:`Script`), so concurrent runs against one server do not interfere; only the
error budget (``error_times``) is a server-wide counter.  The tool call is, unless the
script names one, the calling CLI's own shell tool (:data:`SHELL_TOOLS`), so the CLI
really runs ``Script.command``; ``Script.per_api`` gives an API a script of its own.  ``write_*_config`` point each CLI at the server.

Run ``python -m subagents.demo.mockmodel --help`` for a foreground server.
"""

from __future__ import annotations

from subagents.demo.mockmodel.clis import (
    pi_argv,
    write_claude_config,
    write_codex_config,
    write_gemini_config,
    write_opencode_config,
    write_pi_config,
)
from subagents.demo.mockmodel.script import (
    ANTHROPIC,
    CHAT,
    CLAUDE_MODEL,
    CODEX_MODEL,
    GEMINI,
    GEMINI_MODEL,
    MODEL_ID,
    OPENCODE_MODEL,
    PROVIDER,
    RESPONSES,
    SHELL_TOOLS,
    Script,
    later_user_message,
)
from subagents.demo.mockmodel.server import MockModelServer, Served

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "CLAUDE_MODEL",
    "CODEX_MODEL",
    "GEMINI",
    "GEMINI_MODEL",
    "MODEL_ID",
    "OPENCODE_MODEL",
    "PROVIDER",
    "RESPONSES",
    "SHELL_TOOLS",
    "MockModelServer",
    "Script",
    "Served",
    "later_user_message",
    "pi_argv",
    "write_claude_config",
    "write_codex_config",
    "write_gemini_config",
    "write_opencode_config",
    "write_pi_config",
]
