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

import os
import sys

# The commands that launch a run here, in the foreground unless told otherwise (a
# continued run goes where its earlier run went: elsewhere, its early supervisor is only
# let go); the options after which they launch nothing here, or maybe not through the
# process launcher: no supervisor is started ahead for them.
_LAUNCHING = ("run", "continue")
_NOT_HERE = ("--bg", "--help", "-h", "--launcher", "--executor", "--runner")
# The commands handed to a warm command server when one serves (cli/warmclient.py).
WARM_COMMANDS = ("run", "continue")


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
    start_server = False
    if wanted(sys.argv[1:]):
        from subagents.cli import warmclient

        # Returns only if no worker was started: then the command runs here, as always.
        why = warmclient.handed_over(sys.argv[1:])
        start_server = why != warmclient.REFUSED
    in_process(start_server=start_server)


def wanted(args: list[str]) -> bool:
    """Whether to try a warm server (cli/warmclient.py): a command it serves (the run path
    it has imported), then the client's own checks."""
    if not args or args[0] not in WARM_COMMANDS:
        return False
    from subagents.cli.warmclient import wanted

    return wanted(os.environ)


def in_process(*, start_server: bool, warm: bool = False) -> None:
    """The command line in this process (``start_server``: then a warm server for the next
    one, as this one exits; ``warm``: this is a warm server's worker, whose early supervisor
    is forked from it)."""
    if launches_here(sys.argv[1:]):
        from subagents.launchers import start_spare_early

        start_spare_early(fork=warm)  # (a warm worker's, forked ahead, takes its state)
    elif warm:
        from subagents.launchers import let_go_spares_ahead

        let_go_spares_ahead()
    # The group alone: it imports the module of the command asked for (app.COMMAND_MODULES).
    from subagents.cli import app

    if start_server:
        from subagents.cli.warmclient import start_server as start

        app.AT_EXIT.append(start)
    try:
        app.main()
    finally:
        app.run_at_exit()
