"""Whether the Node that would run an npm-installed CLI is new enough for it.

An npm bin starts with ``#!/usr/bin/env node``: the first ``node`` on PATH runs it, whatever
the package needs (pi >= 0.74 needs Node >= 22 and dies at once with a SyntaxError on 20).
The need is the package's own ``engines.node``; only ``>=X[.Y[.Z]]`` is understood.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

_ATLEAST = re.compile(r"^\s*>=\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*$")
FIX = (
    "install Node {need} or newer and put it first on PATH; in a subagents checkout, "
    "./scripts/setup puts Node 22 in .tools/node_modules/.bin (put that first on PATH)"
)


def _version(text: str) -> tuple[int, ...] | None:
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def _needs(binary: str) -> tuple[int, ...] | None:
    """``engines.node`` of the npm package that ``binary`` belongs to, if it says ``>=``."""
    try:
        script = Path(binary).resolve()
        with script.open("rb") as f:
            if b"node" not in f.readline(200):
                return None
    except OSError:
        return None
    for parent in list(script.parents)[:6]:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                engines = json.loads(manifest.read_text()).get("engines") or {}
            except (OSError, ValueError, AttributeError):
                return None
            m = _ATLEAST.match(str(engines.get("node") or ""))
            return tuple(int(x or 0) for x in m.groups()) if m else None
    return None


def node_too_old(binary: str, env: Mapping[str, str]) -> str | None:
    """Why the Node on ``env``'s PATH cannot run ``binary`` (with the fix), or None."""
    need = _needs(binary)
    if need is None:
        return None
    node = shutil.which("node", path=env.get("PATH", ""))
    need_s = ".".join(map(str, need))
    if node is None:
        return f"needs Node >= {need_s}, and no `node` is on PATH: " + FIX.format(need=need_s)
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    have = _version(out)
    if have is None or have >= need:
        return None
    return f"needs Node >= {need_s}, but `node` on PATH is {out.strip()} ({node}): " + FIX.format(
        need=need_s
    )
