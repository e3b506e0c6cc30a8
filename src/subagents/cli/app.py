"""The command line: a thin layer over the internal service (``subagents.service``) and the
public Python API (``subagents.api``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypedDict

import click

from subagents.core.childtext import neutralize
from subagents.errors import SubagentsError

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.types import JobResult, JobState

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"subagents: {message}", err=True)
    sys.exit(code)


# Run as the command ends, its output written (entry.py: a warm server started for the next).
AT_EXIT: list[Callable[[], None]] = []
# Told the exit code as the command leaves by ``exit_now`` (a warm server's worker tells its
# caller: cli/warmserver.py).
TELL_EXIT: list[Callable[[int], None]] = []


# Done once the caller knows how the command ended (after TELL_EXIT), before the exit:
# what no reader waits for (a finished job's index row).
WHEN_TOLD: list[Callable[[], None]] = []


def run_at_exit() -> None:
    while AT_EXIT:
        AT_EXIT.pop()()


def exit_now(code: int) -> NoReturn:
    """Exit once everything is written, without the interpreter's teardown of every loaded
    module (60-100 ms with pydantic and rich loaded): a caller waiting on us sees the end sooner.
    Every file of the job was closed before; only our own output needs flushing."""
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    run_at_exit()
    for tell in TELL_EXIT:
        tell(code)
    while WHEN_TOLD:
        WHEN_TOLD.pop()()
    os._exit(code)


# Below this width (an 80-column terminal, a pane) tables drop their least useful columns
# instead of cutting every cell.
WIDE = 100


class ColumnOptions(TypedDict, total=False):
    """What a column of :func:`table` may say of its width (rich's ``add_column``)."""

    min_width: int
    max_width: int
    ratio: int
    justify: Literal["left", "center", "right"]


def table(columns: list[tuple[str, ColumnOptions]]) -> tuple[Any, Any]:
    """A rich console and a borderless table with these (header, column options); the
    whole cells of narrow columns (ids, statuses) are kept, the last column wraps."""
    from rich.console import Console
    from rich.table import Table

    grid = Table(box=None, pad_edge=False)
    for i, (header, options) in enumerate(columns):
        last = i == len(columns) - 1
        grid.add_column(
            header,
            no_wrap=not last,
            overflow="fold" if last else "ellipsis",
            **options,
        )
    return Console(), grid


def echo_child_text(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Text that holds a child's words, with its terminal escapes and controls removed."""
    click.echo(neutralize(text), err=err, nl=nl)


def print_json(obj: Any) -> None:
    from subagents.core.files import json_pieces

    out = sys.stdout
    for piece in json_pieces(obj):  # a big answer is not copied into one string first
        out.write(piece)
    out.write("\n")
    out.flush()


def emit_answer(result: JobResult | JobState) -> None:
    """stdout: the answer(s); stderr: a council's table, and what went wrong."""
    from subagents.present.answer import map_summary, terminal

    if result.get("mode") == "map":  # its rows' answers: --out, `show --rows`
        answer(map_summary(result))
        return

    told = terminal(result)
    if told.table is not None:
        echo_child_text(told.table, err=True)
    for text in told.answers:
        answer(text, nl=False)
    for why in told.failures:
        echo_child_text(why, err=True)


def answer(text: str, nl: bool = True) -> None:
    """The answer, verbatim for a program reading it; on a terminal, without escapes."""
    if sys.stdout.isatty():
        echo_child_text(text, nl=nl)
    else:
        click.echo(text, nl=nl, color=True)  # click would strip ANSI from a pipe


# The module that defines each command (``commands`` imports them all). A command line
# imports its own command's module only, not every other command's with what they import.
COMMAND_MODULES = {
    **dict.fromkeys(("agents", "doctor"), "catalog"),
    **dict.fromkeys(("apply", "continue"), "repos"),
    "claude-code": "claudecode",
    "cost": "cost",
    **dict.fromkeys(("demo", "run"), "delegate"),
    **dict.fromkeys(("history", "watch"), "records"),
    **dict.fromkeys(("answer", "approve", "deny", "inbox"), "inbox"),
    **dict.fromkeys(("logs", "prune", "ps", "rm", "send", "show", "stop", "wait"), "jobs"),
    "map": "mapcmd",
    **dict.fromkeys(("mcp", "web"), "serve"),
    "notices": "notices",
    "ray": "cluster",
    "top": "top",
}


class _Commands(click.Group):
    """Every command's bad input ends as one line and exit 2, wherever it was found;
    a file fault as one line and exit 1. A command's module is imported when the command
    is asked for (``COMMAND_MODULES``); all of them for the list (``--help``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            # By name: the command modules import this one (it is no import cycle); through
            # __import__, which -X importtime sees (importlib.import_module it does not).
            __import__(f"subagents.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        __import__("subagents.cli.commands")
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        import errno
        import sqlite3

        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # click's own handling of a closed stdout
            from subagents.core.files import describe_os_error

            # A file fault nothing below could handle (a full disk, an unwritable state
            # dir): one line naming it, never a traceback.
            fail(describe_os_error(exc), 1)
        except sqlite3.Error as exc:
            fail(f"the job index: {exc}", 1)
        except SubagentsError as exc:
            # Bad input (UsageError) exits 2; anything else subagents could not do, 1.
            fail(str(exc), exc.exit_code)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="subagents")
def main() -> None:
    """Delegate tasks to child coding agents and get back a result you can trust.

    Exit codes: 0 completed, 1 failed, 2 bad input, 124 timeout, 130 aborted.
    """
