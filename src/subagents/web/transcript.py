"""A run's ``transcript.md`` as HTML, a piece at a time while it grows.

The supervisor appends whole Markdown chunks. A reader renders the whole lines it has, but
for a code fence still open at their end (a chunk being written), which waits for the
next read from the start of its block; once the run has ended, everything is rendered.
Where to go on from is a byte offset into the file, always at a block's start: a page and
its live stream hand it over.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from subagents.web.markdown import render, whole_blocks

# A page shows at most this much of a long transcript (markdown-it renders ~300 KiB a
# second here); the file keeps the rest, and the page links to all of it as text.
FIRST_LOOK = 256 * 1024


@dataclass
class Piece:
    html: str
    offset: int  # where the next piece starts (bytes into the file)
    skipped: int = 0  # bytes at the start left out (a transcript longer than FIRST_LOOK)


def read_piece(path: Path, offset: int, *, final: bool) -> Piece:
    """What has been written from ``offset`` on, as HTML (all of it when ``final``: the run
    has ended and nothing more comes)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return Piece("", offset)
    if not final:
        # A chunk is written whole, ending in a newline; what follows the last one is not yet.
        data = data[: data.rfind(b"\n") + 1]
    text = data.decode("utf-8", "replace")
    used = len(text) if final else whole_blocks(text)
    if not used:
        return Piece("", offset)
    done = text[:used]
    return Piece(render(done), offset + len(done.encode("utf-8")))


def first_piece(path: Path, *, final: bool) -> Piece:
    """The transcript from its start, or, when it is long, from the first block that starts
    in its last :data:`FIRST_LOOK` bytes."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Piece("", 0)
    start = 0 if size <= FIRST_LOOK else _block_start(path.read_bytes(), size - FIRST_LOOK)
    piece = read_piece(path, start, final=final)
    piece.skipped = start
    return piece


def _block_start(data: bytes, cut: int) -> int:
    """The offset of the first line at or after ``cut`` that starts a block (after a blank
    line, or an item of a list) outside a code fence (fences are followed from the start)."""
    pos, fenced, after_blank = 0, False, True
    for line in data.split(b"\n"):
        if pos >= cut and not fenced and (after_blank or line.startswith(b"- ")):
            return pos
        if line.lstrip(b" >\t").startswith((b"```", b"~~~")):
            fenced = not fenced
        after_blank = not line.strip()
        pos += len(line) + 1
    return len(data)
