"""The records subagents writes and reads, as types: canonical events, ``result.json``, the
job result, ``job.json``, the session log's entries, and the words their fields take.

These are the shapes of plain dicts (``TypedDict``): what is on disk and what the API hands
back are the same JSON objects, and a type checker knows their keys. Public: a caller of
``subagents.run`` annotates with them (``from subagents.types import RunResult``).

The supervisor imports this module only under ``TYPE_CHECKING`` (``typing`` costs its
start). Where a record is read back from disk, :mod:`subagents.core.records` checks it once
and says which one it is.
"""

# No ``from __future__ import annotations``: the annotations are evaluated, so that
# ``__required_keys__`` and ``get_type_hints`` (and pydantic) see NotRequired at run time.
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, final

__all__ = [
    "AgentEvent",
    "AssistantText",
    "CostRow",
    "CostTotals",
    "ErrorEvent",
    "Event",
    "EventType",
    "Executor",
    "ExecutorPlace",
    "HookRecord",
    "JobMode",
    "JobResult",
    "JobRow",
    "JobRun",
    "JobState",
    "JobStatus",
    "JobUpdate",
    "JsonObject",
    "JsonValue",
    "KeyedCostRow",
    "LifecycleEventType",
    "LifecycleStatus",
    "LimitAction",
    "LimitEvent",
    "LimitKind",
    "LimitRecord",
    "LimitScope",
    "Limits",
    "MessageCounts",
    "MessageMode",
    "Notice",
    "NoticeLevel",
    "OnStall",
    "ProcessIdentity",
    "Receipt",
    "ReceiptWord",
    "RunFinished",
    "RunNotStarted",
    "RunPaths",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "Runner",
    "SchemaMode",
    "StopReason",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Usage",
    "UsageEvent",
    "UserMessage",
    "WorktreeRecord",
    "WorktreeSpec",
]

# ---- words ----------------------------------------------------------------------------

# How a run ended (result.json's ``status``; the CLI's exit code follows from it).
# A JSON value as parsed (an output schema, a structured answer).
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
# A JSON object.
JsonObject: TypeAlias = dict[str, JsonValue]
# How a run's output schema is held to: by the CLI's own flag, or the task's instruction
# and one repair turn (docs/structured.md).
SchemaMode: TypeAlias = Literal["own", "instructed"]
RunStatus: TypeAlias = Literal["completed", "failed", "aborted", "timeout"]
# A job's status in job.json: waiting for its driver, running, then how it ended.
JobStatus: TypeAlias = Literal["pending", "running", "completed", "failed", "aborted", "timeout"]
JobMode: TypeAlias = Literal["single", "parallel", "chain", "council"]
# The canonical stop reasons. A stop reason a CLI spells in a way not mapped is kept as it
# came, so a record's ``stopReason`` is a ``str``; these are the ones that mean something.
StopReason: TypeAlias = Literal["stop", "length", "toolUse", "aborted", "error"]
# The session log's kinds of entry, and the status an end entry records (a timeout is
# recorded as ``failed``).
LifecycleEventType: TypeAlias = Literal[
    "subagent:start", "subagent:complete", "subagent:error", "subagent:aborted"
]
LifecycleStatus: TypeAlias = Literal["completed", "failed", "aborted"]
# How a supervisor is started, and where it runs.
Runner: TypeAlias = Literal["process", "tmux"]
Executor: TypeAlias = Literal["local", "ray"]
# What the stall watchdog does when a run goes quiet.
OnStall: TypeAlias = Literal["notice", "abort"]
NoticeLevel: TypeAlias = Literal["info", "warn", "error"]
EventType: TypeAlias = Literal[
    "run_started",
    "assistant_text",
    "thinking",
    "tool_call",
    "tool_result",
    "usage",
    "notice",
    "error",
    "run_finished",
    "user_message",
    "limit",
]
# A message sent to a running child (``subagents send``): a steer lands in the running
# conversation, a follow-up when the child would otherwise end; a wrap-up is the one a
# budget sends at its limit; a repair is the one turn that quotes why an answer did not
# satisfy the run's output schema (docs/structured.md).
MessageMode: TypeAlias = Literal["steer", "follow-up", "wrap-up", "repair"]
# What became of a message: the CLI (or the supervisor) holds it to deliver, it is in the
# conversation, or it was not taken (the reason says why).
ReceiptWord: TypeAlias = Literal["queued", "delivered", "refused"]
# What a budget bounds: model turns, tokens (totalTokens), cost (USD).
LimitKind: TypeAlias = Literal["turns", "tokens", "cost"]
# What a budget did at its limit (see LimitRecord), and whose budget it was.
LimitAction: TypeAlias = Literal["wrap-up", "abort", "stop"]
LimitScope: TypeAlias = Literal["run", "job"]


