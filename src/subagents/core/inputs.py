"""Checks every surface applies to what a caller gives (command line, plan files, config,
agent files, the Python API, MCP arguments, environment values). Each returns the problem
as a phrase to follow a field name, or None when the value is fine, so the CLI, the plan
parser, the config loader and the MCP server all say the same thing.

Text that is not valid UTF-8 is refused, not carried: a task reaches the child through its
argv or a file as UTF-8 text, and every record (``meta.json``, ``job.json``, the session
log) is JSON, which holds text only. A shell hands such bytes to Python as lone surrogates
(``\\udcff``), which is how they are found here.
"""

from __future__ import annotations

import math

from subagents.core.childtext import SURROGATE
from subagents.errors import FieldProblem

# typing itself is not imported at run time (kept off every start path).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pydantic_core import ErrorDetails

# The longest limit in seconds accepted (a timeout, a stall or tool timeout): 30 days. No
# run is meant to be left that long; beyond it waits overflow (``--timeout 1e12``; the
# supervisor's event loop also waits at most a day at a time, epoll taking 2^31 ms at most).
MAX_TIMEOUT = 30 * 24 * 3600.0


def text_problem(value: str) -> str | None:
    """What makes ``value`` unusable as text for a child, or None."""
    bad = SURROGATE.search(value)
    if bad is not None:
        byte = ord(bad.group()) - 0xDC00
        shown = f" (byte 0x{byte:02x})" if 0x80 <= byte <= 0xFF else ""
        return f"not valid UTF-8 text{shown} at character {bad.start()}"
    if "\x00" in value:
        return f"contains a NUL character at position {value.index(chr(0))}"
    return None


def seconds_problem(value: object, *, off: bool = False) -> str | None:
    """What makes ``value`` unusable as a limit in seconds, or None: the one check of every
    timeout, stall timeout and tool timeout, from every surface (command line, plan, config,
    environment, MCP, Python). A number (not a boolean), above 0 (``off``: or 0, which
    turns the limit off) and at most ``MAX_TIMEOUT``; NaN and infinity are not."""
    wanted = "0 (off) or a positive number of seconds" if off else "a positive number of seconds"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be {wanted}, not {value!r}"
    if math.isnan(value) or value < 0 or (value == 0 and not off):
        return f"must be {wanted}, not {value:g}"
    if value > MAX_TIMEOUT:
        return f"must be at most {MAX_TIMEOUT:.0f} seconds (30 days), not {value:g}"
    return None


class Seconds:
    """A field's metadata (``Annotated[float | None, Seconds]``) for pydantic, which would
    read a document's ``true`` as 1 second: it refuses a boolean before pydantic converts
    it (and :func:`seconds_problem` then checks the number). Imports nothing of pydantic
    until pydantic asks for it."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(_no_boolean, handler(source))


def _no_boolean(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds, not {str(value).lower()}")
    return value


class Budget:
    """A budget field's metadata (``Annotated[int | None, Budget]``) for pydantic, which
    would read a document's ``true`` as 1 and ``'3'`` as 3: anything but a number is
    refused as it is, as config refuses it (:func:`budget_problem` then checks the number)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(_a_number, handler(source))


def _a_number(value: object) -> object:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        raise ValueError(f"must be a number, not {shown}")
    return value


def timeout_problem(value: object) -> str | None:
    """What makes ``value`` unusable as a timeout in seconds, or None."""
    return seconds_problem(value)


# A budget's kinds, each as every surface names it (``max_turns`` …) and what it counts.
BUDGET_FIELDS = {"max_turns": "turns", "max_tokens": "tokens", "max_cost": "cost"}
# The most text one message to a running child may hold, in UTF-8 bytes.
MAX_MESSAGE_BYTES = 1 << 20


def budget_problem(name: str, value: object) -> str | None:
    """What makes ``value`` unusable as the budget ``name`` (``max_turns``, ``max_tokens``:
    a whole number, 1 or more; ``max_cost``: USD above 0), or None."""
    if name == "max_cost":
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if number is None or math.isnan(number) or math.isinf(number) or number <= 0:
            return f"must be a positive amount of USD, not {value!r}"
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return f"must be a whole number, 1 or more, not {value!r}"
    return None


def check_budget(name: str, value: object) -> None:
    problem = None if value is None else budget_problem(name, value)
    if problem:
        raise FieldProblem(name, problem)


def message_problem(text: str) -> str | None:
    """What makes ``text`` unusable as a message to a running child, or None."""
    if not text.strip():
        return "the message is empty"
    problem = text_problem(text)
    if problem:
        return problem
    size = len(text.encode())
    if size > MAX_MESSAGE_BYTES:
        return f"the message is {size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes (1 MiB)"
    return None


def check_choice(name: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        words = [repr(a) for a in allowed]
        options = " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
        raise FieldProblem(name, f"must be {options}, not {value!r}")


def check_at_least(name: str, value: float | None, low: float, unit: str = "") -> None:
    """``value`` >= ``low`` (NaN is not)."""
    if value is not None and not value >= low:
        raise FieldProblem(name, f"must be {low:g}{unit} or more, not {value!r}")


# pydantic's error types for a key the class does not have (a model's, a dataclass's).
UNKNOWN_KEY = frozenset({"extra_forbidden", "unexpected_keyword_argument"})


def first_problem(errors: list[ErrorDetails]) -> tuple[list[str], str, ErrorDetails]:
    """Where pydantic's first error is, and what: its path (with the field a FieldProblem
    raised in a dataclass's ``__post_init__`` names), its message, and the error itself."""
    err = errors[0]
    loc = [str(part) for part in err["loc"]]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, FieldProblem):
        return [*loc, *filter(None, cause.where.split("."))], cause.problem, err
    return loc, str(err["msg"]).removeprefix("Value error, "), err
