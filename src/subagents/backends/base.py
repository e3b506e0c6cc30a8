"""What a backend is: a command-line builder plus a stateful stream normalizer.

The supervisor imports only this module and the one backend it runs, so nothing
here may pull in heavy dependencies.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from subagents.core import events as ev

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from subagents.types import (
        AcpRecord,
        ApprovalChoice,
        ApprovalPolicy,
        AssistantText,
        CommandRecord,
        JsonObject,
        JsonValue,
        MessageMode,
        ReceiptWord,
        Usage,
    )

    # What became of a message: its id, the word and the reason (None for none).
    Receipt = tuple[str, ReceiptWord, str | None]
    # A child's request to act that waits for a decision (``Fed.asks``): the normalizer's
    # key for it (its JSON-RPC id), the tool (in claude's names: core/approve.py), its input.
    Ask = tuple[JsonValue, str, JsonValue]


# The largest task given on a child's command line, in UTF-8 bytes: under Linux's limit on
# one argument (128 KiB), with room for an option's name around it. A bigger task goes
# through stdin to a CLI that reads it there, and is refused for one that cannot.
ARGV_TASK_LIMIT = 100 * 1024
# The largest task accepted at all.
MAX_TASK_BYTES = 10 * 1024 * 1024


# A line of a CLI's stream is another program's JSON: a normalizer's ``feed`` gets it as a
# JsonObject (the supervisor parsed it and made sure it is an object) and narrows each value
# it reads (``isinstance``; a usage's numbers with ``events.count`` and ``events.number``).


def text_blocks(content: JsonValue, sep: str = "") -> str:
    """The text of a message's content: a string, or the ``{"type": "text"}`` blocks of a
    list (the shape pi, Claude and Codex all use), joined with ``sep``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    if len(content) == 1:  # the common case, without a generator
        block = content[0]
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))
        return ""
    return sep.join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


class CommandRequest:
    """What a run asks of a backend's command line.

    A plain class, not a dataclass: the supervisor imports this module, and
    dataclasses costs it start-up time.
    """

    def __init__(
        self,
        task: str,
        cwd: str,
        model: str | None = None,
        tools: list[str] | None = None,
        system_prompt: str | None = None,
        system_prompt_file: str | None = None,
        thinking: str | None = None,
        extra_args: list[str] | None = None,
        session_dir: str | None = None,
        resume: str | None = None,
        task_on_stdin: bool = False,
        copilot_agent_initiator: bool = False,
        live: bool = False,
        own_max_turns: int | None = None,
        own_max_cost: float | None = None,
        output_schema: JsonObject | None = None,
        acp: AcpRecord | None = None,
        approvals: ApprovalPolicy | None = None,
    ) -> None:
        self.task = task
        self.cwd = cwd
        self.model = model
        self.tools = tools
        self.system_prompt = system_prompt
        # A file the caller wrote the system prompt to, for CLIs that take a path.
        self.system_prompt_file = system_prompt_file
        self.thinking = thinking
        self.extra_args = list(extra_args or [])
        # Where the child may keep its session (a directory of the run), for CLIs that
        # take one; and the session to resume (an id, or a file), to continue a run.
        self.session_dir = session_dir
        self.resume = resume
        # The task reaches the child on stdin (a file in the run directory), not in argv.
        self.task_on_stdin = task_on_stdin
        # Requests to GitHub Copilot say the agent, not the user, initiated them (pi only).
        self.copilot_agent_initiator = copilot_agent_initiator
        # The child takes its task and later messages on stdin, in the CLI's input protocol
        # (``Backend.live_input``): no task in argv.
        self.live = live
        # The CLI's own bounds, passed where it has flags for them (claude): a second line of
        # defence behind the supervisor's budget, never instead of it.
        self.own_max_turns = own_max_turns
        self.own_max_cost = own_max_cost
        # The output schema the CLI's own flag takes (``Backend.own_schema``): claude's
        # --json-schema, codex's outputSchema (made strict); None elsewhere (the task
        # carries it).
        self.output_schema = output_schema
        # An ACP agent's run (backends/acp.py): its command, permission policy and how long
        # it has to answer initialize.
        self.acp = acp
        # --approvals other than auto (docs/approvals.md): the child's requests to act are
        # routed to the run's supervisor (``Backend.asks``) instead of its headless mode.
        self.approvals = approvals

    def record(self) -> CommandRecord:
        """The request but its task, as ``meta.json`` keeps it (to build a continuation's
        argv again): ``CommandRequest(task=..., **record)`` is the request."""
        return {
            "cwd": self.cwd,
            "model": self.model,
            "tools": self.tools,
            "system_prompt": self.system_prompt,
            "system_prompt_file": self.system_prompt_file,
            "thinking": self.thinking,
            "extra_args": list(self.extra_args),
            "session_dir": self.session_dir,
            "resume": self.resume,
            "task_on_stdin": self.task_on_stdin,
            "copilot_agent_initiator": self.copilot_agent_initiator,
            "live": self.live,
            "own_max_turns": self.own_max_turns,
            "own_max_cost": self.own_max_cost,
            "output_schema": self.output_schema,
            "acp": self.acp,
            "approvals": self.approvals,
        }


