"""Issue 39, item 8: a working directory that is gone is bad input naming ``cwd`` (exit 2,
one line), whether it is the shell's own (deleted under it) or the one ``--cwd`` names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import invoke
from support.fake import Fake

pytestmark = pytest.mark.process


def one_line_naming_cwd(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stdout == "", p.stderr
    assert p.stderr.startswith("subagents: cwd: "), p.stderr
    assert p.stderr.count("cwd: ") == 1, p.stderr  # named once, not "cwd: cwd: ..."
    return p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--backend", "pi", "hi"],
        ["run", "--backend", "pi", "--parallel", "a", "b"],
        ["run", "--backend", "pi", "--bg", "hi"],
    ],
)
def test_a_deleted_current_directory_is_exit_2_naming_cwd(
    tmp_path: Path, fake: Fake, args: list[str]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    # The command starts in a directory deleted under it (a shell still in it).
    code = (
        "import os, runpy, sys\n"
        f"os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
        "sys.argv = ['subagents', *sys.argv[1:]]\n"
        "runpy.run_module('subagents.cli', run_name='__main__')\n"
    )
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher), "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert "no longer exists" in one_line_naming_cwd(p)
    assert not (tmp_path / "state" / "jobs").exists()


def test_a_missing_cwd_option_is_exit_2_naming_cwd(tmp_path: Path, fake: Fake) -> None:
    p = invoke(["run", "--backend", "pi", "--cwd", str(tmp_path / "nowhere"), "hi"])
    assert str(tmp_path / "nowhere") in one_line_naming_cwd(p)
