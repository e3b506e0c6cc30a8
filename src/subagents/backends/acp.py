"""Any agent that speaks the Agent Client Protocol (ACP, Zed's JSON-RPC over stdio), as a
backend: ``--backend acp --acp-command "qwen --acp"``, or ``--backend acp:NAME`` for a
preset (built in below, or the user's ``[acp.NAME]`` in config).

The protocol is spoken by ``acpnorm.AcpNormalizer`` (the conversation) and
``acpclient.Client`` (the files and permissions we serve). The Python
``agent-client-protocol`` package is not used: it needs pydantic and asyncio, and importing
it costs the supervisor's start seconds (its schema module alone builds thousands of
pydantic models), where this backend's own code is a few hundred lines of stdlib typed
against the published schema (protocol version 1).
"""

from __future__ import annotations

from subagents.backends.base import Backend, CommandRequest, Normalizer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# The agents whose ACP launch line is known: preset name -> (argv, npm package or how to
# install it). ``acp:claude`` and ``acp:codex`` are Zed's adapters of those CLIs. Qwen Code's
# own default approval mode (``auto``) has its model judge each tool call and never asks its
# client: in ``default`` it asks, and the run's --permissions (or --approvals) decides.
PRESETS: dict[str, tuple[tuple[str, ...], str]] = {
    "gemini": (("gemini", "--acp"), "npm install -g @google/gemini-cli"),
    "qwen": (
        ("qwen", "--acp", "--approval-mode", "default"),
        "npm install -g @qwen-code/qwen-code",
    ),
    "opencode": (("opencode", "acp"), "npm install -g opencode-ai"),
    "copilot": (("copilot", "--acp"), "npm install -g @github/copilot"),
    "kilo": (("kilo", "acp"), "npm install -g @kilocode/cli"),
    "claude": (("claude-agent-acp",), "npm install -g @zed-industries/claude-agent-acp"),
    "codex": (("codex-acp",), "npm install -g @zed-industries/codex-acp"),
}
# Presets whose agent is not offered our file service: Gemini CLI 0.61 reads a JSON-RPC
# error as "[object Object]", so a file that does not exist yet (ACP's "Resource not found")
# is a failure to it and it can create no file; it keeps to its own workspace checks instead.
NO_FS = frozenset({"gemini"})
# The versions each preset's agent was tested with against the mock model (docs/backends.md).
TESTED: dict[str, tuple[str, ...]] = {
    "gemini": ("0.61.0",),
    "qwen": ("0.24.4",),
    "claude": ("0.23.1",),
    "codex": ("0.16.0",),
    "opencode": ("1.18.33",),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


class AcpBackend(Backend):
    """One ACP agent: ``acp`` (the command given with the run) or ``acp:NAME`` (a preset)."""

    supports_system_prompt = False  # ACP has no system prompt
    can_continue = True  # session/load, where the agent advertises loadSession
    resume_hint = ": its agent does not advertise loadSession (or no session began)"
    reads_task_from_stdin = True  # the task is a session/prompt on stdin, any size
    # Cost is counted where the agent reports it (usage_update), once a turn has ended.
    live_cost = False
    # Its session/request_permission waits for the run's decision under --approvals (acpask.py).
    asks = True

    def __init__(self, preset: str | None = None) -> None:
        self.preset = preset
        self.name = f"acp:{preset}" if preset else "acp"
        argv, hint = PRESETS.get(preset or "", ((), ""))
        self.command: list[str] = list(argv)
        self.env: dict[str, str] = {}
        self.default_binary = argv[0] if argv else ""
        self.install_hint = hint
        self.tested_versions = TESTED.get(preset or "", ())
        # Whether the agent is offered fs/read_text_file and fs/write_text_file.
        self.serve_files = (preset or "") not in NO_FS

    def configure(self, command: list[str], env: Mapping[str, str] | None = None) -> None:
        """The agent's command (a user preset's, or ``--acp-command``'s words) and env."""
        self.serve_files = True
        self.command = list(command)
        self.env = dict(env or {})
        self.default_binary = command[0]

    def binary_env_var(self) -> str:
        return f"SUBAGENTS_ACP_{(self.preset or 'agent').upper().replace('-', '_')}_BIN"

    def live_input(self, version: str | None) -> bool:
        return True

    def support(self, version: str | None) -> dict[str, str]:
        out = super().support(version)
        out["continue"] = "where the agent advertises loadSession"
        out["steer"] = "cancels the running turn, then prompts with the message"
        return out

    def build_argv(self, binary: str, req: CommandRequest) -> list[str]:
        # Everything else (cwd, model, the task) goes over the protocol.
        command = req.acp["command"] if req.acp else self.command
        return [binary, *command[1:], *req.extra_args]

    def child_env(self, req: CommandRequest) -> dict[str, str]:
        return dict(self.env)

    def normalizer(self) -> Normalizer:
        from subagents.backends.acpnorm import AcpNormalizer

        return AcpNormalizer()
