"""The command line: a thin layer over the internal service (``subagents.service``) and the
public Python API (``subagents.api``); it never imports ``jobs`` (an import-linter contract).

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
    inbox,
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
    "inbox",
    "jobs",
    "main",
    "mapcmd",
    "notices",
    "records",
    "repos",
    "serve",
    "top",
]
