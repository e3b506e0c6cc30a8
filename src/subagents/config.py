"""Settings: defaults < user config file < project config file < ``SUBAGENTS_*`` environment.

The user file is ``<user config dir>/config.toml`` (``~/.config/subagents/config.toml`` on
Linux; ``$SUBAGENTS_CONFIG_DIR`` overrides the directory). The project file is
``.subagents/config.toml`` in the working directory or its nearest ancestor that has one.

A project file comes from the repository being worked on, so it may not set what would let a
repository run code or trust itself: ``bins``, ``hooks``, ``acp``, ``agent_scope``, ``verify``
and ``parent_may_approve`` are accepted only from the user file and the environment. Nor may
it loosen the approval policy (docs/approvals.md): its ``approvals`` must be at least as
strict as the user file's (``auto`` < ``parent`` < ``ask`` < ``deny``), and its ``approve``
rules are taken only where the user file's policy is ``auto`` (anything is stricter then).

Every problem raises :class:`ConfigError` with one line naming the file (or the environment
variable) and the field.

The supervisor does not import this module; it may use pydantic.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Union,
    get_args,
    get_origin,
)

from subagents.core import paths
from subagents.core.inputs import (
    BUDGET_FIELDS,
    UNKNOWN_KEY,
    check_at_least,
    check_budget,
    check_choice,
    first_problem,
    seconds_problem,
    text_problem,
    timeout_problem,
)
from subagents.errors import ConfigError, FieldProblem

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

    from subagents.types import JsonObject

APP_NAME = "subagents"
CONFIG_FILE = "config.toml"
PROJECT_DIR = ".subagents"

# Settings a project file may not set (see the module docstring).
PROJECT_FORBIDDEN = frozenset(
    {
        "bins",
        "hooks",
        "acp",
        "agent_scope",
        "mcp_token",
        "web_token",
        "verify",
        "parent_may_approve",
    }
)
# The longest grace and kill grace, seconds.
MAX_GRACE = 3600.0


# Settings are plain dataclasses whose ``__post_init__`` holds every check of meaning; a
# layer read from a file or the environment is first checked for types and unknown keys by
# pydantic (``_check``). With nothing configured, pydantic is never imported.


@dataclass
class Hook:
    """A command run on lifecycle events (``on``: e.g. ``["complete", "error"]``)."""

    # pydantic reads this when checking a file or the environment against the class.
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    on: list[str]
    command: list[str]
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.command:
            raise FieldProblem("command", "must name a program: a list of at least one word")
        problem = timeout_problem(self.timeout)
        if problem:
            raise FieldProblem("timeout", problem)


@dataclass
class AcpPreset:
    """An ACP agent named in config (``[acp.NAME]``): ``subagents run --backend acp:NAME``
    runs ``command`` (a list of words, no shell) with ``env`` added (docs/backends.md)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.command or not all(isinstance(w, str) and w for w in self.command):
            raise FieldProblem("command", "must name a program: a list of at least one word")


