"""The supervisor's line cutter: whatever the reads' sizes, every wanted line comes out
whole and once, and a skipped line is never held (memory follows the longest wanted line)."""

from __future__ import annotations

import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.checks import examples

from subagents.backends.pi import PiNormalizer
from subagents.supervisor.lines import TAIL, Lines

SKIPPED = PiNormalizer.skip_prefixes

# Lines starting with a skipped prefix, with a wanted prefix, with a prefix of a skipped one
# (cut by a read, it can only be decided once more bytes come), and plain noise.
_line = st.one_of(
    st.tuples(st.sampled_from(SKIPPED), st.binary(max_size=300)).map(b"".join),
    st.tuples(
        st.sampled_from([b'{"type":"tool_execution_start"', b'{"type":"message_end"', b""]),
        st.binary(max_size=300),
    ).map(b"".join),
    st.sampled_from(SKIPPED).map(lambda p: p[: len(p) // 2]),
).map(lambda line: line.replace(b"\n", b" "))


def _cut(lines: list[bytes], last_newline: bool, cuts: list[int]) -> tuple[bytes, list[bytes]]:
    stream = b"\n".join(lines) + (b"\n" if last_newline else b"")
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    return stream, [stream[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=examples(300), deadline=None)
@given(
    lines=st.lists(_line, max_size=20),
    last_newline=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
@example(lines=[SKIPPED[0] + b"x" * 50, b'{"type":"message_end"}'], last_newline=True, cuts=[3, 9])
def test_every_wanted_line_comes_out_whole_whatever_the_reads(
    lines: list[bytes], last_newline: bool, cuts: list[int]
) -> None:
    norm = PiNormalizer()
    got: list[bytes] = []
    tails: list[bytes] = []
    held_most = 0
    reader = Lines(norm.wants, lambda line: got.append(bytes(line)), tails.append)
    stream, reads = _cut(lines, last_newline, cuts)
    buffer = bytearray(len(stream) + 1)
    for data in reads:
        buffer[: len(data)] = data
        reader.feed(buffer, len(data))
        held_most = max(held_most, len(reader.held))
    reader.end()
    assert got == [line for line in stream.split(b"\n") if line and norm.wants(line)]
    # Every skipped line's end is seen, once: what pi says last on a line read unparsed.
    assert tails == [line[-TAIL:] for line in stream.split(b"\n") if line and not norm.wants(line)]
    # Between reads, what is held is the start of a wanted line, or of a line too short yet
    # to tell: never more of a skipped one.
    undecided = max(map(len, SKIPPED)) - 1
    assert held_most <= max([undecided, *(len(line) for line in lines if norm.wants(line))])