class Fed(list["ev.Event"]):
    """What a normalizer made of one line of the child's (``feed``) or of one thing the
    supervisor asked of it (``begin``, ``steer``, ...): the events to record (the list itself),
    whether the child's turn is over after it (``terminal``: None when it did not say), the
    lines for the child's stdin (``writes``), what became of messages (``receipts``:
    ``(id, "queued" | "delivered" | "refused", reason or None)``) and the child's requests to
    act that wait for a decision (``asks``: answered by ``Normalizer.answer_ask``).

    A list, so a line's events read as they always did; the rest are class defaults until a
    line sets them, and a line's ``terminal`` is its class (``Normalizer._fed``): the common
    line costs one list and no attribute.
    """

    terminal: bool | None = None
    writes: tuple[bytes, ...] = ()
    receipts: tuple[Receipt, ...] = ()
    asks: tuple[Ask, ...] = ()

    def write(self, line: bytes) -> None:
        self.writes = (*self.writes, line)

    def receipt(self, message_id: str, word: ReceiptWord, reason: str | None = None) -> None:
        self.receipts = (*self.receipts, (message_id, word, reason))

    def ask(self, key: JsonValue, tool: str, tool_input: JsonValue) -> None:
        self.asks = (*self.asks, (key, tool, tool_input))


class Requests:
    """A live CLI spoken to in JSON-RPC (codex's app-server, ACP agents): our requests by
    id, each with what it was for and the message it carries (or None)."""

    __slots__ = ("_line", "_next_id", "_open")

    def __init__(self, line: Callable[[JsonObject], bytes]) -> None:
        self._line = line  # one message as a line of the child's stdin
        self._next_id = 0
        self._open: dict[int, tuple[str, str | None]] = {}

    def send(
        self, fed: Fed, method: str, params: JsonObject, purpose: str, mid: str | None = None
    ) -> None:
        self._next_id += 1
        self._open[self._next_id] = (purpose, mid)
        fed.write(self._line({"id": self._next_id, "method": method, "params": params}))

    def answered(self, rid: JsonValue) -> tuple[str, str | None]:
        """What the request a response answers was for (``("", None)``: none of ours)."""
        return self._open.pop(rid, ("", None)) if isinstance(rid, int) else ("", None)


class _Ended(Fed):
    """A line that ended the child's turn."""

    terminal = True


class _Going(Fed):
    """A line after which the child's turn goes on."""

    terminal = False