@dataclass(frozen=True)
class Settings:
    """Effective settings. Times are in seconds. Frozen: a job's plan holds them, shared by
    its runs' threads; an override is a new one (``dataclasses.replace``, checked again)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    default_backend: str = "pi"
    default_agent: str | None = None
    runner: Literal["process", "tmux"] = "process"
    # Where runs execute: here, or on a Ray cluster (pip install 'subagents[ray]').
    executor: Literal["local", "ray"] = "local"
    # The Ray cluster's address; unset: $RAY_ADDRESS, else a local `ray start` cluster.
    ray_address: str | None = None
    # On Ray: the runs' working directories exist at the same paths on every node (a shared
    # filesystem). Off: only a git repository reaches a node, sent with --isolate worktree.
    ray_shared_cwd: bool = False
    concurrency: int = 4
    max_parallel_tasks: int = 8
    max_spawns_per_job: int = 32
    # None: no timeout. TOML has no null, so ``timeout = 0`` also means none.
    timeout: float | None = None
    # Bounded: an endless grace would be a wait nothing ends.
    grace: float = 0.25
    kill_grace: float = 2.0
    max_depth: int = 2
    agent_scope: Literal["user", "both"] = "user"
    bins: dict[str, str] = field(default_factory=dict)
    hooks: list[Hook] = field(default_factory=list)
    notify_desktop: bool = False
    # The bearer token `subagents mcp --http` requires (generated and printed when unset).
    mcp_token: str | None = None
    # The token `subagents web` requires (generated and printed when unset).
    web_token: str | None = None
    # The stall watchdog: seconds without an event while no tool call runs (0: off), what
    # to do then, and the bound on a single tool call (0: none).
    stall_timeout: float | None = 300.0
    on_stall: Literal["notice", "abort"] = "notice"
    tool_timeout: float | None = None
    # Keep an isolated run's worktree directory when it changed something (not only its branch).
    keep_worktree: bool = False
    # A pi child using the github-copilot provider marks its model requests
    # `X-Initiator: agent` (docs/pi.md).
    copilot_agent_initiator: bool = False
    # Every run's budget, unless its step or agent sets its own (docs/live-control.md): the
    # most model turns, tokens and cost (USD) it may use; unset: unbounded.
    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    # At a budget's limit a child that takes messages is sent this, then given this many
    # more turns to answer before it is stopped.
    wrap_up_text: str = "stop here and give your final answer now"
    wrap_up_grace: int = 2
    # Every run's output schema unless it has its own (docs/structured.md): a file or inline
    # JSON, read and checked when a job is planned.
    output_schema: str | None = None
    # ACP agents of the user's own, by name (``--backend acp:NAME``), beside the built-in
    # presets; and how long an ACP agent has to answer ``initialize``.
    acp: dict[str, AcpPreset] = field(default_factory=dict)
    acp_init_timeout: float = 60.0
    # Every run's acceptance gate unless its step or agent sets one (docs/gates.md): the
    # command (user file or environment only: it is run), the reviewer, and their timeout
    # and checks (unset: the gate's defaults, 600 s and 2).
    verify: str | None = None
    review: str | None = None
    verify_timeout: float | None = None
    verify_attempts: int | None = None
    # Every run's approval policy unless its step or agent sets one, and, under ``parent``,
    # what the parent may allow (docs/approvals.md; a project file: the module docstring).
    approvals: Literal["auto", "ask", "deny", "parent"] | None = None
    approve: str | None = None
    approval_timeout: float | None = None
    parent_may_approve: str | None = None

    def __post_init__(self) -> None:
        # A job's record keeps presets as plain objects (settings_record).
        _set(
            self,
            "acp",
            {k: AcpPreset(**v) if isinstance(v, dict) else v for k, v in self.acp.items()},
        )
        problem = seconds_problem(self.acp_init_timeout, off=False)
        if problem:
            raise FieldProblem("acp_init_timeout", problem)
        self._check_gate()
        self._check_approvals()
        if not self.default_backend:
            raise FieldProblem("default_backend", "must not be empty")
        _set(self, "default_agent", self.default_agent or None)
        check_choice("runner", self.runner, ("process", "tmux"))
        check_choice("executor", self.executor, ("local", "ray"))
        check_choice("agent_scope", self.agent_scope, ("user", "both"))
        check_choice("on_stall", self.on_stall, ("notice", "abort"))
        for name in ("concurrency", "max_parallel_tasks", "max_spawns_per_job"):
            check_at_least(name, getattr(self, name), 1)
        check_at_least("max_depth", self.max_depth, 0)
        for name in ("grace", "kill_grace"):
            value = getattr(self, name)
            check_at_least(name, value, 0, " seconds")
            if value > MAX_GRACE:
                raise FieldProblem(name, f"must be at most {MAX_GRACE:g} seconds, not {value!r}")
        for name in ("timeout", "stall_timeout", "tool_timeout"):
            value = getattr(self, name)
            problem = None if value is None else seconds_problem(value, off=True)
            if problem:
                raise FieldProblem(name, problem)
            if value == 0:
                _set(self, name, None)
        for name in BUDGET_FIELDS:
            check_budget(name, getattr(self, name))
        check_at_least("wrap_up_grace", self.wrap_up_grace, 0, " turns")
        problem = text_problem(self.wrap_up_text) or (
            None if self.wrap_up_text.strip() else "must not be empty"
        )
        if problem:
            raise FieldProblem("wrap_up_text", problem)

    def _check_gate(self) -> None:
        for name in ("verify", "review"):
            value = getattr(self, name)
            problem = None if value is None else text_problem(value)
            if problem or (value is not None and not value.strip()):
                raise FieldProblem(name, problem or "must not be empty")
        if self.verify is not None:  # its words as the gate will split them (no shell)
            import shlex

            try:
                shlex.split(self.verify)
            except ValueError as exc:
                raise FieldProblem("verify", f"cannot split the command: {exc}") from None
        if self.verify_timeout is not None:
            problem = seconds_problem(self.verify_timeout, off=False)
            if problem:
                raise FieldProblem("verify_timeout", problem)
        if self.verify_attempts is not None:
            check_at_least("verify_attempts", self.verify_attempts, 1)

    def _check_approvals(self) -> None:
        if self.approvals is not None:
            check_choice("approvals", self.approvals, ("auto", "parent", "ask", "deny"))
        for name in ("approve", "parent_may_approve"):
            value = getattr(self, name)
            if value is None:
                continue
            from subagents.core.approve import rules_problem  # (only where rules are set)

            problem = text_problem(value) or rules_problem(value)
            if problem:
                raise FieldProblem(name, problem)
        if self.approval_timeout is not None:
            problem = seconds_problem(self.approval_timeout, off=False)
            if problem:
                raise FieldProblem("approval_timeout", problem)


# Normalizing a frozen instance in its own __post_init__.
_set = object.__setattr__


def setting_names() -> list[str]:
    return list(_FIELDS)


_BIN_RE = re.compile(r"^SUBAGENTS_([A-Z0-9_]+)_BIN$")
_NONE_WORDS = frozenset({"none", "null", "off"})


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$HOME`` from *env* (so tests can use a temp home), else the user's home."""
    home = _env(env).get("HOME")
    return Path(home) if home else Path.home()


