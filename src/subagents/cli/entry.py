"""The program: ``subagents ARGS`` (and ``python -m subagents.cli ARGS``).

A command that will launch a run here (``subagents run`` or ``continue`` in the
foreground) has a
supervisor started first, before the commands' own imports (click, the service, the
planning): its interpreter's start and imports then go on beside ours, and the run is
handed to it once planned (launchers/spares.py) instead of waiting for a supervisor to
start. Any other command costs nothing here. A run that turns out not to need it (bad
input, a launcher named in the config) lets it go: at its job's end, or killed as we exit,
having been handed nothing.
"""

from __future__ import annotations

import sys

# The commands that launch a run here, in the foreground unless told otherwise (a
# continued run goes where its earlier run went: elsewhere, its early supervisor is only
# let go); the options after which they launch nothing here, or maybe not through the
# process launcher: no supervisor is started ahead for them.
_LAUNCHING = ("run", "continue")
_NOT_HERE = ("--bg", "--help", "-h", "--launcher", "--executor", "--runner")


def launches_here(args: list[str]) -> bool:
    """Whether these arguments are a foreground ``run`` or ``continue`` that launches its
    run through the process launcher (the default) as far as the command line says."""
    if not args or args[0] not in _LAUNCHING:
        return False
    for arg in args[1:]:
        if arg == "--":
            break  # the rest are TASKs
        if arg.split("=", 1)[0] in _NOT_HERE:
            return False
    return True


def main() -> None:
    if launches_here(sys.argv[1:]):
        from subagents.launchers import start_spare_early

        start_spare_early()
    # The group alone: it imports the module of the command asked for (app.COMMAND_MODULES).
    from subagents.cli.app import main as commands

    commands()
