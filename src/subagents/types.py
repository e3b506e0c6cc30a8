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
from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias, TypedDict, final

__all__ = [
    "AcpPermissions",
    "AcpRecord",
    "AgentEvent",
    "ApprovalChoice",
    "ApprovalDecision",
    "ApprovalEvent",
    "ApprovalItem",
    "ApprovalPolicy",
    "ApprovalRecord",
    "ApprovalRequest",
    "Approvals",
    "AssistantText",
    "BudgetSpec",
    "CommandRecord",
    "ControlReply",
    "ControlRequest",
    "CostRow",
    "CostTotals",
    "CouncilMember",
    "CouncilRecord",
    "ErrorEvent",
    "Event",
    "EventType",
    "Executor",
    "ExecutorPlace",
    "FleetJob",
    "FleetRun",
    "HookRecord",
    "HostHello",
    "HostPullReply",
    "HostRun",
    "HostStartReply",
    "HostStatus",
    "ItemKind",
    "JobMode",
    "JobPlanRecord",
    "JobResult",
    "JobRow",
    "JobRun",
    "JobState",
    "JobStatus",
    "JobUpdate",
    "JsonObject",
    "JsonValue",
    "KeyedCostRow",
    "LauncherName",
    "LifecycleEventType",
    "LifecycleStatus",
    "LimitAction",
    "LimitEvent",
    "LimitKind",
    "LimitRecord",
    "LimitRequest",
    "LimitScope",
    "Limits",
    "LocalSupervisorRecord",
    "MessageCounts",
    "MessageMode",
    "Notice",
    "NoticeLevel",
    "OnStall",
    "PlacementRecord",
    "ProcessIdentity",
    "Question",
    "QuestionOption",
    "RayClusterStatus",
    "RayDown",
    "RayHostStatus",
    "RayHostUnreachable",
    "RayNodeStatus",
    "RayPlace",
    "RaySupervisorRecord",
    "RayUnit",
    "Receipt",
    "ReceiptWord",
    "RunFinished",
    "RunNotStarted",
    "RunOptionsDict",
    "RunPaths",
    "RunRequestRecord",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "Runner",
    "SchemaMode",
    "SendRequest",
    "ShipmentRecord",
    "StopReason",
    "StructuredComparison",
    "SupervisorRecord",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Usage",
    "UsageEvent",
    "UserMessage",
    "WorktreeRecord",
    "WorktreeSpec",
]

# ---- JSON ---------------------------------------------------------------------------------

# Any JSON value, as ``json.loads`` makes one: what another program wrote (an agent CLI's
# stdout line, a request to the mock model, a file on disk) before it is known to be one
# of the records below. Unlike ``Any`` it must be narrowed (``isinstance``) before use:
# ``obj.get("usage")`` is a JsonValue, and only ``isinstance(u, dict)`` makes it an object.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
# A JSON object: what a line of a CLI's JSON stream is, once ``type(obj) is dict``.
JsonObject: TypeAlias = dict[str, JsonValue]


# ---- words ----------------------------------------------------------------------------

# How a run's output schema is held to: by the CLI's own flag, or the task's instruction
# and one repair turn (docs/structured.md).
SchemaMode: TypeAlias = Literal["own", "instructed"]
# How a run ended (result.json's ``status``; the CLI's exit code follows from it).
RunStatus: TypeAlias = Literal["completed", "failed", "aborted", "timeout"]
# A job's status in job.json: waiting for its driver, running, then how it ended.
JobStatus: TypeAlias = Literal["pending", "running", "completed", "failed", "aborted", "timeout"]
JobMode: TypeAlias = Literal["single", "parallel", "chain", "council", "map"]
# The canonical stop reasons. A stop reason a CLI spells in a way not mapped is kept as it
# came, so a record's ``stopReason`` is a ``str``; these are the ones that mean something.
StopReason: TypeAlias = Literal["stop", "length", "toolUse", "aborted", "error"]
# The session log's kinds of entry, and the status an end entry records (a timeout is
# recorded as ``failed``).
LifecycleEventType: TypeAlias = Literal[
    "subagent:start", "subagent:complete", "subagent:error", "subagent:aborted"
]
LifecycleStatus: TypeAlias = Literal["completed", "failed", "aborted"]
# How a supervisor is started, and where it runs (settings), and what started it (a
# launcher: one of those ways, chosen by a run's placement).
Runner: TypeAlias = Literal["process", "tmux"]
Executor: TypeAlias = Literal["local", "ray"]
LauncherName: TypeAlias = Literal["process", "tmux", "ray"]
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
LimitAction: TypeAlias = Literal["wrap-up", "abort", "stop", "refuse"]
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
    # When the child started (a ProcessIdentity's createTime); runs from before it lack it.
    createTime: NotRequired[float | None]


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
    args: JsonValue  # the tool's arguments as the CLI gave them


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


