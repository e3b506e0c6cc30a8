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

# A page shows at most this much of a long transcript; the file keeps the rest.
FIRST_LOOK = 2 * 1024 * 1024


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
    """The transcript from its start, or from a block start near its end when it is long."""
    start = 0
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Piece("", 0)
    if size > FIRST_LOOK:
        with open(path, "rb") as f:
            f.seek(size - FIRST_LOOK)
            head = f.read(FIRST_LOOK)
        gap = head.find(b"\n\n")
        start = size - FIRST_LOOK + (gap + 2 if gap >= 0 else 0)
    piece = read_piece(path, start, final=final)
    piece.skipped = start
    return piece
