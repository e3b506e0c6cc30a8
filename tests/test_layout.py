"""The package layout's promises: what each package's __init__ offers resolves, and the
supervisor's start path imports nothing heavy (it must start fast)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

LAZY_PACKAGES = ["subagents.runs", "subagents.jobs", "subagents.present", "subagents.mcp"]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_offered_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    offered = package._NAMES
    assert sorted(package.__all__) == sorted(offered)
    for attr in offered:
        assert getattr(package, attr) is not None, f"{name}.{attr}"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package.nope  # noqa: B018


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


def test_supervisor_start_path_imports_nothing_heavy() -> None:
    code = (
        "import sys, json, subagents.runs.supervisor, subagents.backends.pi;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    heavy = {"pydantic", "rich", "click", "mcp", "yaml", "psutil", "typing", "dataclasses"}
    assert not heavy & {m.split(".")[0] for m in loaded}
    assert not any(
        m.startswith(("subagents.jobs", "subagents.api", "subagents.cli")) for m in loaded
    )
