"""The one reader of what is appended to a file (core.tail): complete lines only, a bounded
chunk a read, the unterminated last line kept; resumable from a saved offset."""

from __future__ import annotations

import os
from pathlib import Path

from subagents.core.tail import LineTail, read_at


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "log"
    tail = LineTail(log)
    assert tail.read() == []  # no file yet
    _append(log, b"one\ntw")
    assert tail.read() == [b"one"]
    assert tail.partial == b"tw" and tail.consumed == 4 and tail.offset == 6
    assert tail.read() == []
    _append(log, b"o\nthree")
    assert tail.read() == [b"two"]
    _append(log, b"\n")
    assert list(tail.lines()) == [b"three"]
    assert tail.partial == b"" and tail.consumed == tail.offset == os.path.getsize(log)


def test_a_character_split_over_two_writes_is_never_cut(tmp_path: Path) -> None:
    log = tmp_path / "transcript.md"
    text = "naïve — ✓\n".encode()
    _append(log, text[:3])  # ends inside "ï"
    tail = LineTail(log)
    assert tail.read_block() == b""
    _append(log, text[3:])
    assert tail.read_block().decode() == "naïve — ✓\n"


def test_each_read_is_bounded_by_the_chunk_and_a_long_line_comes_whole(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    lines = [b"x" * (i % 13) for i in range(200)]
    lines.insert(100, b"L" * 1000)  # far longer than a chunk
    log.write_bytes(b"".join(line + b"\n" for line in lines))
    tail = LineTail(log, chunk=64)
    got: list[bytes] = []
    blocks = 0
    while block := tail.read_block():
        blocks += 1
        these = block.split(b"\n")[:-1]
        # One chunk, plus at most one line carried over from the read before.
        assert len(block) <= 64 + max(len(line) + 1 for line in these)
        got.extend(these)
    assert got == lines
    assert blocks > 10  # it did read in chunks


def test_lines_reads_every_chunk_there_is(tmp_path: Path) -> None:
    log = tmp_path / "log"
    lines = [f"line {i}".encode() for i in range(1000)]
    log.write_bytes(b"\n".join(lines) + b"\n")
    assert list(LineTail(log, chunk=100).lines()) == lines


def test_a_saved_offset_resumes_after_the_last_complete_line(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"a\nb\nhalf")
    first = LineTail(log)
    assert list(first.lines()) == [b"a", b"b"]
    saved = first.consumed  # what another process resumes from
    _append(log, b"-done\nc\n")
    assert list(LineTail(log, saved).lines()) == [b"half-done", b"c"]


def test_a_file_cut_short_or_replaced_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"old 1\nold 2\n")
    tail = LineTail(log)
    assert tail.read() == [b"old 1", b"old 2"]
    log.write_bytes(b"new\n")  # truncated and rewritten: shorter than what was read
    assert tail.read() == [b"new"]
    replacement = tmp_path / "log.tmp"
    replacement.write_bytes(b"other 1\nother 2\n")
    os.replace(replacement, log)  # another file, as long as what was read
    assert tail.read() == [b"other 1", b"other 2"]
    # A saved offset past the end of the file found there: the file was replaced.
    assert LineTail(log, 10_000).read() == [b"other 1", b"other 2"]
    log.unlink()
    assert tail.read() == [] and tail.offset == 0
    log.write_bytes(b"again\n")
    assert tail.read() == [b"again"]


def test_skip_to_end_reads_only_what_comes_after(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"before\ntorn")
    tail = LineTail(log)
    tail.skip_to_end()
    _append(log, b"\nafter\n")
    assert tail.read() == [b"", b"after"]  # the torn line's end is an empty line


def test_read_at_is_bounded_and_quiet_about_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    assert read_at(path, 0) == b""
    path.write_bytes(b"0123456789")
    assert read_at(path, 3, 4) == b"3456"
    assert read_at(path, 8) == b"89"
    assert read_at(path, 20) == b""
