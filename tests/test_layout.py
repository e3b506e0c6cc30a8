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
from support.cli import cli, imported_modules
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


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Every subagents module a delegation (``run -q TASK``, the default backend and launcher)
# imports: its fixed cost is mostly imports, so the path is a list, not a hope. A module
# new to it fails the test below: import it where it is used (a function, a lazy name of
# jobs or runs: core/lazy.py), or, if every delegation needs it, add it here.
RUN_PATH = _words(
    """
    subagents subagents.errors subagents.config subagents.options subagents.types
    subagents.service
    subagents.cli subagents.cli.entry subagents.cli.warmclient subagents.cli.app
    subagents.cli.background
    subagents.cli.options subagents.cli.delegate
    subagents.core subagents.core.files subagents.core.procs subagents.core.events
    subagents.core.records subagents.core.childtext subagents.core.inputs subagents.core.lazy
    subagents.core.paths subagents.core.clock subagents.core.ids subagents.core.indexdb
    subagents.core.upgrade subagents.core.tail subagents.core.inotify subagents.core.waker
    subagents.core.controlsock
    subagents.supervisor subagents.supervisor.handover subagents.supervisor.spec
    subagents.supervisor.result
    subagents.launchers subagents.launchers.base subagents.launchers.local
    subagents.launchers.registry subagents.launchers.spares subagents.launchers.process
    subagents.backends subagents.backends.base subagents.backends.acp subagents.backends.tools
    subagents.runs subagents.runs.request subagents.runs.acpcheck subagents.runs.approvalcheck
    subagents.runs.checks subagents.runs.monitor subagents.runs.handle subagents.runs.versions
    subagents.runs.rundir subagents.runs.launch subagents.runs.control
    subagents.jobs subagents.jobs.spec subagents.jobs.planning subagents.jobs.outcome
    subagents.jobs.store subagents.jobs.jobindex subagents.jobs.budget subagents.jobs.tasks
    subagents.jobs.orchestrator
    subagents.jobs.runner subagents.jobs.records
    subagents.lifecycle subagents.lifecycle.sessionlog subagents.lifecycle.hooks
    subagents.present subagents.present.figures subagents.present.outcome
    subagents.present.roles subagents.present.answer
    """
)
# Never on that path: what only other commands, a display, a plan or agent file, a config
# file, a map, approvals or a long stream need (third-party and standard library alike).
NOT_ON_RUN_PATH = _words(
    """
    pydantic rich yaml psutil inotify_simple mcp textual jsonschema starlette uvicorn jinja2
    markdown_it orjson platformdirs ray
    tomllib csv asyncio concurrent email http logging multiprocessing socket ssl tarfile
    tempfile zipfile argparse decimal shutil bz2 lzma zlib hashlib
    """
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
        # The command's own imports: in-process (a warm server's worker imports nothing).
        env={**os.environ, **shell_pi(tmp_path / "pi"), "SUBAGENTS_WARM": "0"},
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr[-2000:]
    modules = imported_modules(done.stderr)
    loaded = {m.split(".")[0] for m in modules}
    assert "click" in loaded and "subagents.jobs.orchestrator" in modules  # the listing was read
    assert not NOT_ON_RUN_PATH & loaded, sorted(NOT_ON_RUN_PATH & loaded)
    ours = {m for m in modules if m.split(".")[0] == "subagents"}
    assert ours <= RUN_PATH, f"new on the run path: {sorted(ours - RUN_PATH)}"


def test_the_lazy_packages_offer_what_type_checkers_see() -> None:
    """jobs and runs import a name's module on its first use (core/lazy.py): the map that
    says where each name lives is the TYPE_CHECKING imports mypy reads, name for name."""
    for name in ("subagents.jobs", "subagents.runs"):
        package = importlib.import_module(name)
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        tree = ast.parse(Path(spec.origin).read_text())
        seen = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                for imp in node.body:
                    assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                    module = imp.module.removeprefix(f"{name}.")
                    for alias in imp.names:
                        renamed = alias.asname is not None and alias.asname != alias.name
                        where = f"{module}:{alias.name}" if renamed else module
                        seen[alias.asname or alias.name] = where
        assert seen == package._WHERE, name
        assert set(seen) <= set(package.__all__), name


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


@pytest.mark.process
def test_a_runs_end_imports_nothing_heavy(tmp_path: Path) -> None:
    """What the supervisor imports once handed its run, to its result (after its child
    exited, on every delegation's critical path): no datetime, typing or dataclasses."""
    home = tmp_path / "home"
    env = {**shell_pi(tmp_path / "pi"), "SUBAGENTS_HOME": str(home), "PYTHONPROFILEIMPORTTIME": "1"}
    done = cli(["run", "-q", "hi"], env)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr[-2000:]
    (run,) = (home / "runs").iterdir()
    modules = imported_modules((run / "supervisor.log").read_text())
    assert "subagents.core.clock" in modules  # (its result's times: the listing was read)
    assert not {"datetime", "typing", "dataclasses"} & modules, sorted(modules)
