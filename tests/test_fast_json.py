"""On a long stream the supervisor parses and writes JSON through orjson: the same values
as json gives, including for what orjson itself refuses."""

from __future__ import annotations

import json

import pytest

from subagents.core.childtext import parse_line, parse_line_fast
from subagents.core.files import dumps, dumps_fast

LINES = [
    b'{"type":"message_end","text":"plain \xc3\xa9"}',
    b'{"type":"x","text":"cut \\ud83d"}',  # a lone surrogate escape (Node cut an emoji)
    b'{"type":"x","text":"pair \\ud83d\\ude00"}',
    b'{"type":"x","text":"bad \xff\xfe utf-8"}',
    b'{"type":"x","n":123456789012345678901234567890}',  # over 64 bits
    b'{"type":"x","f":1e-05,"g":NaN}',
    b'{"type":"x","deep":[{"a":[1,2,{"b":"\\u0000"}]}]}',
]


@pytest.mark.parametrize("line", LINES)
def test_the_fast_parser_gives_what_the_tolerant_one_gives(line: bytes) -> None:
    fast, slow = parse_line_fast(line), parse_line(line)
    assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True)


@pytest.mark.parametrize("line", [b"not json", b'{"open": ', b""])
def test_the_fast_parser_refuses_what_is_not_json(line: bytes) -> None:
    with pytest.raises(ValueError):
        parse_line_fast(line)


@pytest.mark.parametrize(
    "obj",
    [
        {"seq": 1, "text": "é ✓ \u2028", "f": 1e-05, "usage": {"cost": 0.001}},
        {"n": 123456789012345678901234567890},
        {"nested": [{"a": None, "b": True}], 1: "int key"},
    ],
)
def test_fast_dumps_writes_the_same_values(obj: dict[object, object]) -> None:
    assert json.loads(dumps_fast(obj)) == json.loads(dumps(obj))
    assert b"\n" not in dumps_fast(obj)