class Usage(TypedDict):
    """Tokens and cost. ``input`` counts tokens not read from cache; ``cost`` is USD, or
    None when the CLI reports none (never a guess)."""

    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: float | None


# ---- canonical events (events.jsonl) -----------------------------------------------------


class _Stamped(TypedDict, total=False):
    # Stamped by the supervisor as it records an event: every line of events.jsonl has
    # them; an event a normalizer has just made does not yet.
    seq: int
    ts: float


class RunStarted(_Stamped):
    type: Literal["run_started"]
    backend: str
    agent: str | None
    model: str | None
    cwd: str
    pid: int


class AssistantText(_Stamped):
    type: Literal["assistant_text"]
    text: str
    stopReason: str | None  # canonical (StopReason) when known, else as the CLI said it
    rawStopReason: str | None
    model: str | None
    usage: NotRequired[Usage]


class Thinking(_Stamped):
    type: Literal["thinking"]
    text: str


class ToolCall(_Stamped):
    type: Literal["tool_call"]
    toolCallId: str
    toolName: str
    args: Any  # the tool's arguments as the CLI gave them (any JSON value)


class ToolResult(_Stamped):
    type: Literal["tool_result"]
    toolCallId: str
    toolName: str
    isError: bool
    text: str  # bounded (events.TOOL_RESULT_TEXT_LIMIT)
    truncated: bool


class UsageEvent(Usage, _Stamped):
    """Running totals of the run so far (``turns``: model turns so far, added by the
    supervisor; absent from events written before budgets)."""

    type: Literal["usage"]
    turns: NotRequired[int]


class Notice(_Stamped):
    type: Literal["notice"]
    level: NoticeLevel
    message: str
    # The stall watchdog's notice: no event since ``since`` (epoch seconds).
    stalled: NotRequired[bool]
    since: NotRequired[float]


class ErrorEvent(_Stamped):
    type: Literal["error"]
    message: str
    fatal: bool


class RunFinished(_Stamped):
    type: Literal["run_finished"]
    status: RunStatus
    exitCode: int | None
    signal: str | None
    durationMs: int


class UserMessage(_Stamped):
    """A message sent to the running child, and later what became of it: one event when it
    is sent (``queued`` or ``refused``), another with the same ``id`` when the child takes
    it (``delivered``) or it could not be (``refused``). ``text`` is bounded like a tool
    result's; ``reason`` says why a message was refused or is held."""

    type: Literal["user_message"]
    id: str
    mode: MessageMode
    text: str
    receipt: ReceiptWord
    reason: NotRequired[str]


class LimitEvent(_Stamped):
    """A budget reached its limit and acted (``action``: wrap-up, abort or stop)."""

    type: Literal["limit"]
    kind: LimitKind
    limit: float
    used: float
    action: LimitAction
    scope: LimitScope


# A canonical event: ``event["type"] == "tool_call"`` narrows it to a ToolCall.
Event: TypeAlias = (
    RunStarted
    | AssistantText
    | Thinking
    | ToolCall
    | ToolResult
    | UsageEvent
    | Notice
    | ErrorEvent
    | RunFinished
    | UserMessage
    | LimitEvent
)


class Limits(TypedDict, total=False):
    """A budget: the most model turns, tokens (totalTokens) and cost (USD) a run (or a job,
    summed over its runs) may use; a kind left out is not bounded."""

    turns: int
    tokens: int
    cost: float


class LimitRecord(TypedDict):
    """result.json's ``limit``: which budget was reached, its limit, what was used (by the
    end of the run; for a job's budget, the job's total when it was reached), and what was
    done: ``wrap-up`` (the child was asked to finish and did, within the grace turns),
    ``abort`` (it was stopped: the run failed), ``stop`` (reached at an answer: the run
    ended there, its queued follow-ups not delivered). ``scope``: the run's own budget or
    its job's."""

    kind: LimitKind
    limit: float
    used: float
    action: LimitAction
    scope: LimitScope