# An approval's policy (docs/approvals.md): ``auto`` (the CLI's own headless mode, nothing
# asked), ``ask`` (a person decides in the inbox), ``deny`` (nothing the rules do not allow),
# ``parent`` (the parent agent decides, through ``subagent_decide``).
Approvals: TypeAlias = Literal["auto", "ask", "deny", "parent"]
# What a decision chose: allow this once, allow it for the rest of the run, or deny it; a
# question's: its answers, or deny (not answered).
ApprovalChoice: TypeAlias = Literal["allow", "always", "deny", "answer"]
# What an inbox item is: a request to act, or the child's question to the user.
ItemKind: TypeAlias = Literal["approval", "question"]


class ApprovalEvent(_Stamped):
    """A child asked to act (``state: requested``, with ``tool`` and ``summary``: what it
    wants to do, bounded) and what was decided (``state: decided``: ``choice``, ``by``
    whom — a person's login, ``parent``, ``rule``, ``policy``, ``timeout`` — and why)."""

    type: Literal["approval"]
    item: str
    state: Literal["requested", "decided"]
    tool: str
    summary: str
    choice: NotRequired[ApprovalChoice]
    by: NotRequired[str]
    reason: NotRequired[str]
    # A request that waits (not one a rule or the policy decided at once): who decides it.
    waitsFor: NotRequired[Literal["person", "parent"]]
    # A question for the user (not a request to act), and its answers once answered.
    kind: NotRequired[ItemKind]
    answers: NotRequired[list[str]]


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
    | ApprovalEvent
)


class Limits(TypedDict, total=False):
    """A budget: the most model turns, tokens (totalTokens) and cost (USD) a run (or a job,
    summed over its runs) may use; a kind left out is not bounded."""

    turns: int
    tokens: int
    cost: float


class BudgetSpec(TypedDict, total=False):
    """A job's budget as a job spec, the CLI and the tools name it: the most model turns,
    tokens and cost (USD) its runs may use together; a kind left out is not bounded."""

    max_turns: int
    max_tokens: int
    max_cost: float


class LimitRecord(TypedDict):
    """result.json's ``limit``: which budget was reached, its limit, what was used (by the
    end of the run; for a job's budget, the job's total when it was reached), and what was
    done: ``wrap-up`` (the child was asked to finish and did, within the grace turns),
    ``abort`` (it was stopped: the run failed), ``stop`` (reached at an answer: the run
    ended there, its queued follow-ups not delivered), ``refuse`` (its job's was spent: the
    run never started). ``scope``: the run's own budget or its job's."""

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


# How an ACP agent's file and permission requests are answered (backends/acpclient.py).
AcpPermissions: TypeAlias = Literal["allow", "deny", "ask"]


class AcpRecord(TypedDict):
    """``CommandRecord``'s ``acp``: an ACP agent's run. ``command``: the agent's argv
    (its preset's, or ``--acp-command``'s words); ``permissions``: the policy its
    permission requests are answered by; ``initTimeout``: seconds it has to answer
    ``initialize``; ``files``: whether it is offered our file service (``fs/*``)."""

    command: list[str]
    permissions: AcpPermissions
    initTimeout: float
    files: NotRequired[bool]


