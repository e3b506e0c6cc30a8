"""Every command, registered on the one command group: importing this module imports each
command's module (each adds its commands to ``app.main``)."""

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
