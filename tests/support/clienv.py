"""The environment every real agent CLI a test starts inherits (set once, in the test
process's own environment, by ``tests/conftest.py``); what points each CLI at the mock
model is its config writer's (``subagents.demo.mockmodel``).

``NODE_COMPILE_CACHE``: Node's own module compile cache (Node 22.1+), in one directory
kept across tests, workers and runs. The Node CLIs (gemini, qwen, pi, Zed's
claude-agent-acp) otherwise compile their megabytes of bundled JavaScript again in every
process: a third of qwen's CPU per run, a fifth of gemini's. The cache changes nothing a
CLI does; a damaged or stale entry is checked and recompiled by Node.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def shared_cli_env() -> dict[str, str]:
    cache = Path(tempfile.gettempdir()) / f"subagents-tests-{os.getuid()}" / "node-compile-cache"
    cache.mkdir(parents=True, exist_ok=True)
    return {"NODE_COMPILE_CACHE": str(cache)}