class ApprovalPolicy(TypedDict):
    """``meta.json``'s ``approvals`` (and ``CommandRecord``'s): a run whose child's requests
    wait for a decision (None: ``auto``). ``rules``: ``--approve``'s, what passes unasked;
    ``editsInTree``: a file edit inside the working tree passes; ``timeout``: seconds an
    item waits before it is denied; ``server``: the argv of the MCP permission server the
    child starts (claude's ``--permission-prompt-tool``); ``parentMay``: under ``parent``,
    the rules bounding what the parent may allow (the user's ``parent_may_approve``;
    absent: anything), a request outside them waiting for a person."""

    policy: Literal["ask", "deny", "parent"]
    rules: list[str]
    editsInTree: bool
    timeout: float
    server: NotRequired[list[str]]
    parentMay: NotRequired[list[str]]


class CommandRecord(TypedDict):
    """``meta.json``'s ``command``: the run's command request (``backends.CommandRequest``)
    but its task, from which the supervisor builds the child's argv again (a continuation,
    a live child's first request). Only ``cwd`` is sure: a field left out has its default."""

    cwd: str
    model: NotRequired[str | None]
    tools: NotRequired[list[str] | None]
    system_prompt: NotRequired[str | None]
    system_prompt_file: NotRequired[str | None]
    thinking: NotRequired[str | None]
    extra_args: NotRequired[list[str] | None]
    session_dir: NotRequired[str | None]
    resume: NotRequired[str | None]
    task_on_stdin: NotRequired[bool]
    copilot_agent_initiator: NotRequired[bool]
    live: NotRequired[bool]
    own_max_turns: NotRequired[int | None]
    own_max_cost: NotRequired[float | None]
    output_schema: NotRequired[JsonObject | None]
    acp: NotRequired[AcpRecord | None]
    approvals: NotRequired[ApprovalPolicy | None]


class QuestionOption(TypedDict):
    """One option a question offers: its label (what an answer says) and what it means."""

    label: str
    description: str


class Question(TypedDict):
    """One question a child asks the user (claude's ``AskUserQuestion``): a free-text
    answer is taken too; ``multiSelect``: the answer may name several options."""

    question: str
    header: str
    options: list[QuestionOption]
    multiSelect: bool


class ApprovalItem(TypedDict):
    """One pending request in a run's inbox (``RUN_DIR/inbox/ITEM.json``): a request to act
    or (``kind: question``, with ``questions``) a question for the user. An item written
    before questions existed has no ``kind``: it is an approval."""

    id: str
    runId: str
    jobId: str | None
    backend: str
    task: str
    tool: str
    summary: str
    input: JsonValue
    policy: Literal["ask", "parent"]
    choices: list[ApprovalChoice]
    requestedAt: float
    expiresAt: float
    kind: NotRequired[ItemKind]
    questions: NotRequired[list[Question]]
    # Under ``parent`` with a bound (``ApprovalPolicy.parentMay``): its rules, and the
    # run's working tree they are matched in; an item outside them waits for a person.
    parentMay: NotRequired[list[str]]
    cwd: NotRequired[str]


class ApprovalDecision(TypedDict):
    """The decision on an item (``RUN_DIR/inbox/ITEM.decision.json``, written once: the
    first decider wins)."""

    item: str
    choice: ApprovalChoice
    by: str
    at: float
    reason: NotRequired[str]
    # A question's answers, one per question in order (``choice: answer``).
    answers: NotRequired[list[str]]


class ApprovalRecord(TypedDict):
    """result.json's ``approvals``: each request the run's child made and its decision."""

    item: str
    tool: str
    summary: str
    requestedAt: float
    choice: ApprovalChoice | None
    by: str | None
    decidedAt: float | None
    reason: NotRequired[str]
    kind: NotRequired[ItemKind]
    answers: NotRequired[list[str]]


class ApprovalRequest(TypedDict):
    """A child's request for a decision, at the control endpoint (the MCP permission
    server's), or ``decided``: an item of the run's inbox was decided (a poke)."""

    v: int
    op: Literal["approval", "decided"]
    tool: NotRequired[str]
    input: NotRequired[JsonValue]
    item: NotRequired[str]


# ---- control.sock (core/controlsock.py): one request line, one reply line -----------------


class SendRequest(TypedDict):
    """A message for the run's child (``runs.send``)."""

    v: int
    op: Literal["send"]
    mode: MessageMode
    text: str


class LimitRequest(TypedDict):
    """The run's job reached its budget (``runs.tell_limit``): the run wraps up or stops."""

    v: int
    op: Literal["limit"]
    kind: LimitKind
    limit: float
    used: float


