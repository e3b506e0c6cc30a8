"""The command line: a thin layer over the Python API (``subagents.api``).

``app`` holds the command group and what every command shares; each other module adds
its commands to it.
"""

from __future__ import annotations

from subagents.cli import (
    catalog,
    claudecode,
    cluster,
    cost,
    delegate,
    jobs,
    mapcmd,
    notices,
    records,
    repos,
    serve,
    top,
)
from subagents.cli.app import main

__all__ = [
    "catalog",
    "claudecode",
    "cluster",
    "cost",
    "delegate",
    "jobs",
    "main",
    "mapcmd",
    "notices",
    "records",
    "repos",
    "serve",
    "top",
]
