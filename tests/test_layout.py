"""The package layout's promises: what each package's __init__ offers resolves, and the
supervisor's start path imports nothing heavy (it must start fast)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.pistream import shell_pi

# Packages that offer names from their __init__ (imported eagerly) ...
OFFERING_NAMES = [
    "subagents.runs",
    "subagents.jobs",
    "subagents.mcp",
    "subagents.web",
    "subagents.launchers",
    "subagents.backends",
]
# ... and packages that offer their modules: an __init__ that imports nothing.
OFFERING_MODULES = [
    "subagents.core",
    "subagents.present",
    "subagents.supervisor",
    "subagents.lifecycle",
]


@pytest.mark.parametrize("name", OFFERING_NAMES)
def test_every_offered_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    for attr in package.__all__:
        assert getattr(package, attr) is not None, f"{name}.{attr}"


@pytest.mark.parametrize("name", OFFERING_MODULES)
def test_module_offering_packages_import_nothing(name: str) -> None:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    assert [type(n).__name__ for n in tree.body] in ([], ["Expr"]), f"{name}: only a docstring"


def test_unknown_top_level_name_is_an_attribute_error() -> None:
    import subagents

    with pytest.raises(AttributeError):
        subagents.nope  # noqa: B018


def test_api_run_is_the_function_not_the_runs_package() -> None:
    # A package named like an API function would shadow it once imported.
    import subagents
    import subagents.runs

    assert callable(subagents.run)
    assert subagents.run.__module__ == "subagents.api"


@pytest.mark.process
def test_supervisor_start_path_imports_nothing_heavy() -> None:
    code = (
        "import sys, json, subagents.supervisor.main, subagents.backends.pi;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    heavy = {"pydantic", "rich", "click", "mcp", "yaml", "psutil", "typing", "dataclasses"}
    heavy |= {"ctypes", "inotify_simple", "orjson", "sqlite3"}
    assert not heavy & {m.split(".")[0] for m in loaded}
    assert not any(
        m.startswith(("subagents.jobs", "subagents.api", "subagents.cli")) for m in loaded
    )


@pytest.mark.process
def test_a_delegation_imports_only_what_it_needs(tmp_path: Path) -> None:
    """``subagents run -q TASK``, the whole command to its answer, imports none of what only
    other commands, a display or a long stream need (its fixed cost is every delegation's)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "subagents.cli", "run", "-q", "hi"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **shell_pi(tmp_path / "pi")},
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr[-2000:]
    modules = {
        line.split("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    loaded = {m.split(".")[0] for m in modules}
    assert "click" in loaded and "subagents.cli.delegate" in modules  # the listing was read
    heavy = {"pydantic", "rich", "yaml", "psutil", "inotify_simple", "mcp", "textual"}
    heavy |= {"jsonschema", "starlette", "uvicorn", "jinja2", "markdown_it", "orjson"}
    assert not heavy & loaded
    # Only its own command's module (cli/app.COMMAND_MODULES), not the others'.
    others = {f"subagents.cli.{m}" for m in ("jobs", "serve", "top", "cluster", "claudecode")}
    assert not others & modules


def test_each_command_is_in_the_module_the_command_map_names() -> None:
    from subagents.cli import main
    from subagents.cli.app import COMMAND_MODULES

    assert set(main.commands) == set(COMMAND_MODULES)
    for name, command in main.commands.items():
        assert command.callback is not None
        assert command.callback.__module__ == f"subagents.cli.{COMMAND_MODULES[name]}", name


def test_every_exception_class_is_under_one_root() -> None:
    """Each exception class subagents defines descends from SubagentsError, and they all
    live in subagents.errors: a surface maps errors by class (exit codes, tool errors)."""
    from subagents.errors import SubagentsError

    root = Path(importlib.util.find_spec("subagents").origin).parent  # type: ignore[union-attr, arg-type]
    defined = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")))
                for b in node.bases
            ):
                defined[node.name] = path.relative_to(root).as_posix()
    assert defined, "the walk found the tree"
    assert set(defined.values()) == {"errors.py"}, defined
    import subagents.errors as errors

    for name in defined:
        assert issubclass(getattr(errors, name), SubagentsError), name
    assert errors.UsageError.exit_code == 2 and errors.LaunchError.exit_code == 1
