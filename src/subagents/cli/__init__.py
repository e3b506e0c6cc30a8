"""The command line: a thin layer over the internal service (``subagents.service``) and the
public Python API (``subagents.api``); it never imports ``jobs`` (an import-linter contract).

``app`` holds the command group and what every command shares; each other module adds
its commands to it (``commands`` imports them all). ``entry.main`` is the program (the
``subagents`` script, ``python -m subagents.cli``). This package imports nothing itself,
so the program can start a run's supervisor before the commands' imports (``entry``);
``subagents.cli.main`` is the command group with every command, imported on first use.
"""

TYPE_CHECKING = False  # not typing's: this package imports nothing before the program starts
if TYPE_CHECKING:
    from subagents.cli.commands import main

__all__ = ["main"]


def __getattr__(name: str) -> object:
    # PEP 562: the command group, with every command registered, only when asked for.
    if name == "main":
        from subagents.cli.commands import main

        return main
    raise AttributeError(f"module 'subagents.cli' has no attribute {name!r}")
