"""The command line: a thin layer over the Python API (``subagents.api``)."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"subagents: {message}", err=True)
    sys.exit(code)


def exit_now(code: int) -> NoReturn:
    """Exit once everything is written, without the interpreter's teardown of every loaded
    module (60-100 ms with pydantic and rich loaded): a caller waiting on us sees the end sooner.
    Every file of the job was closed before; only our own output needs flushing."""
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# Below this width (an 80-column terminal, a pane) tables drop their least useful columns
# instead of cutting every cell.
WIDE = 100


def table(columns: list[tuple[str, dict[str, Any]]]) -> tuple[Any, Any]:
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


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def emit_answer(result: dict[str, Any]) -> None:
    """stdout: the answer(s); stderr: what went wrong."""
    runs = result.get("runs") or []
    if result.get("mode") == "parallel":
        for i, r in enumerate(runs):
            label = f"[{i + 1}] {r.get('agent') or r.get('backend') or 'run'}: {r.get('status')}"
            click.echo(f"## {label}\n\n{(r.get('finalText') or '').rstrip()}\n")
    elif result.get("status") == "completed":
        text = result.get("finalText") or ""
        click.echo(text if text.endswith("\n") else text + "\n", nl=False)
    for r in runs:
        if r.get("status") != "completed":
            click.echo(r.get("diagnostics") or r.get("errorMessage") or r.get("status"), err=True)


class _Main(click.Group):
    """The command group: a file fault that nothing below could handle (a full disk, an
    unwritable state dir) ends the command with one line naming it, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        import errno
        import sqlite3

        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # click's own handling of a closed stdout
            from subagents.core.files import describe_os_error

            fail(describe_os_error(exc), 1)
        except sqlite3.Error as exc:
            fail(f"the job index: {exc}", 1)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="subagents")
def main() -> None:
    """Delegate tasks to child coding agents and get back a result you can trust.

    Exit codes: 0 completed, 1 failed, 2 bad input, 124 timeout, 130 aborted.
    """