class Normalizer(ABC):
    """Turns one CLI's stdout objects into canonical events, one run at a time.

    Each ``feed`` returns a ``Fed``: the supervisor takes the line's events, whether the turn
    is over and what to write to the child from it; it sets none of the normalizer's
    attributes. These are the run so far (its totals, stop reason, failure), read for its
    budget, when it comes to rest and when it ends:

    ``terminal``  True while the last thing seen ended the run (what ``Fed.terminal`` says);
                  set back to False by further activity, or by a turn the supervisor starts.
    ``failed``    the CLI itself said the run failed, whatever the stop reason.
    """

    def __init__(self) -> None:
        self.terminal = False
        self.failed = False
        self.final_text = ""
        self.stop_reason: str | None = None
        self.raw_stop_reason: str | None = None
        self.model: str | None = None
        self.error_message: str | None = None
        self.usage: Usage = ev.empty_usage()
        self.tool_calls = 0
        self.saw_answer = False
        # The CLI's own id of the conversation, where its stream names one (to resume it).
        self.session_id: str | None = None
        # Model turns so far (one per model response): what a turn budget counts.
        self.turns = 0
        # The CLI's own bound ended the run ("turns" or "cost"; claude's --max-turns,
        # --max-budget-usd): the budget it stood behind is named in the result.
        self.own_limit: str | None = None
        # The structured answer the CLI itself validated (claude's ``structured_output``),
        # when it gave one (``has_structured``).
        self.structured: JsonValue = None
        self.has_structured = False

    def _fed(self, events: list[ev.Event], said: Fed | None = None) -> Fed:
        """A line's events, with the turn's state after it (and what ``said`` collected
        for the child and of messages on the way, when the line called for any)."""
        fed = (_Ended if self.terminal else _Going)(events)
        if said is not None:
            if said.writes:
                fed.writes = said.writes
            if said.receipts:
                fed.receipts = said.receipts
            if said.asks:
                fed.asks = said.asks
        return fed

    # Lines starting with one of these are mirrored to raw.jsonl but never parsed:
    # the cheap way to keep up with chatty streams (pi repeats the whole partial
    # message on every delta). The supervisor decides from a line's first bytes, and then
    # only looks for the end of a skipped line.
    skip_prefixes: tuple[bytes, ...] = ()

    def wants(self, line: bytes | bytearray, start: int = 0) -> bool:
        """Whether the line at ``line[start:]`` is parsed (decided by its prefix alone)."""
        return not line.startswith(self.skip_prefixes, start)

    @abstractmethod
    def feed(self, obj: JsonObject) -> Fed:
        """Take one parsed stdout object: its events and what else it did (``Fed``)."""

    def skipped(self, tail: bytes) -> Fed | None:
        """The last bytes (up to 32) of a line skipped unparsed: what a CLI puts at the end
        of a long line can still be read there. None: it changed nothing."""
        return None

    def finish(self) -> list[ev.Event]:
        """The stream ended: return any events still held back."""
        return []

    # Live input: a normalizer of a CLI that takes messages on stdin while it runs (its
    # backend's ``live_normalizer``) speaks that input too, since what becomes of a message
    # is read from the same stream. Each returns what to write to the child (``writes``) and
    # the receipts it already knows; the supervisor writes them.

    live = False
    # A live CLI that must answer a handshake first (ACP's initialize): seconds it has for
    # it (set by ``begin``). Past that time the supervisor asks ``handshake_overdue``.
    handshake_timeout: float | None = None

    def handshake_overdue(self) -> Fed | None:
        """The handshake was not answered in time: the run's failure (a terminal ``Fed``),
        after which the child is stopped. None: it was answered."""
        return None

    def begin(self, req: CommandRequest) -> Fed:
        """The lines that start the run: its task (``req.task``), and whatever else the CLI
        takes over its input rather than in argv."""
        raise NotImplementedError(f"{type(self).__name__} takes no input")

    def answer_ask(
        self,
        key: JsonValue,
        choice: ApprovalChoice,
        why: str | None,
        answers: list[str] | None = None,
    ) -> Fed:
        """The decision on a request to act the child made (``Fed.asks``), in its protocol
        (on a question: ``answers``, one per question)."""
        raise NotImplementedError(f"{type(self).__name__} asks nothing")

    def steer(self, message_id: str, text: str) -> Fed:
        """Put ``text`` into the running conversation, as soon as the CLI allows."""
        raise NotImplementedError(f"{type(self).__name__} takes no input")

    def follow_up(self, message_id: str, text: str) -> Fed:
        """The run is at rest (its last event was terminal): start its next turn with
        ``text``, in the same conversation (``terminal`` is False again)."""
        raise NotImplementedError(f"{type(self).__name__} takes no input")

    def abort(self) -> Fed:
        """What stops the running turn (a budget ran out): the CLI ends it with a terminal
        event of its own."""
        raise NotImplementedError(f"{type(self).__name__} takes no input")

    def held_input(self) -> Fed | None:
        """At rest: a message the CLI holds and will act on by itself (a steer that came too
        late for the turn), so the run goes on without a follow-up: what that takes (its
        turn starts: ``terminal`` is False again). None: it holds nothing."""
        return None

    def _going_on(self, fed: Fed) -> Fed:
        """A turn the supervisor started: the run is not at rest any more."""
        self.terminal = False
        fed.terminal = False
        return fed

    # Helpers for subclasses.

    def _answer(
        self,
        text: str,
        raw_stop: str | None,
        model: str | None,
        usage: Usage | None = None,
        has_tool_calls: bool = False,
    ) -> AssistantText:
        """Record an assistant message and decide whether it is terminal."""
        stop = ev.canonical_stop_reason(raw_stop)
        if stop is None and has_tool_calls:
            stop = ev.TOOL_USE
        self.stop_reason = stop
        self.raw_stop_reason = raw_stop
        if model:
            self.model = model
        if text and not text.isspace():  # text.strip(), without copying a big answer
            self.final_text = text
            self.saw_answer = True
        self.terminal = ev.is_terminal(stop)
        return ev.assistant_text(text, stop, raw_stop, model or self.model, usage)


