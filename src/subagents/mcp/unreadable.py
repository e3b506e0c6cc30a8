"""A request the MCP SDK cannot read is answered, not dropped.

The SDK's stdio transport parses each line with pydantic, whose JSON parser refuses a lone
surrogate escape (``"\\ud800"``) that JSON itself allows. It hands the parse error to the
session, which only logs it: the client's request waits forever (upstream: the
modelcontextprotocol python-sdk's ``stdio_server``, mcp 2.3). Here such a line is read
again with the standard library; when it is a request (it has an ``id``), it is answered
with a JSON-RPC "invalid params" error naming the field, as the command line and the web
refuse the same text. Anything else goes on to the session as before.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, ErrorData, JSONRPCError
from pydantic import ValidationError

from subagents.core.inputs import text_problem
from subagents.types import JsonValue

Item = SessionMessage | Exception


class AnswerUnreadable:
    """The session's read stream, with every unreadable request answered on ``replies``."""

    def __init__(self, inner: Any, replies: Any) -> None:
        self.inner = inner
        self.replies = replies

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context from here
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Item:
        return await self._next(self.inner.receive)

    def __aiter__(self) -> AnswerUnreadable:
        return self

    async def __anext__(self) -> Item:
        return await self._next(self.inner.__anext__)

    async def _next(self, take: Callable[[], Awaitable[Item]]) -> Item:
        """The next item the session should see; an unreadable request is answered here."""
        while True:
            item = await take()
            error = refusal(item)
            if error is None:
                return item
            await self.replies.send(SessionMessage(error))

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> AnswerUnreadable:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self.inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


def refusal(item: object) -> JSONRPCError | None:
    """The error that answers ``item`` when it is a request the SDK could not parse; None
    for anything else (a message, or a line that is no request at all)."""
    if not isinstance(item, ValidationError):
        return None
    problems = item.errors()
    line = problems[0].get("input") if problems else None
    if not isinstance(line, str | bytes):
        return None
    try:
        request = json.loads(line)  # the standard library reads lone surrogates
    except ValueError:
        return None
    if not isinstance(request, dict) or "method" not in request:
        return None
    ident = request.get("id")
    if isinstance(ident, bool) or not isinstance(ident, str | int):
        return None  # a notification: nothing to answer
    where, problem = _first_bad_text(request.get("params"), "params")
    message = f"{where}: {problem}" if problem else "the request is not valid JSON-RPC"
    return JSONRPCError(
        jsonrpc="2.0", id=ident, error=ErrorData(code=INVALID_PARAMS, message=message)
    )


def _first_bad_text(value: JsonValue, where: str) -> tuple[str, str | None]:
    """The first string (or key) in ``value`` that is not text a child could take."""
    stack: list[tuple[JsonValue, str]] = [(value, where)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            problem = text_problem(node)
            if problem:
                return at, problem
        elif isinstance(node, dict):
            for key, sub in reversed(node.items()):
                problem = text_problem(key)
                if problem:
                    return f"{at} (a key)", problem
                stack.append((sub, f"{at}.{key}"))
        elif isinstance(node, list):
            stack.extend((sub, f"{at}.{i}") for i, sub in reversed(list(enumerate(node))))
    return where, None
