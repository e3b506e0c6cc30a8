"""A run's ``transcript.md`` as HTML, a piece at a time while it grows.

The supervisor appends whole Markdown chunks. A reader renders the whole lines it has, but
for a code fence still open at their end (a chunk being written), which waits for the
next read from the start of its block; once the run has ended, everything is rendered.
Where to go on from is a byte offset into the file, always at a block's start: a page and
its live stream hand it over. When each block was written comes from ``transcript.times``
(``core.stamps``): a block shows its time in the transcript's gutter.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from subagents.core import stamps
from subagents.web import memo
from subagents.web.markdown import render_transcript, whole_blocks

# A page shows at most this much of a long transcript (markdown-it renders ~300 KiB a
# second here); the file keeps the rest, and the page links to all of it as text.
FIRST_LOOK = 64 * 1024
# A live stream's event carries at most this much of it (a client far behind catches up in
# several events, each rendered and sent before the next is read), but for a block longer
# than this, which goes whole.
CHUNK = 32 * 1024
# Where a long transcript's shown part starts is found by following its code fences from
# this far before the cut (not from the file's start: a 50 MB file is not read for a page).
FENCE_LOOKBACK = 1024 * 1024


@dataclass
class Piece:
    html: Markup
    offset: int  # where the next piece starts (bytes into the file)
    skipped: int = 0  # bytes at the start left out (a transcript longer than FIRST_LOOK)


def read_piece(path: Path, offset: int, *, final: bool, limit: int | None = None) -> Piece:
    """What has been written from ``offset`` on (at most ``limit`` bytes of it, cut at a line's
    end), as HTML (all of it when ``final``: the run has ended and nothing more comes). Made
    once while the transcript stays as it is (``memo``: every client asks for the same)."""
    key = ("piece", str(path), offset, final, limit)
    times = path.with_name(stamps.NAME)
    return memo.made(key, (path, times), lambda: _read_piece(path, times, offset, final, limit))


def _read_piece(path: Path, times: Path, offset: int, final: bool, limit: int | None) -> Piece:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(-1 if limit is None else limit + 1)
    except FileNotFoundError:
        return Piece(Markup(), offset)
    if limit is not None and len(data) > limit:
        final = False  # more follows this piece: it ends at a whole block, like a live one
        data = data[:limit]
    if not final:
        # A chunk is written whole, ending in a newline; what follows the last one is not yet.
        data = data[: data.rfind(b"\n") + 1]
    text = data.decode("utf-8", "replace")
    used = len(text) if final else whole_blocks(text)
    if not used:
        return Piece(Markup(), offset)
    done = text[:used]
    size = len(done.encode("utf-8"))
    when = stamps.between(times, offset, offset + size)
    return Piece(render_transcript(done, _lines(data[:size], offset, when)), offset + size)


def _lines(data: bytes, offset: int, times: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``times`` (byte offsets into the file, ``data`` read from ``offset``) by line of
    ``data``: the line each offset falls in."""
    if not times:
        return []
    starts = [0]
    at = data.find(b"\n")
    while at != -1:
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    return [(bisect_right(starts, where - offset) - 1, ts) for where, ts in times]


def first_piece(path: Path, *, final: bool) -> Piece:
    """The transcript from its start, or, when it is long, from the first block that starts
    in its last :data:`FIRST_LOOK` bytes."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Piece(Markup(), 0)
    start = 0 if size <= FIRST_LOOK else block_start(path, size - FIRST_LOOK)
    # In the pieces a live stream sends from the same start: a page and the streams of its
    # other clients render each piece once between them (``memo``).
    parts, at = [], start
    while at < size:
        piece = next_piece(path, at, final=final)
        if not piece.html:
            break
        parts.append(piece.html)
        at = piece.offset
    return Piece(Markup("").join(parts), at, skipped=start)


def next_piece(path: Path, offset: int, *, final: bool) -> Piece:
    """What a live stream sends next from ``offset``: at most :data:`CHUNK` bytes of whole
    blocks, or, when one block is longer than that (a long code block), that block whole."""
    piece = read_piece(path, offset, final=final, limit=CHUNK)
    if piece.html:
        return piece
    return read_piece(path, offset, final=final)


def block_start(path: Path, cut: int) -> int:
    """The offset of the first line at or after ``cut`` that starts a block (after a blank
    line, or an item of a list) outside a code fence (fences are followed from
    :data:`FENCE_LOOKBACK` before ``cut``, at a line's start)."""
    return memo.made(("cut", str(path), cut), (path,), lambda: _find_block(path, cut))


def _find_block(path: Path, cut: int) -> int:
    begin = max(0, cut - FENCE_LOOKBACK)
    with open(path, "rb") as f:
        f.seek(begin)
        data = f.read(cut - begin + FIRST_LOOK)
    fenced = False
    if begin:
        skip = data.find(b"\n") + 1  # from the first whole line
        data, begin = data[skip:], begin + skip
        fenced = _inside_fence(data)
    found = _block_start(data, cut - begin, fenced)
    if found == len(data):  # none: the guess was wrong
        found = _block_start(data, cut - begin, not fenced)
    return begin + found


# A line that opens or closes a code fence (in a list item or a quote too).
FENCE = re.compile(rb"^[ >\t]*(?:```|~~~)", re.M)


def _is_fence(line: bytes) -> bool:
    return line.lstrip(b" >\t").startswith((b"```", b"~~~"))


def _inside_fence(data: bytes) -> bool:
    """A guess at whether ``data`` starts inside a code fence, from its first fence line: one
    with an info string (```python) or after a blank line opens one; else it closes one."""
    before = b""
    for line in data.split(b"\n", 4096):
        if _is_fence(line):
            if line.strip().strip(b"`~"):
                return False
            return bool(before.strip())
        before = line
    return False


def _block_start(data: bytes, cut: int, fenced: bool) -> int:
    # The fences before the first line at or after cut are counted by a regular expression
    # (a transcript's lines before it are many: a Python loop over them cost most of a page).
    first = 0 if cut <= 0 else cut if data[cut - 1 : cut] == b"\n" else data.find(b"\n", cut) + 1
    if cut > 0 and first == 0:
        return len(data)  # no line starts after cut
    fenced ^= len(FENCE.findall(data, 0, first)) % 2 == 1
    previous = data[data.rfind(b"\n", 0, first - 1) + 1 : first - 1] if first else b""
    pos, after_blank = first, not previous.strip()
    for line in data[first:].split(b"\n"):
        if not fenced and (after_blank or line.startswith(b"- ")):
            return pos
        if _is_fence(line):
            fenced = not fenced
        after_blank = not line.strip()
        pos += len(line) + 1
    return len(data)