ControlRequest: TypeAlias = SendRequest | LimitRequest | ApprovalRequest


class ControlReply(TypedDict):
    """The supervisor's answer: what became of the request so far (a message's ``id`` and
    ``mode`` with it), and why where that needs saying."""

    receipt: ReceiptWord
    id: NotRequired[str]
    mode: NotRequired[MessageMode]
    reason: NotRequired[str]
    # An approval's answer: the decision taken (a question's: its answers too).
    choice: NotRequired[ApprovalChoice]
    answers: NotRequired[list[str]]


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
    # Paths a commit cannot hold (a submodule's own changes, a repository made inside the
    # copy): the worktree directory is kept, with them in it.
    uncommitted: NotRequired[list[str]]
    shipped: NotRequired[bool]
    error: NotRequired[str]


class ExecutorPlace(TypedDict):
    """result.json's ``executor``: where a run executed when not here (on a Ray node)."""

    kind: Executor
    node: str | None  # None: the run ended before its actor was placed on a node


@final
class RunResult(TypedDict):
    """``result.json``: how one run ended. Written once, atomically, last. ``version``: the
    record's shape (``core.upgrade``: one written before it had one is read as today's)."""

    version: int
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
    # --approvals (docs/approvals.md; absent from results of runs that asked nothing): each
    # request and its decision.
    approvals: NotRequired[list[ApprovalRecord]]


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
    limit: NotRequired[LimitRecord]  # refused: its job's budget was spent (action "refuse")


# One entry of a job's ``runs``: a run's result.json, or the record of one never started.
# ``if "paths" in run:`` tells them apart (both are final): then it is a RunResult.
JobRun: TypeAlias = RunResult | RunNotStarted


# ---- jobs (job.json) -----------------------------------------------------------------------


class StructuredComparison(TypedDict):
    """Where members' structured answers agree and differ (``structured.compare``): JSON
    pointers into the values; at a pointer that differs, each member's value there."""

    agree: list[str]
    differ: dict[str, dict[str, JsonValue]]


class CouncilMember(TypedDict):
    """One member's answer in a council's record (from its run's result)."""

    label: str  # A, B, ... as the judge's task names the answers
    runId: str | None
    agent: str | None
    backend: str | None
    model: str | None
    status: RunStatus
    durationMs: int | None
    tokens: int | None
    cost: float | None
    answer: str
    # With an output schema: the member's structured answer (None: it did not satisfy it).
    structured: NotRequired[JsonValue]
    errorMessage: NotRequired[str | None]  # a member that did not complete


class CouncilRecord(TypedDict):
    """``JobResult.council``: the members' answers side by side, how many answered against
    the quorum, where structured answers agree and differ, and the judge's verdict (its
    structured answer under ``council.VERDICT_SCHEMA``: JSON the judge wrote, narrowed
    where read)."""

    members: list[CouncilMember]
    quorum: int
    answered: int
    agreement: NotRequired[StructuredComparison]
    judgeRunId: NotRequired[str | None]
    verdict: NotRequired[JsonValue]
    judgeError: NotRequired[str | None]


class MapFailureGroup(TypedDict):
    reason: str
    rows: int


class MapRecord(TypedDict):
    """A map's rows counted (jobs/mapresults.py): ``failures`` grouped by reason, most
    first; ``summary`` says it in one line; ``out``: the results file, if one."""

    total: int
    completed: int
    failed: int
    skipped: int
    pending: int
    failures: list[MapFailureGroup]
    summary: str
    out: NotRequired[str | None]


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
    council: NotRequired[CouncilRecord]
    # The job's own budget, when its runs' sum reached it (scope "job"; ``used``: the sum
    # by the job's end).
    limit: NotRequired[LimitRecord]
    # A map's rows counted (the rows themselves: the job's rowlog.jsonl).
    map: NotRequired[MapRecord]


class ProcessIdentity(TypedDict):
    """A process as a record names it: a pid is that process only while its start time
    (psutil's ``create_time``) still matches."""

    pid: int
    createTime: float


