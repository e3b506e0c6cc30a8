"""A child's bytes made safe: decoded tolerantly before anything is written, and
neutralised before they reach a terminal or ``transcript.md``.

Standard library only (orjson on demand), and cheap: the supervisor calls :func:`parse_line` on every line it
parses (never on the lines it skips unparsed, such as pi's ``message_update``).

- Invalid UTF-8 becomes U+FFFD; a lone surrogate that a valid JSON escape produced
  (``"\\udcff"``: Node cuts strings mid-emoji) becomes U+FFFD too. Nothing downstream
  can then fail to encode the text, and the rest of the line (the answer) survives.
- :func:`neutralize` drops terminal control sequences (CSI such as clear screen, OSC such
  as a window title or a clipboard write, other ESC sequences) and every C0/C1 control
  character but newline and tab; the text around them is kept.
"""

from __future__ import annotations

import json
import re

from subagents.core.files import loads_exact

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonValue

REPLACEMENT = "\ufffd"

SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON escape that may decode to a surrogate (a valid pair is fine, a lone one is not).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

# Whole escape sequences first (so their parameters go with them), then any other control
# character. The output holds no ESC at all, so neutralising twice changes nothing.
_CONTROL = re.compile(
    "\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]"  # CSI: cursor moves, clear screen, colours
    # OSC (window title, hyperlinks, clipboard write 52) and DCS/SOS/PM/APC strings; an
    # unterminated one ends at the line's end, so it cannot swallow the rest of an answer.
    r"|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|[PX^_][^\x1b\n]*(?:\x1b\\)?"
    r"|[ -/]*[0-~]"  # any other ESC sequence (charset, keypad, reset)
    ")?"
    "|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


# Every match of _CONTROL or SURROGATE starts with one of these characters.
_UNSAFE_CHAR = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def scrub(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD."""
    return SURROGATE.sub(REPLACEMENT, text)


def _scrub_value(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {scrub(k): _scrub_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(v) for v in value]
    return value


def parse_line(line: bytes | bytearray) -> JsonValue:
    """One stdout line as a JSON value with text safe to write anywhere.

    Raises ``ValueError`` when the line is not JSON even after invalid UTF-8 is replaced.
    """
    obj: JsonValue
    try:
        obj = json.loads(line)
    except UnicodeDecodeError:
        obj = json.loads(line.decode("utf-8", "replace"))
    # Only a line holding a surrogate escape can have produced a lone surrogate: the
    # walk over the parsed value is paid by those lines alone.
    if _SURROGATE_ESCAPE.search(line) is not None:
        obj = _scrub_value(obj)
    return obj


def parse_line_fast(line: bytes | bytearray) -> JsonValue:
    """:func:`parse_line` through orjson (a fraction of json's cost) wherever orjson reads
    the line exactly; it refuses what needs the slow path (invalid UTF-8, lone surrogates)."""
    try:
        return loads_exact(line)
    except ValueError:
        return parse_line(line)


def decode(data: bytes) -> str:
    """Bytes as text, invalid UTF-8 as U+FFFD."""
    return data.decode("utf-8", "replace")


# The C0 controls but newline and tab, and DEL: in UTF-8, each is a byte of its own.
_C0_UNSAFE = bytes(range(0x09)) + bytes(range(0x0B, 0x20)) + b"\x7f"


def _surely_safe(text: str) -> bool:
    """True when ``text`` holds no character :data:`_UNSAFE_CHAR` matches; False when it
    may. Its bytes are checked in C at a fifth of the regular expression's cost on a long
    answer (~1 us for 2 kB against ~6)."""
    if text.isascii():
        data = text.encode("ascii")
    else:
        data = text.encode("utf-8", "surrogatepass")
        # A C1 control (U+0080-U+009F) is \xc2\x80-\x9f, a surrogate \xed\xa0-\xbf: where
        # those lead bytes appear at all, the regular expression decides.
        if b"\xc2" in data or b"\xed" in data:
            return False
    return len(data.translate(None, _C0_UNSAFE)) == len(data)


# Longer text is checked a piece at a time: a 17 MB answer is not copied twice over.
_CHECK_PIECE = 1 << 16


def neutralize(text: str) -> str:
    """``text`` without terminal control sequences, control characters or lone surrogates
    (newline and tab are kept)."""
    if len(text) <= _CHECK_PIECE:
        safe = _surely_safe(text)
    else:
        step = _CHECK_PIECE
        safe = all(_surely_safe(text[i : i + step]) for i in range(0, len(text), step))
    if safe or _UNSAFE_CHAR.search(text) is None:  # the common case
        return text
    return SURROGATE.sub(REPLACEMENT, _CONTROL.sub("", text))


def one_line(text: str) -> str:
    """:func:`neutralize`, and every run of whitespace (newlines included) as one space."""
    return " ".join(neutralize(text).split())