class Backend(ABC):
    """One agent CLI."""

    name: str = ""
    default_binary: str = ""
    install_hint: str = ""
    # Capabilities; asking for one a backend lacks is an error, never silently ignored.
    supports_tools: bool = False
    supports_system_prompt: bool = False
    supports_thinking: bool = False
    # Whether ``continue`` can resume a run's conversation (see ``resume_point``), and what
    # to add when a run left nothing to resume.
    can_continue: bool = False
    resume_hint: str = ""
    # The CLI reads the whole task from stdin when argv holds none (see ARGV_TASK_LIMIT).
    reads_task_from_stdin: bool = False
    # The run's command line depends on the installed version (``live_input``): the
    # caller reads it once per binary (``version_argv``) and hands it to these hooks.
    needs_version: bool = False
    # The versions this backend was tested with (oldest first), for ``doctor``.
    tested_versions: tuple[str, ...] = ()
    # Costs: reported at all (else a cost budget cannot be counted and is refused), and as
    # the run goes (else only at the end of each of its turns).
    reports_cost: bool = True
    live_cost: bool = True
    # An output schema (docs/structured.md): the CLI takes it with a flag of its own
    # (``CommandRequest.output_schema``), in OpenAI's strict form where ``strict_schema``;
    # else the task carries it and the supervisor asks for one repair turn.
    own_schema: bool = False
    strict_schema: bool = False
    # Approvals (docs/approvals.md): the CLI routes its requests to act to us, so they can
    # wait for a decision (else --approvals other than auto is refused).
    asks: bool = False
    # The module of the permission server its child starts (``-m``), where the CLI asks
    # through one (claude's MCP permission prompt tool).
    prompt_server: str | None = None

    def live_input(self, version: str | None) -> bool:
        """Whether a run takes its task and messages on the child's stdin (``CommandRequest.live``;
        ``live_normalizer`` reads and writes that protocol)."""
        return False

    def support(self, version: str | None) -> dict[str, str]:
        """What a run of this backend can do (at ``version``), in words: the support matrix
        of docs/backends.md and ``doctor``."""
        live = self.live_input(version)
        refused = self.refusals(version)
        budgets = "graceful" if live else "abort-only"
        if not self.reports_cost:
            budgets += "; no cost limit (no cost reported)"
        elif live and not self.live_cost:
            budgets += "; cost: abort-only (reported per answer)"
        follow = "as a continuation" if not live and self.can_continue else "yes"
        return {
            "stream": "yes",
            "continue": "yes" if self.can_continue else "no",
            "steer": "no" if "steer" in refused else "yes",
            "follow-up": "no" if "follow-up" in refused else follow,
            "budgets": budgets,
            "structured output": "the CLI's own" if self.own_schema else "instructed + 1 repair",
        }

    def tested(self, version: str | None) -> str:
        """Where ``version`` stands against the versions this backend was tested with."""
        if not self.tested_versions:
            return "untested"
        if version is None:
            return "unknown version"
        low, high = self.tested_versions[0], self.tested_versions[-1]
        if version in self.tested_versions:
            return "tested"

        def key(v: str) -> tuple[int, ...]:
            return tuple(int(p) if p.isdigit() else 0 for p in v.split(".")[:3])

        if key(version) < key(low):
            return f"older than tested ({low})"
        if key(version) > key(high):
            return f"newer than tested ({high})"
        return "in the tested range"

    def live_normalizer(self) -> Normalizer:
        """The normalizer of a live run (``live_input``)."""
        return self.normalizer()

    def refusals(self, version: str | None) -> dict[MessageMode, str]:
        """The kinds of message a run of this backend cannot take, each with the reason
        ``send`` gives. By default: steers need live input; a follow-up continues the
        conversation in a new process where the backend can continue a run."""
        if self.live_input(version):
            return {}
        out: dict[MessageMode, str] = {
            "steer": f"{self.name} takes no messages while it runs: send a follow-up instead"
            " (delivered when the current turn ends)"
        }
        if not self.can_continue:
            out["follow-up"] = f"{self.name} runs cannot be continued"
        return out

    def binary_env_var(self) -> str:
        return f"SUBAGENTS_{self.name.upper()}_BIN"

    @abstractmethod
    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        """The child's argv (never a shell string)."""

    def child_env(self, req: CommandRequest) -> dict[str, str]:
        """Extra environment for the child beyond what every run gets."""
        return {}

    def stdin_task(self, task: str) -> str:
        """The task as written to the child's stdin (``reads_task_from_stdin``)."""
        return task

    @abstractmethod
    def normalizer(self) -> Normalizer: ...

    def resume_point(self, run_dir: str, result: Mapping[str, object]) -> str | None:
        """What to resume to continue an earlier run (``CommandRequest.resume``), from its
        run directory and ``result.json``; None when it left nothing to resume. By default
        the session id its stream named."""
        session = result.get("sessionId")
        return session if isinstance(session, str) and session else None

    # Optional hooks for `subagents doctor`.

    def version_argv(self, binary: str) -> list[str]:
        """The argv that prints the CLI's version (first line of stdout)."""
        return [binary, "--version"]

    def credentials_hint(self, env: Mapping[str, str]) -> tuple[bool, str] | None:
        """Whether the CLI looks set up with credentials: ``(ok, short reason)``.

        ``None`` means this backend cannot tell; doctor then falls back to what it
        knows about the built-in CLIs, or reports the credentials as unchecked.
        """
        return None
