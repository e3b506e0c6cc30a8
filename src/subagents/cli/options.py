"""The command line's face of a run's options (subagents/options.py): one ``@run_options``
that gives `run` a flag for each, and the way back from a problem's place (``loc``) to the
flag the user typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin

import click

from subagents.cli.app import fail
from subagents.options import Spec, job_specs, specs, step_specs

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.errors import Loc, UsageError

F = TypeVar("F", bound="Callable[..., Any]")

# The launcher's two older flags, kept: --runner chose how a supervisor starts here,
# --executor whether it starts here at all.
ALIASES = {"runner": ("process", "tmux"), "executor": ("local", "ray")}


def _click_kwargs(spec: Spec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"help": spec.meta.help}
    tp = spec.base_type()
    if get_origin(tp) is Literal:
        kwargs["type"] = click.Choice(list(get_args(tp)))
    elif tp is bool:
        kwargs.update(is_flag=True, default=None)
    elif tp in (int, float):
        kwargs["type"] = tp
    if spec.meta.metavar:
        kwargs["metavar"] = spec.meta.metavar
    return kwargs


def run_options(fn: F) -> F:
    """Every option the command line offers, as `run`'s flags (each named by its option's
    name: ``--max-turns``, ``--job-max-turns``), in the order they are defined."""
    for name, choices in reversed(ALIASES.items()):
        fn = click.option(f"--{name}", type=click.Choice(choices), hidden=True)(fn)
    return _flags(fn, [s for s in specs() if s.on("cli")])


def options_named(*fields: str) -> Callable[[F], F]:
    """The flags of only these options (``subagents map`` takes a run's gate, not every
    option `run` has), from the same definition as :func:`run_options`."""
    chosen = [s for s in specs() if s.field in fields and s.on("cli")]
    missing = set(fields) - {s.field for s in chosen}
    if missing:
        raise ValueError(f"no such command-line option: {', '.join(sorted(missing))}")
    return lambda fn: _flags(fn, chosen)


def _flags(fn: F, chosen: list[Spec]) -> F:
    for spec in reversed(chosen):
        names = [spec.flag, *([spec.meta.short] if spec.meta.short else []), spec.name]
        fn = click.option(*names, **_click_kwargs(spec))(fn)
    return fn


@dataclass(repr=False, eq=False)
class Chosen:
    """What `run`'s flags chose, by where each applies: each step's options, the job's,
    and the settings' (``api.prepare_job``'s keywords)."""

    step: dict[str, Any]
    job: dict[str, Any]
    settings: dict[str, Any]


def chosen(values: dict[str, Any]) -> Chosen:
    """``values`` (the flags' values, by option name) sorted by scope, the unset left out;
    the launcher as the settings' runner and executor (a conflict: one line, exit 2)."""
    step = {s.field: values.pop(s.name) for s in step_specs() if s.on("cli")}
    job = {s.field: values.pop(s.name) for s in job_specs() if s.on("cli")}
    settings = {k: v for k, v in values.items() if v is not None and k not in ALIASES}
    launcher = settings.pop("launcher", None)
    runner, executor = values.get("runner"), values.get("executor")
    if launcher is not None and (runner or executor):
        given = "--runner" if runner else "--executor"
        fail(f"--launcher and {given} say the same: give one")
    if launcher == "ray":
        executor = "ray"
    elif launcher is not None:
        runner, executor = launcher, "local"
    tools = settings.pop("tools", None)
    if tools is not None:
        settings["tools"] = [t.strip() for t in tools.split(",") if t.strip()]
    settings.update({k: v for k, v in (("runner", runner), ("executor", executor)) if v})
    return Chosen(
        {k: v for k, v in step.items() if v is not None},
        {k: v for k, v in job.items() if v is not None},
        settings,
    )


def flag_for(loc: Loc) -> str | None:
    """The flag that sets what ``loc`` names: a job option (``("max_turns",)``:
    ``--job-max-turns``) or a step's (``("steps", 0, "max_turns")``: ``--max-turns``)."""
    if len(loc) == 1:
        spec = next((s for s in job_specs() if s.field == loc[0]), None)
    elif len(loc) == 3 and loc[0] in ("steps", "tasks"):
        spec = next((s for s in step_specs() if s.field == loc[2]), None)
    else:
        spec = None
    return None if spec is None else spec.flag


def on_the_command_line(exc: UsageError, steps: int) -> str:
    """A problem with the job the flags and TASKs made, where the user typed it: a job
    option's flag (``--job-max-cost: …``); with one task, a step option's
    (``--max-turns: …``), or no place at all for the task, backend or agent, whose
    problems name them; else the job's own place (``steps.1.timeout: …``)."""
    loc, problem = exc.loc, exc.problem
    if len(loc) == 1 and (flag := flag_for(loc)) is not None:
        return f"{flag}: {problem}"
    if steps == 1 and len(loc) == 3 and loc[:2] in (("steps", 0), ("tasks", 0)):
        name = str(loc[2])
        spec = next((s for s in step_specs() if s.field == name), None)
        flag = spec.flag if spec else "--" + name.replace("_", "-")
        if name in ("backend", "agent") or problem.startswith(("the task", f"{flag} ")):
            return problem
        return f"{name}: {problem}" if name == "task" else f"{flag}: {problem}"
    where = ".".join(str(part) for part in loc)
    return f"{where}: {problem}" if where else problem
