"""The command line: a thin layer over the Python API (``subagents.api``).

``app`` holds the command group and what every command shares; each other module adds
its commands to it.
"""

from __future__ import annotations

from subagents.cli import catalog, delegate, jobs, records, repos, serve
from subagents.cli.app import main

__all__ = ["catalog", "delegate", "jobs", "main", "records", "repos", "serve"]
