"""A run's options, defined once: each is a field here with its type, its check, its help
and where it applies (``scope``). Every face is made from these fields:

- ``Step`` (jobs/spec.py) is a ``RunOptions`` with a task and a cwd, ``JobSpec`` a
  ``JobOptions`` with a mode and steps; ``RunRequest`` (runs/request.py) is a ``RunOptions``
  too, and its record is one generic conversion;
- the command line's ``@run_options`` (cli/options.py), the MCP tool's arguments
  (mcp/args.py), the Python API's keywords (``types.RunOptionsDict``), the pi package's
  parameters (``integrations/pi/options.ts``, generated: ``scripts/gen-options``) and the
  table in docs/jobs.md (generated too).

Each surface names an option its own way: ``--max-turns`` on the command line,
``max_turns`` in a plan or MCP, ``maxTurns`` in JSON (the pi tool). A face that does not
offer an option says so here (``not_on``), with why. Adding one: docs/design.md.

Standard library only, and nothing heavy: the command line's start path imports it. Its
annotations are objects, not text (no ``from __future__ import annotations``): the fields'
types are read as they are, where evaluating 40 annotations' text (``get_type_hints``)
cost every command line ~4 ms.
"""

import functools
import operator
from collections.abc import Callable
from dataclasses import KW_ONLY, MISSING, Field, dataclass, field, fields
from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

from subagents.core.inputs import (
    MAX_TIMEOUT,
    Budget,
    Seconds,
    budget_problem,
    seconds_problem,
    text_problem,
)
from subagents.errors import FieldProblem

# Where an option applies: to each step (and so each run), to the job as a whole, or to the
# settings the job is planned under (an override of config.toml for this job).
# A map's own options (``MapOptions``) are "map": a map's rows take only some of the others
# (``MAP_TAKES``).
Scope = Literal["step", "job", "settings", "map"]
# The faces an option can be offered on: the command line, the MCP tool, the Python API's
# run/start, the pi tool, and documents (plan files, API dicts).
Face = Literal["cli", "mcp", "api", "pi", "plan"]
FACES: tuple[Face, ...] = ("cli", "mcp", "api", "pi", "plan")

Check = Callable[[object], str | None]


# (Only __init__ generated, here and below: each generated method costs the command line's
# start an exec.)
@dataclass(repr=False, eq=False)
class Option:
    """One option: what every face needs to offer it (its field's name, type and default
    come from the dataclass field it describes)."""

    help: str
    scope: Scope
    check: Check | None = None
    # Its name where it differs from the field's (a job's budget is ``max_turns`` in a
    # job document, ``job_max_turns`` on the MCP tool, ``--job-max-turns``, ``jobMaxTurns``).
    name: str | None = None
    short: str | None = None
    metavar: str | None = None
    # JSON Schema words a client is shown beside the type (minimum, exclusiveMinimum…).
    limits: tuple[tuple[str, float], ...] = ()
    # The setting that is its default when unset (config.Settings' field).
    setting: str | None = None
    # The supervisor's RunSpec key a step option becomes (meta.json): checked by a test.
    supervisor: str | None = None
    # Faces that do not offer it, each with why (shown in docs/jobs.md's table).
    not_on: tuple[tuple[Face, str], ...] = ()


def option(help: str, scope: Scope = "step", **meta: Any) -> Any:
    """A field of ``RunOptions``/``JobOptions``/``SettingsOptions``: unset (None) by default."""
    return field(default=None, metadata={"option": Option(help, scope, **meta)})


# ---- checks (each: the problem as a phrase after the field's name, or None) ----------------


def _text(value: object) -> str | None:
    return text_problem(value) if isinstance(value, str) else f"must be text, not {value!r}"


def _seconds(value: object) -> str | None:
    return seconds_problem(value)


def _seconds_or_off(value: object) -> str | None:
    return seconds_problem(value, off=True)


def _budget(kind: str) -> Check:
    return lambda value: budget_problem(kind, value)


def _at_least_one(value: object) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else f"must be 1 or more, not {value!r}"


def _at_least_zero(value: object) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return None if ok else f"must be 0 or more, not {value!r}"