class PlacementRecord(TypedDict):
    """Where a job's runs start (a ``Placement``, as ``job.json`` keeps it)."""

    launcher: LauncherName
    ray_address: str | None
    ray_shared_cwd: NotRequired[bool]


class RunOptionsDict(TypedDict, total=False):
    """A run's options (``options.RunOptions``, where each is defined, checked and described)
    as keywords: ``subagents.run(task, **options)``, ``subagents.start``, and the requests a
    job's record keeps. tests/test_options.py holds its keys to ``RunOptions``' fields."""

    agent: str | None
    backend: str | None
    model: str | None
    thinking: str | None
    timeout: float | None
    isolate: Literal["worktree"] | None
    stall_timeout: float | None
    on_stall: OnStall | None
    tool_timeout: float | None
    max_turns: int | None
    max_tokens: int | None
    max_cost: float | None
    # A file, JSON text or the schema (in a job's record: the schema, read and checked).
    output_schema: str | Mapping[str, object] | None
    verify: str | None
    verify_timeout: float | None
    verify_attempts: int | None
    review: str | None
    # An ACP agent's run: its command instead of its preset's, its permission policy.
    acp_command: str | None
    permissions: AcpPermissions | None
    approvals: Approvals | None
    approve: str | None
    approve_edits_in_tree: bool | None
    approval_timeout: float | None


class RunRequestRecord(RunOptionsDict):
    """One run a job asked for (a ``RunRequest``, as ``job.json`` keeps it): its options
    (each absent from records written before it was one: read with .get), and these."""

    task: str
    cwd: str | None
    tools: list[str] | None
    system_prompt: str | None
    agent_source: str | None
    job_id: str | None
    env: dict[str, str]
    continue_from: str | None
    # The processes the job is bound to (--parent-pid): its runs end when one does.
    watch: list[ProcessIdentity]
    # What the run's job had used before it (absent before budgets: read with .get).
    job_used: dict[str, float] | None
    # The run's acceptance gate (jobs/gates.py; absent before gates).
    gate: NotRequired[JsonObject | None]


class JobPlanRecord(TypedDict):
    """``job.json``'s ``plan``: the checked job (``JobPlan.to_dict()``), what a restarted
    job driver runs again. ``limits``: the settings it was planned with, by their names in
    ``config.Settings`` (but secrets and hooks). A record of an earlier shape is read as
    this one (``core.upgrade``)."""

    mode: JobMode
    requests: list[RunRequestRecord]
    limits: JsonObject
    placement: PlacementRecord
    concurrency: int
    session: str | None
    extra: JsonObject
    # The job's budget as its fields say it (``max_turns`` …).
    budget: BudgetSpec


class JobState(TypedDict):
    """``job.json`` as ``JobStore.load`` returns it: the job as recorded when it was made,
    what its driver added while it ran, and — once it ended — the job result's keys.
    ``version``: the record's shape (``core.upgrade`` reads an earlier one as today's)."""

    jobId: str
    version: int
    mode: JobMode
    status: JobStatus
    createdAt: float
    agents: list[str]
    background: bool
    session: str | None
    runIds: list[str | None]
    plan: JobPlanRecord
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
    council: NotRequired[CouncilRecord]
    limit: NotRequired[LimitRecord]
    map: NotRequired[MapRecord]
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
    # A running job whose newest run waits for a decision (docs/approvals.md).
    waiting: NotRequired[bool]


# ---- supervisor.json ------------------------------------------------------------------------


class LocalSupervisorRecord(TypedDict):
    """A supervisor on the caller's machine (the process and tmux launchers): who it is.
    ``runner`` names the launcher (the key it had when these were the only two)."""

    runner: str
    pid: int
    createTime: float


class RayPlace(TypedDict):
    """A run's actor on a Ray cluster: its name, the cluster's address, its node once known."""

    actor: str | None  # the per-run actor of a version before hosts were pooled
    address: str | None
    node: str | None


class RaySupervisorRecord(TypedDict):
    """A run on a Ray node: its actor, and the process relaying it here (never taken for a
    supervisor)."""

    runner: Literal["ray"]
    ray: RayPlace
    relay: ProcessIdentity | None


# A run's ``supervisor.json``: ``record["runner"]`` tells which.
SupervisorRecord: TypeAlias = LocalSupervisorRecord | RaySupervisorRecord