class MessageCounts(TypedDict):
    """result.json's ``messages``: the messages sent to the run (wrap-ups included), and
    how many the child took."""

    sent: int
    delivered: int


class Receipt(TypedDict):
    """What ``send`` answers: the run, the message's id and what became of it so far."""

    runId: str
    id: str
    mode: MessageMode
    receipt: ReceiptWord
    reason: NotRequired[str]


# ---- result.json -------------------------------------------------------------------------


class RunPaths(TypedDict):
    """The run's artifacts, absolute."""

    events: str
    raw: str
    transcript: str
    stderr: str


class WorktreeSpec(TypedDict):
    """An isolated run's git worktree as the run was given it (meta.json's ``worktree``):
    ``subdir`` is where the run's cwd sits inside the repository."""

    repo: str
    path: str
    branch: str
    base: str
    subdir: str
    # The repository travels to the Ray node that runs it (no worktree here; the uncommitted
    # changes in the run dir's uncommitted.patch): launchers/ray_ship.py.
    shipped: NotRequired[bool]


class WorktreeRecord(TypedDict):
    """result.json's ``worktree``: what the run changed, committed on ``branch``
    (``kept``: the branch remains, ``patch``: its diff, None when nothing changed) — or,
    when that could not be recorded, the worktree it was given and ``error``."""

    repo: str
    path: str
    branch: str
    base: str
    subdir: str
    commit: NotRequired[str]
    filesChanged: NotRequired[int]
    insertions: NotRequired[int]
    deletions: NotRequired[int]
    kept: NotRequired[bool]
    patch: NotRequired[str | None]
    shipped: NotRequired[bool]
    error: NotRequired[str]


class ExecutorPlace(TypedDict):
    """result.json's ``executor``: where a run executed when not here (on a Ray node)."""

    kind: Executor
    node: str


@final
class RunResult(TypedDict):
    """``result.json``: how one run ended. Written once, atomically, last."""

    runId: str
    jobId: str | None
    agent: str | None
    agentSource: str | None  # builtin, user:<path> or project:<path>
    backend: str  # a backend's name (built-in or a plugin's)
    task: str
    cwd: str
    requestedModel: str | None
    model: str | None
    status: RunStatus
    stopReason: str | None
    rawStopReason: str | None
    finalText: str
    errorMessage: str | None
    exitCode: int | None
    signal: str | None
    forcedCleanup: bool
    usage: Usage
    toolCalls: int
    startedAt: str  # ISO 8601 UTC
    completedAt: str
    durationMs: int
    paths: RunPaths
    diagnostics: str | None  # the failure body (Markdown) when status is not completed
    sessionId: str | None  # the CLI's own conversation id, to continue it
    continuedFrom: str | None  # the run whose conversation this one continued
    worktree: WorktreeRecord | None
    executor: NotRequired[ExecutorPlace]
    # Live control (absent from results written before it): the messages sent to the run,
    # and the budget that was reached, if one was.
    messages: NotRequired[MessageCounts]
    limit: NotRequired[LimitRecord | None]
    # --output-schema (docs/structured.md; absent from results without one): the answer's
    # parsed JSON value when it satisfies the schema (else None: the raw answer stays in
    # finalText), and the schema's hash (structured.schema_hash).
    structured: NotRequired[JsonValue]
    schemaHash: NotRequired[str]


@final
class RunNotStarted(TypedDict):
    """A job's record of a run it never started (stopped first, or refused at its start):
    in ``JobResult.runs`` where its ``result.json`` would be. ``runId`` is None unless its
    directory was made."""

    runId: str | None
    agent: str | None
    backend: str | None
    task: str
    status: RunStatus
    errorMessage: str
    finalText: str
    usage: Usage
    toolCalls: int


# One entry of a job's ``runs``: a run's result.json, or the record of one never started.
# ``if "paths" in run:`` tells them apart (both are final): then it is a RunResult.
JobRun: TypeAlias = RunResult | RunNotStarted


# ---- jobs (job.json) -----------------------------------------------------------------------


