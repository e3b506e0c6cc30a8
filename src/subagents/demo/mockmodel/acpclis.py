"""Pointing ACP agents at the mock: Gemini CLI (``gemini --acp``), Qwen Code (``qwen
--acp``), OpenCode (``opencode acp``) and Zed's Claude and Codex adapters
(``claude-agent-acp``, ``codex-acp``), each run as an ``acp:NAME`` preset.

Each writer returns the env the agent needs. In ACP mode no model is passed on the command
line: Gemini's is set in its settings (else its model router asks the API first, and retries
what the mock cannot answer), Qwen's by ``OPENAI_MODEL``, the adapter's by its own default.
"""

from __future__ import annotations

import json
from pathlib import Path

from subagents.demo.mockmodel.clis import (
    write_claude_config,
    write_codex_config,
    write_gemini_config,
    write_opencode_config,
)
from subagents.demo.mockmodel.script import GEMINI_MODEL, MODEL_ID, OPENCODE_MODEL

# The shell tool each agent's model is offered, by preset: what a mock's tool call names.
SHELL_TOOL = {
    "gemini": "run_shell_command",
    "qwen": "run_shell_command",
    "claude": "Bash",
    "opencode": "bash",
    "codex": "exec_command",
}


def write_acp_gemini_config(home: Path, base_url: str) -> dict[str, str]:
    """Gemini CLI as for ``write_gemini_config`` (one attempt per request), with its model
    (:data:`GEMINI_MODEL`) in ``settings.json``."""
    env = write_gemini_config(home, base_url, max_attempts=1)
    path = Path(home) / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    settings["model"] = {"name": GEMINI_MODEL}
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return env


def write_qwen_config(home: Path, base_url: str) -> dict[str, str]:
    """Qwen Code on the mock's OpenAI chat API: ``~/.qwen/settings.json`` chooses the
    ``openai`` auth (no login), with no telemetry or update check; the env gives
    ``OPENAI_BASE_URL`` (``<base_url>/v1``), ``OPENAI_API_KEY=x``, ``OPENAI_MODEL``
    (``mock-model``), ``HOME`` and ``TMPDIR`` inside ``home``. Its shell tool is
    ``run_shell_command`` (``{"command"}``).

    Qwen's side requests to the model are off: after each turn it asks for a memory
    extraction and a suggested next prompt (its own ``auto`` approval mode would also have
    the model classify each tool call: the ``acp:qwen`` preset starts it in ``default``,
    where it asks the ACP client, whose permission policy is the run's). Each would be a mock request no test scripted, and each costs a
    CPU-second. ``QWEN_CODE_NO_RELAUNCH`` keeps it from loading itself a second time, in a
    new Node process with a larger heap limit, as it keeps the children it starts itself:
    that process would have the same stdio and process group."""
    home = Path(home)
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / "tmp").mkdir(exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
        "ui": {"enableFollowupSuggestions": False},
    }
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return {
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "OPENAI_BASE_URL": base_url.rstrip("/") + "/v1",
        "OPENAI_API_KEY": "x",
        "OPENAI_MODEL": MODEL_ID,
        "QWEN_CODE_NO_RELAUNCH": "true",
    }


def write_claude_acp_config(home: Path, base_url: str) -> dict[str, str]:
    """Zed's Claude adapter as for ``write_claude_config`` (no retries), plus
    ``IS_SANDBOX=1``: the Claude Code it starts refuses to skip permissions as root
    otherwise (tests run as root in CI)."""
    env = write_claude_config(home, base_url, max_retries=0)
    env["IS_SANDBOX"] = "1"
    return env


def write_acp_opencode_config(home: Path, base_url: str) -> dict[str, str]:
    """OpenCode (``opencode acp``) as for ``write_opencode_config``, with the mock's model
    as its default in ``opencode.json`` (no ``-m`` on an ACP agent's command line)."""
    env = write_opencode_config(home, base_url)
    path = Path(env["OPENCODE_CONFIG"])
    config = json.loads(path.read_text())
    config["model"] = OPENCODE_MODEL
    path.write_text(json.dumps(config, indent=2) + "\n")
    return env


# A model codex knows: for one it does not, codex-acp says "Model metadata for … not found"
# as the agent's own words, ahead of its answer (codex exec keeps it out of the answer).
ACP_CODEX_MODEL = "gpt-5.4"


def write_acp_codex_config(home: Path, base_url: str) -> dict[str, str]:
    """Zed's Codex adapter (``codex-acp``) as for ``write_codex_config``, on
    :data:`ACP_CODEX_MODEL` (the mock answers any name), with codex's own sandbox off and
    no approvals asked, as our codex backend runs it: its sandbox needs bubblewrap, which a
    CI machine may not have (the shell tool then fails in a panic)."""
    env = write_codex_config(home / "codex", base_url, model=ACP_CODEX_MODEL)
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.write_text(
        'sandbox_mode = "danger-full-access"\napproval_policy = "never"\n' + path.read_text()
    )
    return env


ACP_WRITERS = {
    "gemini": write_acp_gemini_config,
    "qwen": write_qwen_config,
    "claude": write_claude_acp_config,
    "opencode": write_acp_opencode_config,
    "codex": write_acp_codex_config,
}