# ---- the Ray hosts (launchers/ray_host.py, ray_pool.py) ---------------------------------------
# What a caller's relay and a node's host actor hand each other (pickled by Ray, so bytes
# travel as they are), and what ``subagents ray status`` and ``ray down`` print.


class ShipmentRecord(TypedDict):
    """What a run whose repository travels tells its host (``NodeHost.start``'s ``ship``):
    the base commit (sent before), the uncommitted changes as a patch (None: none)."""

    commit: str
    patch: bytes | None


class HostHello(TypedDict):
    """``NodeHost.hello``: which node, which protocol (a caller refuses another's)."""

    node: str
    protocol: int
    pid: int


class HostStartReply(TypedDict):
    """``NodeHost.start``: why the run could not start there (None: it started)."""

    node: str
    error: str | None


class HostPullReply(TypedDict):
    """``NodeHost.pull``: each artifact's new bytes, and ``result.json`` once every byte
    before it was handed over. ``known``: False when the host no longer has the run;
    ``reason``: why it was ended by someone else than its relay (``ray down --force``)."""

    node: str
    known: bool
    chunks: dict[str, bytes]
    result: RunResult | None
    alive: bool
    error: str | None
    reason: NotRequired[str | None]  # absent when the host no longer has the run


class HostRun(TypedDict):
    """A run a host holds (running, or ended and not yet collected by its relay);
    ``startedAt``: epoch seconds."""

    runId: str
    backend: str
    running: bool
    supervisorPid: int
    startedAt: float
    error: str | None


# A host's supervisor template (launchers/ray_forks.py), when it has one.
TemplateState: TypeAlias = Literal["starting", "ready"]


class HostStatus(TypedDict):
    """``NodeHost.status``: its process, its warm spares or its supervisor template, the packs
    it was sent, its runs."""

    node: str
    pid: int
    protocol: int
    spares: int
    template: TemplateState | None
    packsReceived: int
    runs: list[HostRun]


@final
class RayHostStatus(HostStatus):
    """A host in ``ray status``: its actor's name and what it said."""

    name: str


@final
class RayHostUnreachable(TypedDict):
    """A host in ``ray status`` that did not answer: why."""

    name: str
    error: str
    runs: list[HostRun]  # none known


class RayNodeStatus(TypedDict):
    """A node in ``ray status`` as Ray sees it: the ``subagents-<backend>`` units it offers
    and how many of each no run holds."""

    node: str
    address: str
    alive: bool
    offers: dict[str, float]
    free: dict[str, float]


class RayUnit(TypedDict):
    """A run's unit (its placement group) in ``ray status``: Ray's state for it
    (``PENDING`` while it waits for a node, ``CREATED`` once held), its node once placed."""

    runId: str
    state: str
    node: str | None
    resources: dict[str, float]


class RayClusterStatus(TypedDict):
    """``subagents ray status --json``."""

    address: str
    nodes: list[RayNodeStatus]
    hosts: list[RayHostStatus | RayHostUnreachable]
    units: list[RayUnit]


class RayDown(TypedDict):
    """``subagents ray down --json``: the hosts removed (by actor name), the runs aborted,
    how many units were released."""

    hosts: list[str]
    aborted: list[str]
    units: int


# ---- the live views (``top --json``) ------------------------------------------------------


class FleetRun(TypedDict):
    """A run as ``top --json`` shows it (``task``: its first line; ``elapsed``: seconds)."""

    runId: str | None
    task: str
    agent: str | None
    backend: str
    status: str  # a run's status, ``running``, ``stalled`` or ``pending``
    elapsed: float | None
    tools: int
    tokens: int
    cost: float | None
    activity: str
    # Its budget in words (``turns 2/5 · tokens 1.2k/10k`` while it runs; the mark once a
    # budget ended it), None without one.
    budget: str | None
    transcript: str | None


class FleetJob(TypedDict):
    """A job as ``top --json`` shows it: its tokens and cost summed over its runs."""

    jobId: str
    mode: JobMode | None
    status: JobStatus | None
    startedAt: str | None
    elapsed: float | None
    tokens: int
    cost: float | None
    runs: list[FleetRun]


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
