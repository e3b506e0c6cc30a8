"""Markdown a child wrote (its transcript, its answer, a failure's diagnostics) as HTML that
carries none of its own HTML: raw HTML is off (shown as text), links open in a new tab with
``rel="noopener noreferrer"``, an image is a link to it (nothing is fetched by showing it),
and markdown-it's own check refuses ``javascript:`` and the like as link targets."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token


@cache
def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

    def link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer")
        tokens[idx].attrSet("target", "_blank")
        rendered: str = self.renderToken(tokens, idx, options, env)
        return rendered

    def image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        alt = self.renderInlineAsText(token.children or [], options, env) or "image"
        src = escape(str(token.attrGet("src") or ""))
        return f'<a href="{src}" rel="noopener noreferrer" target="_blank">[{escape(alt)}]</a>'

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("image", image)
    return md


def render(text: str) -> str:
    return str(_md().render(text))


def whole_blocks(text: str) -> int:
    """How many characters at the start of ``text`` hold whole blocks: all but its last
    top-level block, which may still grow (a paragraph, an open code fence). A list's items
    count as blocks: a run's tool calls are one long list, shown as it grows. ``text`` has no
    carriage return (a transcript never has: it is neutralized)."""
    starts = [
        t.map[0]
        for t in _md().parse(text)
        if t.map
        and ((t.level == 0 and t.nesting >= 0) or (t.level == 1 and t.type == "list_item_open"))
    ]
    if len(starts) < 2:
        return 0
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: starts[-1]])
