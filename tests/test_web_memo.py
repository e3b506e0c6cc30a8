"""What a page makes of a run's files is made once while they stay as they are, and made
again when they grow or are replaced; a few parts are kept, no more. Where a long
transcript's shown part starts is the first block after the cut, outside a fence, as a
line-by-line reading finds it."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from subagents.web import memo
from subagents.web.transcript import (
    _block_start,
    _is_fence,
    first_piece,
    next_piece,
    read_piece,
)


def test_a_part_is_made_once_while_its_file_stays_and_again_when_it_changes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transcript.md"
    path.write_text("- $ make\n")
    made: list[int] = []

    def make() -> int:
        made.append(1)
        return len(made)

    assert memo.made(("t", str(path)), (path,), make) == 1
    assert memo.made(("t", str(path)), (path,), make) == 1  # kept
    with open(path, "a") as f:
        f.write("- Command finished\n")
    assert memo.made(("t", str(path)), (path,), make) == 2  # it grew
    replacement = tmp_path / "new"
    replacement.write_text(path.read_text())
    os.replace(replacement, path)  # the same size, another file
    assert memo.made(("t", str(path)), (path,), make) == 3
    for i in range(memo.SIZE + 4):
        memo.made(("other", i), (), make)
    assert len(memo._kept) == memo.SIZE


def test_clients_asking_at_once_wait_for_one_making(tmp_path: Path) -> None:
    started, release, made = threading.Event(), threading.Event(), []

    def make() -> str:
        made.append(1)
        started.set()
        assert release.wait(30)
        return "html"

    got: list[str] = []
    first = threading.Thread(target=lambda: got.append(memo.made(("once", 1), (), make)))
    first.start()
    assert started.wait(30)
    others = [
        threading.Thread(target=lambda: got.append(memo.made(("once", 1), (), make)))
        for _ in range(4)
    ]
    for t in others:
        t.start()
    time.sleep(0.3)  # (they ask while it is being made; asking later, they find it kept)
    release.set()
    for t in [first, *others]:
        t.join(30)
    assert got == ["html"] * 5 and made == [1]


def test_a_piece_read_again_after_the_transcript_grew_shows_what_was_added(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transcript.md"
    path.write_text("- $ first\n")
    assert "first" in read_piece(path, 0, final=False).html
    with open(path, "a") as f:
        f.write("- $ second\n")
    again = read_piece(path, 0, final=False)
    assert "second" in again.html and again.offset == path.stat().st_size


def _reference(data: bytes, cut: int, fenced: bool) -> int:
    """Every line's start, whether a fence is open there and whether a blank line is just
    before it; then the first start at or after ``cut`` that begins a block."""
    lines = data.split(b"\n")
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    open_at = [fenced ^ (sum(map(_is_fence, lines[:i])) % 2 == 1) for i in range(len(lines))]
    blank_before = [i == 0 or not lines[i - 1].strip() for i in range(len(lines))]
    found = [
        start
        for i, start in enumerate(starts)
        if start >= cut and not open_at[i] and (blank_before[i] or lines[i].startswith(b"- "))
    ]
    return found[0] if found else len(data)


LINES = [
    b"- a\n",
    b"\n",
    b"text\n",
    b"  ```\n",
    b"```py\n",
    b"> ```\n",
    b"  code\n",
    b"~~~\n",
    b"x",
]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(LINES), max_size=20), st.integers(0, 200), st.booleans())
def test_the_cut_is_where_a_line_by_line_reading_finds_it(
    lines: list[bytes], cut: int, fenced: bool
) -> None:
    data = b"".join(lines)
    cut = min(cut, len(data))
    assert _block_start(data, cut, fenced) == _reference(data, cut, fenced)


def test_a_block_longer_than_a_streams_piece_goes_whole_and_the_page_is_its_pieces(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transcript.md"
    code = "".join(f"line {i} of the child's code\n" for i in range(2000))  # ~60 KiB
    path.write_text(f"- $ make\n\nHere it is:\n\n```python\n{code}```\n\n- $ make test\n")
    head = len(b"- $ make\n\nHere it is:\n\n")
    first = next_piece(path, 0, final=True)
    assert first.offset == head  # the blocks before it, not the long one
    rest = next_piece(path, first.offset, final=True)  # the long block, and what follows
    assert "line 1999 of" in rest.html and "make test" in rest.html
    assert rest.offset == path.stat().st_size
    page = first_piece(path, final=True)
    assert page.html == first.html + rest.html and page.offset == rest.offset
