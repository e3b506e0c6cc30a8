"""The suite's own rules: helpers shared between test modules live in tests/support (no test
module imports another, nor conftest), and a test that starts a process without saying so
(the ``process`` marker) fails, so the fast tier (``-m "not process"``) stays fast."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.spawns import SpawnGuard

TESTS = Path(__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (top level, in a function)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def test_no_test_module_imports_another_or_conftest() -> None:
    offenders = {
        f"{path.relative_to(TESTS)} imports {name}"
        for path in TESTS.rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] == "conftest" or name.split(".")[0].startswith("test_")
    }
    assert not offenders, f"move what is shared to tests/support/: {sorted(offenders)}"


class Unmarked:
    nodeid = "tests/test_x.py::test_y"

    def get_closest_marker(self, name: str) -> Any:
        return None


def test_an_unmarked_test_that_starts_a_process_fails_naming_the_marker(tmp_path: Path) -> None:
    guard = SpawnGuard()
    guard.pytest_sessionstart()
    guard.item = Unmarked()  # type: ignore[assignment]
    try:
        with pytest.raises(pytest.fail.Exception, match=r"not marked `process`: add"):
            subprocess.run(["touch", str(tmp_path / "ran")], check=True, timeout=30)
    finally:
        guard.item = None
        guard.pytest_sessionfinish()
    assert not (tmp_path / "ran").exists()  # refused before it started
    assert guard.spawned == ["touch " + str(tmp_path / "ran")]


@pytest.mark.process
def test_an_in_process_command_that_hangs_ends_its_process_with_the_stacks() -> None:
    # support.cli.invoke has no subprocess timeout: its bound ends the process instead.
    code = (
        "import sys, time, click, subagents.cli\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "from support.cli import invoke\n"
        "subagents.cli.main = click.command()(lambda: time.sleep(120))\n"
        "invoke([], bound=1)\n"
        "print('returned')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert done.returncode != 0 and "returned" not in done.stdout
    assert done.stderr.startswith("Timeout (0:00:01)!"), done.stderr
    assert "support/cli.py" in done.stderr and "in invoke" in done.stderr  # where it hung