def _expand(value: str, env: Mapping[str, str] | None) -> Path:
    if value == "~" or value.startswith("~/"):
        return home_dir(env) / value[2:]
    return Path(value)


def _xdg(env: Mapping[str, str] | None, var: str, fallback: str) -> Path | None:
    """The XDG location of this app on Linux-like systems, honouring *env*; else None."""
    if sys.platform in ("win32", "darwin"):
        return None
    base = _env(env).get(var, "").strip()
    root = Path(base) if base and os.path.isabs(base) else home_dir(env) / fallback
    return root / APP_NAME


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$SUBAGENTS_CONFIG_DIR``, else the platform's user config dir for subagents."""
    override = _env(env).get("SUBAGENTS_CONFIG_DIR")
    if override:
        return _expand(override, env)
    xdg = _xdg(env, "XDG_CONFIG_HOME", ".config")
    if xdg is not None:
        return xdg
    import platformdirs  # only off Linux-like systems: ~2 ms to import

    return Path(platformdirs.user_config_dir(APP_NAME))


def state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$SUBAGENTS_HOME``, else the platform's user state dir (``~/.local/state/subagents``).

    One implementation, shared with the supervisor: :func:`subagents.core.paths.state_home`.
    """
    return paths.state_home(env)


def user_config_file(env: Mapping[str, str] | None = None) -> Path:
    return user_config_dir(env) / CONFIG_FILE


def find_project_config(cwd: Path) -> Path | None:
    """``.subagents/config.toml`` in *cwd* or its nearest ancestor that has one."""
    start = cwd.resolve()
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_DIR / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _label(loc: list[str], field_names: Mapping[str, str]) -> str:
    """The name the user wrote for the setting at ``loc`` (an env variable), else its path."""
    if loc and loc[0] in field_names:
        if loc[0] == "bins" and len(loc) > 1:
            return f"SUBAGENTS_{loc[1].upper()}_BIN"
        return field_names[loc[0]]
    return ".".join(loc) or "(top level)"


def _describe(error: ValidationError, where: str, field_names: Mapping[str, str]) -> str:
    """One line for the first problem pydantic found, e.g.
    ``/x/config.toml: concurrency: Input should ...``."""
    errors = error.errors()
    loc, message, first = first_problem(errors)
    if first["type"] in UNKNOWN_KEY:
        if len(loc) == 1:
            message = "unknown setting (known: " + ", ".join(setting_names()) + ")"
        else:
            message = "unknown key"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return _one_line(f"{where}: {_label(loc, field_names)}: {message}{more}")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(_one_line(f"{path}: cannot read: {exc.strerror or exc}")) from None


def _read_toml(path: Path, data: bytes) -> dict[str, Any]:
    import tomllib  # only when a config file exists

    try:
        return tomllib.loads(data.decode())
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        if "end of document" in message:  # name the line there too
            lines = data.count(b"\n") + 1
            message = message.replace("end of document", f"end of document, line {lines}")
        raise ConfigError(_one_line(f"{path}: invalid TOML: {message}")) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(_one_line(f"{path}: not valid UTF-8: {exc}")) from None


@cache
def _adapter() -> TypeAdapter[Settings]:
    from pydantic import TypeAdapter

    return TypeAdapter(Settings)


def _check(
    layer: Mapping[str, Any],
    where: str,
    field_names: Mapping[str, str] | None = None,
    *,
    typed: bool = False,
) -> dict[str, Any]:
    """The layer's values, of their settings' types, checked alone (so a problem names
    the file or variable it came from). ``typed``: the values are of their settings' types
    already (the environment's, made so by ``_from_text``), and pydantic is not needed.
    Otherwise (a TOML file) no value is converted, TOML having types: pydantic is strict for
    a dataclass only on JSON input, and TOML's types are JSON's (a date, which JSON lacks,
    goes as its text: a text setting takes it, no other does)."""
    names = field_names or {}
    try:
        if typed:
            checked = Settings(**layer)
        else:
            from pydantic import ValidationError

            try:
                document = json.dumps(layer, default=str)
                checked = _adapter().validate_json(document, strict=True)
            except ValidationError as exc:
                raise ConfigError(_describe(exc, where, names)) from None
    except FieldProblem as exc:
        loc = exc.where.split(".")
        raise ConfigError(_one_line(f"{where}: {_label(loc, names)}: {exc.problem}")) from None
    return {key: getattr(checked, key) for key in layer}


def _file_layer(path: Path, *, project: bool, env: Mapping[str, str] | None) -> dict[str, Any]:
    from subagents.core.checked import CheckedFile

    data = _read_bytes(path)
    # Checked before, these very bytes by this code: pydantic is not needed.
    kept = CheckedFile(path, data, "project" if project else "user", __file__, env)
    with contextlib.suppress(FieldProblem, KeyError, TypeError, AttributeError):
        if (value := kept.get()) is not None:
            return _restored(value)
    layer = _read_toml(path, data)
    if project:
        forbidden = sorted(PROJECT_FORBIDDEN & layer.keys())
        if forbidden:
            raise ConfigError(
                f"{path}: {forbidden[0]}: not allowed in a project config (it comes from the "
                f"repository); set it in {user_config_file(env)} or the environment"
            )
    # TOML has types: "4" or true is not a concurrency there (the environment has only strings).
    checked = _check(layer, str(path))
    plain = _plain(checked)
    if _restored(json.loads(json.dumps(plain))) == checked:  # else JSON would change it
        kept.keep(plain)
    return checked


def _restored(layer: Mapping[str, Any]) -> dict[str, Any]:
    """A checked layer as ``_plain`` wrote it, with its hooks and ACP presets again."""
    restored = dict(layer)
    if "hooks" in restored:
        restored["hooks"] = [Hook(**h) for h in restored["hooks"]]
    if "acp" in restored:
        restored["acp"] = {k: AcpPreset(**p) for k, p in restored["acp"].items()}
    return restored


def _check_environment(env: Mapping[str, str]) -> None:
    """The ``SUBAGENTS_*`` variables that are not settings but are read as they are."""
    for var, raw in env.items():
        if var.startswith("SUBAGENTS_"):
            problem = text_problem(raw)
            if problem:
                raise ConfigError(f"environment: {var}: {problem}")
    depth = env.get("SUBAGENTS_DEPTH", "").strip()
    if depth and not (depth.isascii() and depth.isdigit()):
        raise ConfigError(
            f"environment: SUBAGENTS_DEPTH: must be a whole number of levels (0 or more), not {depth!r}"
        )


_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})


_FIELDS = {f.name: f for f in fields(Settings)}
# Settings the environment cannot set as one variable each: ``bins`` is one variable per
# backend (``SUBAGENTS_<BACKEND>_BIN``), ``hooks`` are set in a config file only.
_NOT_FROM_ENV = frozenset({"bins", "hooks", "acp"})
# Environment variable -> setting: ``SUBAGENTS_<NAME>`` for every other setting.
ENV_SETTINGS: dict[str, str] = {
    f"SUBAGENTS_{name.upper()}": name for name in _FIELDS if name not in _NOT_FROM_ENV
}


@cache
def _type_of(setting: str) -> Any:
    """A setting's type, from its annotation's text (``from __future__ import annotations``),
    one at a time: all at once (``get_type_hints``) cost a run ~4 ms for one variable."""
    return eval(Settings.__annotations__[setting], globals())  # our own annotation's text


def _from_text(setting: str, text: str) -> Any:
    """An environment variable's text as the value of ``setting``, converted by the type
    the dataclass declares for it (the environment has only text; pydantic would do this
    too, but it costs ~170 ms to start, most of a run's start, for a few scalars). Raises
    FieldProblem; ranges are checked by ``Settings`` itself."""
    return _convert(setting, _type_of(setting), text)


def _convert(setting: str, kind: Any, text: str) -> Any:
    if get_origin(kind) in (Union, UnionType):  # X | None: the one type, or none
        choices = [a for a in get_args(kind) if a is not type(None)]
        if len(choices) != 1:
            raise TypeError(f"setting {setting}: no conversion from text to {kind}")
        if type(None) in get_args(kind) and text.lower() in _NONE_WORDS:
            return None
        kind = choices[0]
    if get_origin(kind) is Literal:
        check_choice(setting, text, tuple(str(c) for c in get_args(kind)))
        return text
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise FieldProblem(setting, f"must be true or false, not {text!r}")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise FieldProblem(setting, f"must be {what}, not {text!r}") from None
    if kind is str:
        return text
    # A setting of a type the environment cannot give: found by the tests, not by a user.
    raise TypeError(f"setting {setting}: no conversion from text to {kind}")


def _env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    _check_environment(env)
    layer: dict[str, Any] = {}
    names: dict[str, str] = {}
    for var, setting in ENV_SETTINGS.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue  # an empty variable counts as unset
        names[setting] = var
        try:
            layer[setting] = _from_text(setting, raw.strip())
        except FieldProblem as exc:
            raise ConfigError(f"environment: {var}: {exc.problem}") from None
    bins: dict[str, str] = {}
    for var, raw in env.items():
        match = _BIN_RE.match(var)
        if match and raw.strip():
            bins[match.group(1).lower()] = raw.strip()
    if bins:
        layer["bins"] = bins
        names["bins"] = "SUBAGENTS_<BACKEND>_BIN"
    # Values of their settings' types by now (bins: text, checked above).
    return _check(layer, "environment", names, typed=True)


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if key == "bins" and isinstance(value, Mapping):
            base["bins"] = {**base.get("bins", {}), **value}
        elif key == "hooks" and isinstance(value, list):
            base["hooks"] = [*base.get("hooks", []), *value]
        else:
            base[key] = value


def _no_looser(project: Mapping[str, Any], users: str, path: Path, user_file: Path) -> None:
    if "approvals" in project or "approve" in project:
        from subagents.core.approve import project_loosens

        found = project_loosens(project.get("approvals"), project.get("approve"), users)
        if found is not None:
            raise ConfigError(f"{path}: {found[0]}: {found[1]} (the user's: {user_file})")


def load_settings(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Effective settings for work in *cwd*, merged lowest first:
    defaults < user file < project file < ``SUBAGENTS_*`` environment.

    ``bins`` merge per backend; ``hooks`` from every layer add up; anything else a later
    layer sets replaces the earlier value. Raises :class:`ConfigError`.
    """
    environ = _env(env)
    merged: dict[str, Any] = {}
    user_file = user_config_file(environ)
    if user_file.is_file():
        _merge(merged, _file_layer(user_file, project=False, env=environ))
    project_file = find_project_config(cwd if cwd is not None else paths.working_dir())
    if project_file is not None and project_file.resolve() != user_file.resolve():
        project = _file_layer(project_file, project=True, env=environ)
        _no_looser(project, merged.get("approvals") or "auto", project_file, user_file)
        _merge(merged, project)
    _merge(merged, _env_layer(environ))
    if merged.get("approve") is not None and merged.get("approvals") in (None, "auto"):
        raise ConfigError(
            "settings: approve: rules narrow approvals ask, parent or deny:"
            " set approvals too (the policy is auto)"
        )
    try:
        return Settings(**merged)
    except FieldProblem as exc:  # pragma: no cover - each layer was checked alone
        raise ConfigError(f"settings: {exc}") from None


# What a job's record (job.json: ``plan.limits``) leaves out of its settings: secrets, and
# commands (hooks are read again from the config where they fire).
_NOT_RECORDED = frozenset({"mcp_token", "web_token", "hooks"})


def settings_record(settings: Settings) -> JsonObject:
    """The settings a job was planned with, as its ``job.json`` keeps them (each a JSON
    value: text, a number, a flag, none, or ``bins``' object of text)."""
    return {
        name: _plain(value)
        for name in _FIELDS
        if name not in _NOT_RECORDED
        for value in (getattr(settings, name),)
    }


def _plain(value: object) -> Any:
    if isinstance(value, AcpPreset):
        return {"command": list(value.command), "env": dict(value.env)}
    if isinstance(value, Hook):
        return {"on": list(value.on), "command": list(value.command), "timeout": value.timeout}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def settings_from_record(record: JsonObject) -> Settings:
    """The settings a job's record keeps (one written by any version: a setting it lacks
    has its default, one this version does not know is left out)."""
    # The record's values, as settings_record wrote them, are given to the dataclass, whose
    # checks of meaning (__post_init__) they pass again.
    known: dict[str, Any] = {
        k: v for k, v in record.items() if k in _FIELDS and k not in _NOT_RECORDED
    }
    return Settings(**known)