class JobResult(TypedDict):
    """How a job ended: its runs' results in task/step order, their usage summed.
    ``finalText``: single, the run's; chain, the last step's; parallel, None."""

    jobId: str
    mode: JobMode
    status: RunStatus
    startedAt: str
    completedAt: str
    durationMs: int
    usage: Usage
    runs: list[JobRun]
    finalText: str | None
    errorMessage: NotRequired[str]
    # A council's answers side by side, agreement and verdict (jobs/council.py).
    council: NotRequired[JsonObject]


class ProcessIdentity(TypedDict):
    """A process as a record names it: a pid is that process only while its start time
    (psutil's ``create_time``) still matches."""

    pid: int
    createTime: float


class JobState(TypedDict):
    """``job.json`` as ``JobStore.load`` returns it: the job as recorded when it was made,
    what its driver added while it ran, and — once it ended — the job result's keys."""

    jobId: str
    mode: JobMode
    status: JobStatus
    createdAt: float
    agents: list[str]
    background: bool
    session: str | None
    runIds: list[str | None]
    # The checked job (the orchestrator's JobPlan.to_dict(): mode, requests, limits,
    # concurrency, session, extra); its requests and limits follow the run settings.
    plan: dict[str, Any]
    startedAt: NotRequired[str]
    driver: NotRequired[ProcessIdentity]
    sessionLog: NotRequired[str | None]
    # The job result, once the job ended.
    completedAt: NotRequired[str]
    durationMs: NotRequired[int]
    usage: NotRequired[Usage]
    runs: NotRequired[list[JobRun]]
    finalText: NotRequired[str | None]
    errorMessage: NotRequired[str]
    # The end entry could not be written when the job ended; whoever looks writes it.
    endEntry: NotRequired[Literal["pending"]]


class JobUpdate(TypedDict, total=False):
    """What ``JobStore.update`` may change in a job's state."""

    status: JobStatus
    startedAt: str
    sessionLog: str | None
    runIds: list[str | None]
    background: bool
    finalText: str | None


class JobRow(TypedDict):
    """One job as ``subagents ps`` lists it (the index's row; ``activity``: what its newest
    run is doing, for a job still going)."""

    jobId: str
    mode: JobMode | None
    agents: list[str]
    status: JobStatus | None
    createdAt: float | None
    startedAt: str | None
    completedAt: str | None
    durationMs: int | None
    runIds: list[str | None]
    session: str | None
    task: str  # the first task, in one line (with how many more a job of several has)
    totalTokens: int | None
    cost: float | None
    activity: NotRequired[str | None]


# ---- the session log and hooks -------------------------------------------------------------


class AgentEvent(TypedDict):
    """One lifecycle entry of the session log (``sessions/<id>.jsonl``): a job started or
    ended. Times are ISO 8601 UTC; ``agentName`` joins a job's agents with ``", "``."""

    type: Literal["agent_event"]
    timestamp: str
    eventType: LifecycleEventType
    jobId: str | None
    requestedBy: str
    startedAt: str | None
    completedAt: str | None
    durationMs: int | None
    model: str | None
    usage: Usage | None
    agentName: str | None
    pid: int | None
    mode: JobMode
    status: LifecycleStatus | None  # None on a start entry
    summary: str


class HookRecord(TypedDict):
    """One line of the hooks log: how a hook run for a lifecycle entry went."""

    type: Literal["hook_outcome"]
    timestamp: str
    eventType: str | None
    jobId: str | None
    command: list[str]
    outcome: Literal["ok", "failed", "timeout", "error"]
    exitCode: int | None
    signal: str | None
    error: str | None
    durationMs: int
    pid: int | None
    stdoutTail: str
    stderrTail: str


class CostRow(TypedDict):
    """Tokens and cost of a group of runs (``subagents cost``); ``unpriced`` counts the
    runs whose CLI reported no cost."""

    jobs: int
    runs: int
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: float | None
    unpriced: int


class KeyedCostRow(CostRow):
    key: str


class CostTotals(TypedDict):
    """``subagents cost --json``: a row per group (``by``: agent, backend, model, day or
    None) and the total."""

    by: str | None
    rows: list[KeyedCostRow]
    total: CostRow
    summary: NotRequired[str]  # the total in words (``--json``)