def _fields(value: object) -> str | None:
    ok = isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
    return None if ok else f"must be an object of field names to text values, not {value!r}"


def _rules(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be text, not {value!r}"
    from subagents.core.approve import rules_problem

    return rules_problem(value)


def _one_of(*allowed: str) -> Check:
    def check(value: object) -> str | None:
        if value in allowed:
            return None
        words = [repr(a) for a in allowed]
        either = " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
        return f"must be {either}, not {value!r}"

    return check


_SECONDS = (("exclusiveMinimum", 0), ("maximum", MAX_TIMEOUT))
_SECONDS_OR_OFF = (("minimum", 0), ("maximum", MAX_TIMEOUT))
_COUNT = (("minimum", 1),)
_USD = (("exclusiveMinimum", 0),)

# ---- the options ------------------------------------------------------------------------


@dataclass(init=False, repr=False, eq=False)  # made as a Step or a RunRequest
class RunOptions:
    """What a caller may choose for each run: a step's options, and the run request's."""

    # Keyword-only: a class that embeds them keeps its own positional fields (a task).
    _: KW_ONLY

    agent: str | None = option(
        "Named agent to run the task (`subagents agents` lists them).",
        check=_text,
        short="-a",
        setting="default_agent",
        supervisor="agent",
    )
    backend: str | None = option(
        "Agent CLI: pi, claude, codex, gemini, opencode; or acp:NAME, an ACP agent"
        " (acp:gemini, acp:qwen, …), or acp with --acp-command. Default: from config, else pi.",
        check=_text,
        short="-b",
        setting="default_backend",
        supervisor="backend",
    )
    model: str | None = option(
        "Model (for pi: provider/id).", check=_text, short="-m", supervisor="requestedModel"
    )
    thinking: str | None = option(
        "How hard the child's model thinks, in its CLI's words (pi: off, minimal, low, medium,"
        " high, xhigh). Default: the agent's.",
        check=_text,
        supervisor="command",
    )
    # (Seconds: a document's ``true`` is no number of seconds; pydantic would make it 1.)
    timeout: Annotated[float | None, Seconds] = option(
        "Wall-clock limit per run in seconds (status 'timeout', exit 124).",
        check=_seconds,
        limits=_SECONDS,
        setting="timeout",
        supervisor="timeout",
    )
    isolate: Literal["worktree"] | None = option(
        "'worktree': each run works in its own git worktree on branch subagents/<run-id>"
        " (see `apply`).",
        check=_one_of("worktree"),
        supervisor="worktree",
    )
    stall_timeout: Annotated[float | None, Seconds] = option(
        "Seconds without an event, with no tool call in flight, before a run is stalled"
        " (default 300 from config; 0 = off).",
        check=_seconds_or_off,
        limits=_SECONDS_OR_OFF,
        setting="stall_timeout",
        supervisor="stallTimeout",
    )
    on_stall: Literal["notice", "abort"] | None = option(
        "On a stall: only say so (notice, default), or stop the run as failed (abort).",
        check=_one_of("notice", "abort"),
        setting="on_stall",
        supervisor="onStall",
    )
    tool_timeout: Annotated[float | None, Seconds] = option(
        "Seconds one tool call may run before the run is stopped as failed (0 = off, the default).",
        check=_seconds_or_off,
        limits=_SECONDS_OR_OFF,
        setting="tool_timeout",
        supervisor="toolTimeout",
    )
    max_turns: Annotated[int | None, Budget] = option(
        "Budget per run: model turns. At the limit a child that takes messages is asked to"
        " wrap up and given 2 more turns; any other is stopped (docs/live-control.md).",
        check=_budget("max_turns"),
        limits=_COUNT,
        setting="max_turns",
        supervisor="limits",
    )
    max_tokens: Annotated[int | None, Budget] = option(
        "Budget per run: tokens (all kinds together).",
        check=_budget("max_tokens"),
        limits=_COUNT,
        setting="max_tokens",
        supervisor="limits",
    )
    max_cost: Annotated[float | None, Budget] = option(
        "Budget per run: cost in USD (where the CLI reports costs: pi, claude, opencode).",
        check=_budget("max_cost"),
        limits=_USD,
        setting="max_cost",
        supervisor="limits",
    )
    # A file, inline JSON, or (in a document) the schema itself; a run request holds it
    # read and checked (structured.load_schema).
    output_schema: str | dict[str, object] | None = option(
        "The answer must be JSON valid against this JSON Schema (2020-12): a file or inline"
        " JSON (or, in a document, the schema); result.json's `structured` holds it"
        " (docs/structured.md).",
        metavar="FILE|JSON",
        setting="output_schema",
        supervisor="outputSchema",
    )

    # The acceptance gate (docs/gates.md): checked once the run completed, by the job.
    verify: str | None = option(
        "An acceptance gate: after a run completes, run CMD (split like a shell line, never"
        " run by one) in its working tree; exit 0 passes, else the child gets a repair turn,"
        " then the run fails (docs/gates.md). Default: the agent's, else config `verify`.",
        check=_text,
        metavar="CMD",
        setting="verify",
    )
    verify_timeout: Annotated[float | None, Seconds] = option(
        "Seconds the gate's command may take (default 600, or config `verify_timeout`).",
        check=_seconds,
        limits=_SECONDS,
        setting="verify_timeout",
    )
    verify_attempts: int | None = option(
        "Checks before the run fails, repair turns between them (default 2, or config"
        " `verify_attempts`).",
        check=_at_least_one,
        limits=_COUNT,
        setting="verify_attempts",
    )
    review: str | None = option(
        "A reviewer gate: a separate run (backend[:model] or an agent) reads the task, the"
        " answer and the diff and approves or lists issues; issues are a repair turn"
        " (docs/gates.md). Default: the agent's, else config `review`.",
        check=_text,
        metavar="AGENT|BACKEND[:MODEL]",
        setting="review",
    )

    # An ACP agent's run (docs/backends.md): its command instead of its preset's, and how
    # its permission requests are answered (runs/acpcheck.py refuses both for any other
    # backend, and 'ask' until there is an approvals inbox).
    acp_command: str | None = option(
        'With --backend acp: the ACP agent to run, e.g. "qwen --acp" (split into words,'
        " never run by a shell; docs/backends.md).",
        check=_text,
        metavar="COMMAND",
        supervisor="command",
    )
    permissions: Literal["allow", "deny", "ask"] | None = option(
        "An ACP agent's permission requests: allow (the default: inside the working tree;"
        " denied outside it), deny every one, or ask (the same as --approvals ask).",
        check=_one_of("allow", "deny", "ask"),
        supervisor="command",
    )

    # Approvals (docs/approvals.md): whether the child's requests to act wait for a decision.
    approvals: Literal["auto", "ask", "deny", "parent"] | None = option(
        "The child's requests to act (a command, an edit): auto (the default: its CLI's"
        " headless mode decides, nothing waits), ask (each waits in `subagents inbox` for a"
        " person), parent (the parent agent decides, through subagent_decide), deny (only"
        " what --approve allows). Needs a CLI that asks: claude, codex, ACP agents.",
        check=_one_of("auto", "ask", "deny", "parent"),
        supervisor="approvals",
        setting="approvals",
    )
    approve: str | None = option(
        "Requests that pass without asking, comma-separated rules: a tool's name, or a tool"
        " and a pattern of its command or path ('Bash(git status*),Read,Edit(src/*)').",
        check=_rules,
        metavar="RULES",
        supervisor="approvals",
        setting="approve",
    )
    approve_edits_in_tree: bool | None = option(
        "A file edit inside the run's working tree passes without asking.",
        supervisor="approvals",
    )
    approval_timeout: Annotated[float | None, Seconds] = option(
        "Seconds a request waits for a decision before it is denied (default 1800).",
        check=_seconds,
        limits=_SECONDS,
        supervisor="approvals",
        setting="approval_timeout",
    )

    def check_options(self) -> None:
        """Each option's own check; the first problem raised as a ``FieldProblem``."""
        check_fields(self, RunOptions)


@dataclass(init=False, repr=False, eq=False)  # made as a JobSpec
class JobOptions:
    """What a caller may choose for a job as a whole."""

    # Keyword-only: a class that embeds them keeps its own positional fields (a task).
    _: KW_ONLY

    concurrency: int | None = option(
        "Parallel runs at once (default 4, from config).",
        "job",
        check=_at_least_one,
        short="-j",
        limits=_COUNT,
        setting="concurrency",
    )
    # The job's budget: the most its runs may use together (each run's own is its step's).
    max_turns: Annotated[int | None, Budget] = option(
        "Budget of the whole job: model turns of all its runs.",
        "job",
        check=_budget("max_turns"),
        name="job_max_turns",
        limits=_COUNT,
    )
    max_tokens: Annotated[int | None, Budget] = option(
        "Budget of the whole job: tokens of all its runs.",
        "job",
        check=_budget("max_tokens"),
        name="job_max_tokens",
        limits=_COUNT,
    )
    max_cost: Annotated[float | None, Budget] = option(
        "Budget of the whole job: cost in USD of all its runs.",
        "job",
        check=_budget("max_cost"),
        name="job_max_cost",
        limits=_USD,
    )
    # A council (mode "council", docs/structured.md): the judge (backend[:model] or an
    # agent) that reads every answer, and how many members must answer (default 1).
    judge: str | None = option(
        "A council's judge (backend[:model] or an agent): reads every answer.",
        "job",
        check=_text,
        metavar="BACKEND[:MODEL]",
    )
    quorum: int | None = option(
        "A council completes when this many members answered (default 1).",
        "job",
        check=_at_least_one,
        limits=_COUNT,
    )
    # Where the job's runs execute (else from config): see docs/cluster.md.
    executor: Literal["local", "ray"] | None = option(
        "Where the runs execute: here, or on a Ray cluster (docs/cluster.md).",
        "job",
        check=_one_of("local", "ray"),
        setting="executor",
        not_on=(
            ("cli", "--launcher ray says it"),
            ("mcp", "the server's config chooses"),
            ("api", "a job document's"),
            ("pi", "the engine's config chooses"),
        ),
    )

    def check_options(self) -> None:
        check_fields(self, JobOptions)


# Where a settings option is not offered: the settings are the caller's own, not a job's.
_CALLERS = (
    ("mcp", "the server's config"),
    ("api", "prepare_job's keywords"),
    ("pi", "the engine's config"),
    ("plan", "a caller's, not a job's"),
)


@dataclass(init=False, repr=False, eq=False)  # never made: its fields are the definitions
class SettingsOptions:
    """What a caller may override of the settings for one job (config.toml's, else the
    defaults): the command line's, and ``api.prepare_job``'s keywords."""

    # Keyword-only: a class that embeds them keeps its own positional fields (a task).
    _: KW_ONLY

    tools: str | None = option(
        "Comma-separated tool allow-list, where the backend supports one.", "settings",
        not_on=_CALLERS,
    )  # fmt: skip
    launcher: Literal["process", "tmux", "ray"] | None = option(
        "How and where each run's supervisor starts: a detached process or a tmux window"
        " here, or on a Ray cluster (docs/cluster.md). Also --runner process|tmux,"
        " --executor local|ray.",
        "settings",
        not_on=_CALLERS,
    )
    ray_address: str | None = option(
        "The Ray cluster to use (default: config ray_address, else $RAY_ADDRESS).",
        "settings",
        setting="ray_address",
        not_on=_CALLERS,
    )
    ray_shared_cwd: bool | None = option(
        "On Ray: the working directory exists at the same path on every node (a shared"
        " filesystem). Without it a run's git repository is sent with --isolate worktree.",
        "settings",
        setting="ray_shared_cwd",
        not_on=_CALLERS,
    )
    agent_scope: Literal["user", "both"] | None = option(
        "'both' also uses project-local agents.",
        "settings",
        setting="agent_scope",
        not_on=_CALLERS,
    )


@dataclass(init=False, repr=False, eq=False)
class MapOptions:
    """A map's own options (``subagents map``, the MCP tool ``subagent_map``, the pi tool's
    ``map``; docs/map.md): which rows run and where their results go."""

    _: KW_ONLY

    key: str | None = option(
        "The field naming a row (default: its number).", "map", check=_text, metavar="FIELD"
    )
    where: dict[str, str] | None = option(
        "Run only rows whose fields have these values.", "map", check=_fields
    )
    limit: int | None = option(
        "Run only the first N rows (after where).", "map", check=_at_least_one, limits=_COUNT
    )
    retries: int | None = option(
        "Run a failed row again, up to N times (default 0).",
        "map",
        check=_at_least_zero,
        limits=(("minimum", 0),),
    )
    out: str | None = option(
        "Results file, appended as rows finish: .csv, else JSON lines.",
        "map",
        check=_text,
        metavar="FILE",
    )


# The options of a run or a job that a map takes, each with its flag on `subagents map`
# (a map's budget is the whole map's: the job's max_cost is the map's --max-cost). A map's
# rows are one-shot runs of one template: no per-run budget, no live control, no approvals.
MAP_TAKES: dict[str, str] = {
    "agent": "--agent",
    "backend": "--backend",
    "model": "--model",
    "timeout": "--timeout",
    "isolate": "--isolate",
    "output_schema": "--output-schema",
    "verify": "--verify",
    "verify_timeout": "--verify-timeout",
    "verify_attempts": "--verify-attempts",
    "review": "--review",
    "concurrency": "--concurrency",
    "job_max_cost": "--max-cost",
    "job_max_tokens": "--max-tokens",
}


def map_specs() -> "tuple[Spec, ...]":
    return specs(MapOptions)


def map_help(name: str) -> str:
    """A map option's help, as every face says it."""
    return next(s.meta.help for s in map_specs() if s.name == name)


def check_fields(obj: object, cls: type) -> None:
    """Run the check of each of ``cls``'s options that ``obj`` has set."""
    for f in fields(cls):
        value = getattr(obj, f.name)
        check = f.metadata["option"].check
        problem = None if value is None or check is None else check(value)
        if problem:
            raise FieldProblem(f.name, problem)


# ---- the options as the faces see them ---------------------------------------------------


@dataclass(repr=False, eq=False)
class Spec:
    """One option, resolved: its field, its type and every face's name for it."""

    field: str  # the field's name (a step's, a job's; a RunRequest's)
    name: str  # a document's and MCP's name for it: max_turns, job_max_turns
    type: Any  # the field's type, as written (Annotated kept)
    meta: Option

    @property
    def scope(self) -> Scope:
        return self.meta.scope

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def json(self) -> str:
        head, *rest = self.name.split("_")
        return head + "".join(part.title() for part in rest)

    def on(self, face: Face) -> bool:
        return face not in dict(self.meta.not_on)

    def base_type(self) -> Any:
        """The type without None and Annotated: ``int``, ``Literal[...]``, ``str | dict``."""
        return value_type(self.type)


def value_type(tp: Any) -> Any:
    """A field's type as a value of it has it: without Annotated's metadata and without
    None (``Annotated[float | None, Seconds]`` → ``float``; ``str | dict | None`` → ``str | dict``)."""
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    args = [a for a in get_args(tp) if a is not type(None)]
    if get_origin(tp) is Literal or len(args) == len(get_args(tp)):
        return tp
    return functools.reduce(operator.or_, args)


@cache
def specs(*classes: type) -> tuple[Spec, ...]:
    """The options of ``classes`` (default: all, step then job then settings), in order."""
    found: list[Spec] = []
    for cls in classes or (RunOptions, JobOptions, SettingsOptions):
        for f in fields(cls):
            meta = f.metadata.get("option")
            if isinstance(meta, Option):
                found.append(Spec(f.name, meta.name or f.name, f.type, meta))
    return tuple(found)


def step_specs() -> tuple[Spec, ...]:
    return specs(RunOptions)


def job_specs() -> tuple[Spec, ...]:
    return specs(JobOptions)


def field_default(f: Field[Any]) -> Any:
    """A dataclass field's default (None when it has none)."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


__all__ = [
    "FACES",
    "MAP_TAKES",
    "Face",
    "JobOptions",
    "MapOptions",
    "Option",
    "RunOptions",
    "Scope",
    "SettingsOptions",
    "Spec",
    "check_fields",
    "field_default",
    "job_specs",
    "map_help",
    "map_specs",
    "option",
    "specs",
    "step_specs",
]
