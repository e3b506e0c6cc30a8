"""Markdown a child wrote (its transcript, its answer, a failure's diagnostics) as HTML that
carries none of its own HTML: raw HTML is off (shown as text), links open in a new tab with
``rel="noopener noreferrer"``, an image is a link to it (nothing is fetched by showing it),
and markdown-it's own check refuses ``javascript:`` and the like as link targets."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markupsafe import Markup

# A command in a transcript: a tool call's line (``- $ make``, ``- ✗ $ make``), shown verbatim.
COMMAND_LINE = re.compile(r"^- (✗ )?\$ (.*)$", re.M)
IMAGE_LINK = Markup('<a href="{}" rel="noopener noreferrer" target="_blank">[{}]</a>')
# A tool's output in a transcript (a fence inside its list item), collapsed.
OUTPUT = Markup('<details class="output"><summary>output ({})</summary>{}</details>')
# When a transcript's block was written (in the page's gutter).
TIME = Markup('<time class="ts" datetime="{}" title="{}">{}</time>')
# The transcript's blocks that carry their time: its top-level blocks, and its items (a run's
# tool calls are one long list).
TIMED = {"paragraph_open": 0, "heading_open": 0, "blockquote_open": 0, "list_item_open": 1}


@cache
def _md(transcript: bool = False) -> MarkdownIt:
    """The renderer (``transcript``: with a tool's output collapsed under its call)."""
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

    def link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer")
        tokens[idx].attrSet("target", "_blank")
        rendered: str = self.renderToken(tokens, idx, options, env)
        return rendered

    def image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        alt = self.renderInlineAsText(token.children or [], options, env) or "image"
        return str(IMAGE_LINK.format(str(token.attrGet("src") or ""), alt))

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("image", image)
    if transcript:
        fence = RendererHTML().rules["fence"]

        def output(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
            shown: str = fence(tokens, idx, options, env)  # (it renders from the token alone)
            if tokens[idx].level == 0:  # the child's own code block, not a tool's output
                return shown
            lines = tokens[idx].content.count("\n")
            words = f"{lines} line{'' if lines == 1 else 's'}"
            return str(OUTPUT.format(words, Markup(shown)))

        md.add_render_rule("fence", output)

        def timed(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
            shown: str = self.renderToken(tokens, idx, options, env)
            token, times = tokens[idx], env.get("times")
            if not times or token.level != TIMED[token.type] or not token.map:
                return shown
            ts = None
            while times and times[0][0] <= token.map[0]:  # those written by its first line
                ts = times.pop(0)[1]
            return shown if ts is None else shown + str(_time(ts))

        for name in TIMED:
            md.add_render_rule(name, timed)
    return md


def _time(ts: float) -> Markup:
    when = datetime.fromtimestamp(ts)
    return TIME.format(
        when.isoformat(timespec="milliseconds"),
        when.strftime("%Y-%m-%d %H:%M:%S"),
        when.strftime("%H:%M:%S"),
    )


def render(text: str) -> Markup:
    """``text`` as HTML (Markup: escaped by markdown-it, raw HTML off)."""
    return Markup(_md().render(text))


def _verbatim(found: re.Match[str]) -> str:
    command = found.group(2)
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", command)), default=0) + 1)
    return f"- {found.group(1) or ''}{ticks} $ {command} {ticks}"


def render_transcript(text: str, times: Sequence[tuple[int, float]] = ()) -> Markup:
    """A transcript's Markdown as HTML, its commands as code, verbatim (``*`` and ``__`` in
    a command are no emphasis, a URL in one no link), a tool's output collapsed. ``times``:
    ``(line, epoch s)``, what was written from that line (of ``text``, from 0) on, and when:
    the first block at or after each line shows its time."""
    env = {"times": sorted(times)}
    return Markup(_md(transcript=True).render(COMMAND_LINE.sub(_verbatim, text), env))


def whole_blocks(text: str) -> int:
    """How many characters at the start of ``text`` (whole lines, without a carriage return:
    a transcript has none) can be rendered now, though more may follow: all of it, unless
    it ends in a code fence not yet closed (a chunk still being written), which is held back
    from the start of its block (a top-level block, or an item of a top-level list: a run's
    tool calls are one long list, shown as it grows)."""
    if "```" not in text and "~~~" not in text:
        return len(text)  # no fence at all (most reads): nothing to parse for
    tokens = _md().parse(text)
    lines = text.split("\n")
    held = None
    for token in tokens:
        if token.type == "fence" and token.map and not _closed(token, lines):
            held = token.map[0]
            break
    if held is None:
        return len(text)
    starts = [
        t.map[0]
        for t in tokens
        if t.map
        and t.map[0] <= held
        and ((t.level == 0 and t.nesting >= 0) or (t.level == 1 and t.type == "list_item_open"))
    ]
    cut = max(starts, default=0)
    return sum(len(line) + 1 for line in lines[:cut])


def _closed(fence: Token, lines: list[str]) -> bool:
    """Whether a fence's last line closes it (one left open runs to the end of the text)."""
    assert fence.map is not None
    first, end = fence.map
    if end - first < 2:
        return False
    last = lines[end - 1].lstrip(" >\t")
    mark = fence.markup
    return bool(mark) and last.rstrip().startswith(mark) and not last.strip().strip(mark[0])
