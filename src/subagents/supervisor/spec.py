"""RunSpec: everything a supervisor needs to own one run (stored as ``meta.json``)."""

from __future__ import annotations

# typing and dataclasses are not imported at run time: they slow the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import (
        CommandRecord,
        JsonObject,
        JsonValue,
        Limits,
        OnStall,
        ProcessIdentity,
        SchemaMode,
        WorktreeSpec,
    )

_DEFAULTS: JsonObject = {
    "jobId": None,
    "agent": None,
    "agentSource": None,
    "requestedModel": None,
    "env": None,
    "timeout": None,
    "grace": 0.25,
    "killGrace": 2.0,
    "depth": 1,
    "createdAt": 0.0,
    "echo": False,
    # --isolate worktree: {repo, path, branch, base, subdir} (subagents/worktree.py); cwd is inside path.
    "worktree": None,
    "keepWorktree": False,
    # The stall watchdog: seconds without an event while no tool call is in flight (None: off),
    # what to do then ("notice" | "abort"), and the bound on one tool call (None: none).
    "stallTimeout": None,
    "onStall": "notice",
    "toolTimeout": None,
    # The run this one continues (its child's own conversation resumed), and where the child
    # keeps its session (pi: a directory in the run dir) or which one it resumes.
    "continuedFrom": None,
    "sessionDir": None,
    "stdinFile": None,
    # Processes the run is bound to (``--parent-pid``: the caller's, and a foreground
    # driver's), each ``{pid, createTime}``: when one ends, the run is aborted.
    "watch": None,
    # Live control (docs/live-control.md): the child takes its task and messages on stdin
    # in its CLI's protocol; the kinds of message it cannot take, with why; its budget (and
    # the kinds bounded by what its job had left, with what the job had used before it);
    # the wrap-up message and the grace turns after it; the command request (without the
    # task) to build a continuation's argv from.
    "live": False,
    "refuse": None,
    "limits": None,
    "jobLimits": None,
    "graceTurns": 2,
    "wrapUp": "stop here and give your final answer now",
    "command": None,
    # --output-schema (docs/structured.md): the schema the answer must satisfy (as the CLI
    # took it: codex's made strict), its hash (of the schema as given), whether the CLI
    # checks it itself ("own": claude, codex) or the task carries it with an instruction
    # (``taskSuffix``, after the task) and the supervisor asks one repair turn
    # ("instructed").
    "outputSchema": None,
    "schemaHash": None,
    "schemaMode": None,
    "taskSuffix": None,
}
_REQUIRED = ("runId", "backend", "task", "cwd", "argv")


class RunSpec:
    runId: str
    backend: str
    task: str
    cwd: str
    argv: list[str]
    jobId: str | None
    agent: str | None
    agentSource: str | None
    requestedModel: str | None
    # Environment added to the supervisor's own for the child (never a whole environment).
    env: dict[str, str]
    timeout: float | None
    grace: float
    killGrace: float
    depth: int
    createdAt: float
    # Print progress lines on the supervisor's stdout (the tmux runner's window).
    echo: bool
    worktree: WorktreeSpec | None
    keepWorktree: bool
    stallTimeout: float | None
    onStall: OnStall
    toolTimeout: float | None
    continuedFrom: str | None
    sessionDir: str | None
    # A file the child reads as its stdin (a task too big for argv); else /dev/null.
    stdinFile: str | None
    watch: list[ProcessIdentity]
    live: bool
    refuse: dict[str, str] | None
    limits: Limits | None
    jobLimits: dict[str, float] | None
    graceTurns: int
    wrapUp: str
    command: CommandRecord | None
    outputSchema: JsonObject | None
    schemaHash: str | None
    schemaMode: SchemaMode | None
    taskSuffix: str | None

    def __init__(self, **fields: object) -> None:
        missing = [k for k in _REQUIRED if k not in fields]
        if missing:
            raise TypeError(f"RunSpec lacks {', '.join(missing)}")
        for key, default in _DEFAULTS.items():
            setattr(self, key, fields.get(key, default))
        for key in _REQUIRED:
            setattr(self, key, fields[key])
        if self.env is None:
            self.env = {}
        if self.watch is None:
            self.watch = []

    def to_dict(self) -> JsonObject:
        return {k: getattr(self, k) for k in (*_REQUIRED, *_DEFAULTS)}

    @classmethod
    def from_dict(cls, data: JsonValue) -> RunSpec:
        """The spec ``meta.json`` holds (TypeError when it holds no run's spec)."""
        if not isinstance(data, dict):
            raise TypeError("meta.json is not a JSON object")
        if "version" not in data:
            # Written before records had a version: read as today's. (A supervisor reads
            # the meta.json its caller has just written, of today's version: its start
            # imports nothing more. A later version adds its step here and in core.upgrade.)
            from subagents.core.upgrade import upgrade_meta

            upgrade_meta(data)
        # The file's version is not the spec's: left out below.
        return cls(**{k: v for k, v in data.items() if k in _DEFAULTS or k in _REQUIRED})

    def __repr__(self) -> str:
        return f"RunSpec({self.to_dict()!r})"
