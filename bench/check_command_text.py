"""Equivalence check: the tool-call humanizer's shlex-free command shortening against
the shlex-based original, over many generated commands.

    .venv/bin/python bench/check_command_text.py [--cases 300000]

Compares ``humanize._shell_words`` with ``shlex.split`` (None where shlex raises) and
``humanize._command_text`` with the original ``_command_text`` (kept below verbatim)
on the same inputs: strings and argv lists built from shell names, flags, quotes,
backslashes, shlex's and other whitespace, and non-ASCII text. Also times both.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from subagents.present import humanize

# The original, before the shlex-free rewrite: kept once, verbatim, in the test that
# checks the two agree.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_humanize_commands import command_text_reference as old_command_text

# ---- inputs ----------------------------------------------------------------------

PIECES = [
    "bash", "sh", "zsh", "dash", "/bin/bash", "/usr/bin/env", "ba", "s", "h",
    "-c", "-lc", "-ic", "-lic", "-x", "npm", "test", "ls", "a", "é", "x=1",
    " ", " ", "  ", "\t", "\n", "\r", "\x0b", "\x0c", "\xa0", "\u2003",
    "'", "'", '"', '"', "\\", "\\", "''", '""', "#", ";", "|", "&&", "$HOME", "*",
    "'bash'", '"-c"', "'npm test'", '"a \\" b"', "\\'", '\\"', "\\\\",
]  # fmt: skip

FIXED = [
    "ls",
    "  ls -la  ",
    "bash -lc 'npm test'",
    "/bin/bash -lc 'cd /x && make'",
    'sh -c "echo \\"hi\\""',
    "bash -c",
    "bash -c 'unterminated",
    "echo \\",
    'echo "a\\',
    "s''h -c x",
    "'/x y/bash' -c cmd",
    "bash -c ''",
    "bash\t-c\tls",
    "bash\x0b-c ls",
    "bash -c ls # comment",
    "\n\nbash -c 'a\nb'\n",
]


def cases(n: int, rng: random.Random) -> list[Any]:
    out: list[Any] = list(FIXED)
    while len(out) < n:
        k = rng.randint(0, 10)
        text = "".join(rng.choice(PIECES) for _ in range(k))
        if rng.random() < 0.2:
            out.append([rng.choice(PIECES) + rng.choice(PIECES) for _ in range(rng.randint(0, 4))])
        else:
            out.append(text)
    return out


def split_or_none(text: str) -> list[str] | None:
    try:
        return shlex.split(text)
    except ValueError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    inputs = cases(args.cases, random.Random(args.seed))
    bad = 0
    for value in inputs:
        if isinstance(value, str):
            want, got = split_or_none(value), humanize._shell_words(value)
            if want != got:
                bad += 1
                if bad <= 10:
                    print(f"split differs for {value!r}: shlex {want!r}, new {got!r}")
        want, got = old_command_text(value), humanize._command_text(value)
        if want != got:
            bad += 1
            if bad <= 10:
                print(f"_command_text differs for {value!r}: old {want!r}, new {got!r}")
    times = []
    for fn in (old_command_text, humanize._command_text):
        t0 = time.perf_counter()
        for value in inputs:
            fn(value)
        times.append((time.perf_counter() - t0) / len(inputs) * 1e6)
    print(
        f"{len(inputs)} inputs, {bad} differences; per call: old {times[0]:.2f} us, "
        f"new {times[1]:.2f} us"
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
