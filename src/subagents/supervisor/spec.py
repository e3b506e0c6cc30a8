"""RunSpec: everything a supervisor needs to own one run (stored as ``meta.json``)."""

from __future__ import annotations

# typing and dataclasses are not imported at run time: they slow the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import (
        ApprovalPolicy,
        CommandRecord,
        JsonObject,
        JsonValue,
        Limits,
        OnStall,
        ProcessIdentity,
        SchemaMode,
        WorktreeSpec,
    )


class RunSpec:
    """What a supervisor needs to own one run, as ``meta.json`` keeps it (every field, in
    this order). Made with keywords only, each one checked: a misspelled one is a TypeError
    (and mypy's error), never a field silently left at its default."""

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
    approvals: ApprovalPolicy | None

    def __init__(
        self,
        *,
        runId: str,
        backend: str,
        task: str,
        cwd: str,
        argv: list[str],
        jobId: str | None = None,
        agent: str | None = None,
        agentSource: str | None = None,
        requestedModel: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        grace: float = 0.25,
        killGrace: float = 2.0,
        depth: int = 1,
        createdAt: float = 0.0,
        echo: bool = False,
        # --isolate worktree: {repo, path, branch, base, subdir} (subagents/worktree.py); cwd
        # is inside path.
        worktree: WorktreeSpec | None = None,
        keepWorktree: bool = False,
        # The stall watchdog: seconds without an event while no tool call is in flight
        # (None: off), what to do then, and the bound on one tool call (None: none).
        stallTimeout: float | None = None,
        onStall: OnStall = "notice",
        toolTimeout: float | None = None,
        # The run this one continues (its child's own conversation resumed), and where the
        # child keeps its session (pi: a directory in the run dir) or which one it resumes.
        continuedFrom: str | None = None,
        sessionDir: str | None = None,
        stdinFile: str | None = None,
        # Processes the run is bound to (``--parent-pid``: the caller's, and a foreground
        # driver's), each ``{pid, createTime}``: when one ends, the run is aborted.
        watch: list[ProcessIdentity] | None = None,
        # Live control (docs/live-control.md): the child takes its task and messages on
        # stdin in its CLI's protocol; the kinds of message it cannot take, with why; its
        # budget (and the kinds bounded by what its job had left, with what the job had
        # used before it); the wrap-up message and the grace turns after it; the command
        # request (without the task) to build a continuation's argv from.
        live: bool = False,
        refuse: dict[str, str] | None = None,
        limits: Limits | None = None,
        jobLimits: dict[str, float] | None = None,
        graceTurns: int = 2,
        wrapUp: str = "stop here and give your final answer now",
        command: CommandRecord | None = None,
        # --output-schema (docs/structured.md): the schema the answer must satisfy (as the
        # CLI took it: codex's made strict), its hash (of the schema as given), whether the
        # CLI checks it itself ("own": claude, codex) or the task carries it with an
        # instruction (``taskSuffix``, after the task) and the supervisor asks one repair
        # turn ("instructed").
        outputSchema: JsonObject | None = None,
        schemaHash: str | None = None,
        schemaMode: SchemaMode | None = None,
        taskSuffix: str | None = None,
        # --approvals (docs/approvals.md): the child's requests wait in the run's inbox, pass
        # by a rule, or are denied (None: auto, its CLI's headless mode decides).
        approvals: ApprovalPolicy | None = None,
    ) -> None:
        given = dict(locals())
        del given["self"]
        self.__dict__.update(given)
        if env is None:
            self.env = {}
        if watch is None:
            self.watch = []

    def to_dict(self) -> JsonObject:
        return {k: getattr(self, k) for k in FIELDS}

    @classmethod
    def from_dict(cls, data: JsonValue) -> RunSpec:
        """The spec ``meta.json`` holds (TypeError when it holds no run's spec). A key this
        version does not know (a newer one wrote it) is passed over."""
        if not isinstance(data, dict):
            raise TypeError("meta.json is not a JSON object")
        if "version" not in data:
            # Written before records had a version: read as today's. (A supervisor reads
            # the meta.json its caller has just written, of today's version: its start
            # imports nothing more. A later version adds its step here and in core.upgrade.)
            from subagents.core.upgrade import upgrade_meta

            upgrade_meta(data)
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise TypeError(f"RunSpec lacks {', '.join(missing)}")
        # The file's version is not the spec's: left out below.
        return cls(**{k: v for k, v in data.items() if k in FIELDS})  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"RunSpec({self.to_dict()!r})"


_init = RunSpec.__init__
# Every field, in the signature's order (meta.json's): the required ones, then the rest.
FIELDS: tuple[str, ...] = _init.__code__.co_varnames[1 : 1 + _init.__code__.co_kwonlyargcount]
REQUIRED = tuple(k for k in FIELDS if k not in (_init.__kwdefaults__ or {}))
