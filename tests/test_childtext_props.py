"""Property tests: no child output makes a normalizer, the line decoder or the progress
wording raise, and the neutraliser leaves nothing a terminal would act on."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.checks import examples

from subagents.backends import get_backend
from subagents.core.childtext import _UNSAFE_CHAR, neutralize, parse_line, scrub
from subagents.core.files import dumps
from subagents.present.progress import ProgressFormatter, transcript_entry

STREAMS = Path(__file__).parent / "fixtures" / "streams"
BACKENDS = ["pi", "claude", "codex", "gemini", "opencode"]
FAST = settings(max_examples=examples(200), deadline=None)

# Text as a child may produce it: any code point, lone surrogates, NULs and escapes included.
# Runs of code points drawn as text, not one character at a time: hypothesis draws a text in
# one step, and a character each was most of these tests' time (its bookkeeping per draw).
hostile_text = st.lists(
    st.one_of(
        st.text(st.characters(codec=None), min_size=1, max_size=8),
        st.sampled_from(["\x00", "\x1b", "\x1b[2J", "\x1b]52;c;aGk=\x07", "\x9b", "\udcff", "\n"]),
    ),
    max_size=8,
).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)
CONTROLS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\n", "\t"}


@functools.cache  # read once, not at every example
def fixture_objects(backend: str) -> tuple[dict[str, Any], ...]:
    out = []
    # What the CLI writes, as the supervisor drives it (codex: app-server's stdout only).
    live = sorted((STREAMS / "live").glob(f"{backend}*.stdout.jsonl"))
    for path in [*sorted(STREAMS.glob(f"{backend}*.jsonl")), *live]:
        for line in path.read_bytes().splitlines():
            obj = json.loads(line) if line.strip() else None
            if isinstance(obj, dict):
                out.append(obj)
    return tuple(out)


def with_strings(value: Any, texts: Iterator[str]) -> Any:
    """``value`` with every string replaced by the next hostile one (shape kept)."""
    if isinstance(value, str):
        return next(texts)
    if isinstance(value, dict):
        return {k: with_strings(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [with_strings(v, texts) for v in value]
    return value


def as_child_writes(obj: Any) -> bytes:
    # ensure_ascii: lone surrogates become "\udcff" escapes, as Node writes them.
    return json.dumps(obj, ensure_ascii=True).encode()


def through_the_supervisor(backend: str, lines: list[bytes]) -> None:
    """What the supervisor does with each line; every written byte must encode."""
    norm = get_backend(backend).normalizer()
    fmt, tfmt = ProgressFormatter(), ProgressFormatter()
    for line in lines:
        try:
            obj = parse_line(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        for event in norm.feed(obj):
            dumps(event)  # events.jsonl: raises on a lone surrogate
            for text in (fmt.line(dict(event)), transcript_entry(dict(event), tfmt)):
                if text is not None:
                    text.encode()
                    assert not CONTROLS & set(text), text
    for event in norm.finish():
        dumps(event)
    dumps(norm.final_text)


@pytest.mark.parametrize("backend", BACKENDS)
@FAST
@given(data=st.data())
def test_valid_shapes_with_hostile_strings(backend: str, data: st.DataObject) -> None:
    objs = fixture_objects(backend)
    assert objs, f"no captured {backend} stream"
    chosen = data.draw(st.lists(st.sampled_from(objs), min_size=1, max_size=8))
    # The objects' strings take turns with a few drawn texts: one draw per string made each
    # example cost ~0.15 s of hypothesis's bookkeeping (a captured object holds dozens). Up to
    # four texts, not twelve: drawing them was still most of an example's time (this file
    # 36 -> 28 CPU-s at 200 examples a test); a cycle of four still gives neighbouring
    # strings different texts, and the examples' count is unchanged.
    texts = itertools.cycle(data.draw(st.lists(hostile_text, min_size=1, max_size=4)))
    through_the_supervisor(backend, [as_child_writes(with_strings(o, texts)) for o in chosen])


@FAST
@given(values=st.lists(json_values, max_size=6))
def test_random_json_values(values: list[Any]) -> None:
    # The same lines for every backend: drawing them is nearly all of an example's time.
    lines = [as_child_writes(v) for v in values]
    for backend in BACKENDS:
        try:
            through_the_supervisor(backend, lines)
        except Exception as exc:
            exc.add_note(f"backend: {backend}")
            raise


@pytest.mark.parametrize("backend", BACKENDS)
@FAST
@given(data=st.data())
def test_random_bytes_and_truncated_lines(backend: str, data: st.DataObject) -> None:
    objs = fixture_objects(backend)
    lines = []
    for _ in range(data.draw(st.integers(1, 6))):
        raw = as_child_writes(data.draw(st.sampled_from(objs)))
        cut = data.draw(st.integers(0, len(raw)))
        noise = data.draw(st.binary(max_size=20))
        lines.append(data.draw(st.sampled_from([raw[:cut], noise, raw[:cut] + noise + raw[cut:]])))
    through_the_supervisor(backend, lines)


@FAST
@given(hostile_text)
def test_neutralize_is_idempotent_and_leaves_no_controls(text: str) -> None:
    once = neutralize(text)
    assert neutralize(once) == once
    assert not CONTROLS & set(once)
    once.encode()  # no lone surrogate


@FAST
@given(st.text(alphabet=st.characters(exclude_categories=["Cc", "Cs"]) | st.sampled_from("\n\t")))
def test_neutralize_keeps_plain_text(text: str) -> None:
    assert neutralize(text) == text


@FAST
@given(
    st.lists(
        st.one_of(
            st.sampled_from("\x00\x08\x0b\x1f\x7f\x80\x9f\xa0©\ud7a3\ud800\udfff\ue000\n\t"),
            st.text(max_size=5),
        ),
        max_size=30,
    ).map("".join)
)
def test_neutralize_checks_bytes_as_the_expression_would(text: str) -> None:
    # The byte check that spares most text the regular expression must never pass a text
    # the expression would have changed: around the edges of each unsafe range, and the
    # characters sharing their UTF-8 lead bytes (U+00A0-U+00BF, U+D000-U+D7FF).
    unsafe = _UNSAFE_CHAR.search(text) is not None
    assert (neutralize(text) != text) == unsafe
    if not unsafe:
        assert neutralize(text) is text


@pytest.mark.parametrize("at", [0, 65_535, 65_536, 65_537, 200_000])
@pytest.mark.parametrize("bad", ["\x1b[2J", "\x85", "\udcff", "\x07"])
def test_neutralize_finds_what_a_long_text_hides_anywhere(at: int, bad: str) -> None:
    # A long answer is checked a piece at a time: nothing hides past a piece's edge.
    text = "é" * at + bad + "x" * 70_000
    assert neutralize(text) == "é" * at + ("\ufffd" if bad == "\udcff" else "") + "x" * 70_000


@FAST
@given(st.binary(max_size=200))
def test_parse_line_never_yields_unencodable_text(line: bytes) -> None:
    try:
        obj = parse_line(line)
    except ValueError:
        return
    dumps(obj)


@FAST
@given(json_values)
def test_parse_line_keeps_text_but_lone_surrogates(value: Any) -> None:
    assert parse_line(as_child_writes(value)) == scrubbed(value)


def scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k): scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v) for v in value]
    return value
