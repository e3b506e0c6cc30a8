"""The tool-call humanizer reads shell commands without shlex, and says exactly what the
shlex-based wording said (the seed's): a wrapper (``bash -lc '...'``) shows its command,
any other command is shown as written, a list is joined and quoted like ``shlex.join``."""

from __future__ import annotations

import os
import shlex

from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.checks import examples

from subagents.present.humanize import _command_text, describe
from subagents.present.progress import ProgressFormatter

_SHELLS = {"bash", "sh", "zsh", "dash"}


def _unwrap_reference(argv: list[str]) -> str:
    if (
        len(argv) == 3
        and os.path.basename(argv[0]) in _SHELLS
        and argv[1] in ("-c", "-lc", "-ic", "-lic")
    ):
        return argv[2]
    return shlex.join(argv)


def command_text_reference(value: object) -> str | None:
    """The wording before shlex left the hot path, verbatim."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return _unwrap_reference(list(value))
    if isinstance(value, str) and value.strip():
        try:
            argv = shlex.split(value)
        except ValueError:
            return value.strip()
        unwrapped = _unwrap_reference(argv)
        return unwrapped if unwrapped != shlex.join(argv) else value.strip()
    return None


SHELLISH = st.text(alphabet="ab/-. '\"\\\t\n$|;c", max_size=30)
WRAPPED = st.builds(
    lambda pre, flag, rest: f"{pre} {flag} {rest}",
    st.sampled_from(["bash", "/bin/bash", " sh", "zsh", "'bash'", 'ba"sh"', "dash\t", "bas\\h"]),
    st.sampled_from(["-c", "-lc", "-ic", "-lic", "-x", "'-lc'"]),
    SHELLISH,
)


@settings(max_examples=examples(600))
@given(st.one_of(SHELLISH, WRAPPED, st.lists(SHELLISH, min_size=1, max_size=4)))
@example("bash -lc 'npm test'")
@example("  /bin/sh -c \"echo 'hi there'\"")
@example("bash -lc 'unclosed")
@example("ls -la src")
@example("bash")
@example("b'a'sh -c x")
def test_command_wording_matches_shlex(value: object) -> None:
    assert _command_text(value) == command_text_reference(value)


def test_a_call_is_worded_the_same_for_its_line_its_result_and_the_status_line() -> None:
    fmt = ProgressFormatter()
    call = {"type": "tool_call", "toolCallId": "c1", "toolName": "bash"}
    call["args"] = {"command": "bash -lc 'cd /work && npm test'"}
    assert fmt.line(call) == describe("bash", call["args"], None, shorten=True)
    assert fmt.activity() == fmt.line(call)
    result = {"type": "tool_result", "toolCallId": "c1", "toolName": "bash", "isError": True}
    line = fmt.line(result)
    assert line == describe("bash", call["args"], "failed", shorten=True)
    assert "cd /work && npm test" in line
    assert fmt.activity() == line
