"""Pointing each real agent CLI at the mock: config files and environment for pi, claude, codex, gemini, opencode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.demo.mockmodel.script import CODEX_MODEL, MODEL_ID, PROVIDER

if TYPE_CHECKING:
    from subagents.types import JsonObject

# --------------------------------------------------------------------------- pi


def write_pi_config(
    agent_dir: Path,
    base_url: str,
    *,
    retry: JsonObject | None = None,
    provider: str = PROVIDER,
    price: tuple[float, float] = (0.0, 0.0),
) -> dict[str, str]:
    """Point a pi child at the mock; return the env vars it needs.

    Writes ``agent_dir/models.json`` (provider ``mock``, or ``provider`` to stand in for a
    real one such as ``github-copilot``; model ``mock-model``, api ``openai-completions``,
    baseUrl ``<base_url>/v1``) and, when ``retry`` is given,
    ``agent_dir/settings.json`` with ``{"retry": retry}``.  pi's retry shape is
    ``{"enabled": bool, "maxRetries": int, "baseDelayMs": int,
    "provider": {"maxRetries": int, "timeoutMs": int, "maxRetryDelayMs": int}}``: the
    top-level keys drive pi's own ``auto_retry_start`` loop (defaults true/3/2000);
    ``provider.maxRetries`` is the OpenAI SDK's silent in-request retry count
    (default 2) -- set it to 0 to make every HTTP error visible to pi at once.
    ``price`` is the model's (input, output) USD per million tokens: pi prices each
    answer's usage with it (``usage.cost`` in its stream; 0 by default).

    The returned env: ``PI_CODING_AGENT_DIR``; ``PI_OFFLINE=1``,
    ``PI_SKIP_VERSION_CHECK=1`` and ``PI_TELEMETRY=0`` (no startup network); and
    ``HOME=agent_dir/home`` (pi also reads ``~/.agents/skills`` from the real home).
    """
    agent_dir = Path(agent_dir)
    agent_dir.mkdir(parents=True, exist_ok=True)
    home = agent_dir / "home"
    home.mkdir(exist_ok=True)
    models: JsonObject = {
        "providers": {
            provider: {
                "baseUrl": base_url.rstrip("/") + "/v1",
                "api": "openai-completions",
                "apiKey": "x",
                "models": [
                    {
                        "id": MODEL_ID,
                        "name": "Mock Model",
                        "reasoning": False,
                        "input": ["text"],
                        "contextWindow": 128000,
                        "maxTokens": 4096,
                        "cost": {
                            "input": price[0],
                            "output": price[1],
                            "cacheRead": 0,
                            "cacheWrite": 0,
                        },
                    }
                ],
            }
        }
    }
    (agent_dir / "models.json").write_text(json.dumps(models, indent=2) + "\n")
    if retry is not None:
        (agent_dir / "settings.json").write_text(json.dumps({"retry": retry}, indent=2) + "\n")
    return {
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "HOME": str(home),
    }


def pi_argv(task: str, *, tools: str | None = None, pi: str = "pi") -> list[str]:
    """The pi command line for a run against the mock (spawn it with stdin=/dev/null)."""
    argv = [pi, "--mode", "json", "-p", "--no-session", "--provider", PROVIDER, "--model", MODEL_ID]
    if tools:
        argv += ["--tools", tools]
    return [*argv, task]


def _write_json(path: Path, obj: JsonObject) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


# --------------------------------------------------------------------------- claude


def write_claude_config(
    home: Path, base_url: str, *, max_retries: int | None = None
) -> dict[str, str]:
    """Point a Claude Code child at the mock's Anthropic API; return the env it needs.

    Run ``claude -p --output-format stream-json --verbose --model claude-sonnet-4-5
    -- TASK`` (:data:`CLAUDE_MODEL`; any model name works) with this env.  Claude
    calls ``POST /v1/messages?beta=true`` (streaming) for each turn; its shell tool is
    ``Bash`` (``{"command", "description"}``).

    ``home`` becomes the child's ``HOME``, with ``.claude.json`` (onboarding done,
    no auto-update) and ``.claude/settings.json`` allowing ``Bash`` (so ``-p`` runs
    it without a permission prompt, whatever the command line says).

    The env: ``HOME``; ``ANTHROPIC_BASE_URL`` = ``base_url`` (no ``/v1``);
    ``ANTHROPIC_API_KEY=x``; ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
    ``DISABLE_AUTOUPDATER=1``, ``DISABLE_TELEMETRY=1``, ``DISABLE_ERROR_REPORTING=1``
    (no startup traffic elsewhere); ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDECODE`` and
    ``CLAUDE_CODE_ENTRYPOINT`` emptied (a parent Claude Code's must not leak in);
    and, when ``max_retries`` is given, ``CLAUDE_CODE_MAX_RETRIES`` (default 10
    with exponential backoff: pass 0 for a fast failure on HTTP errors).
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    _write_json(
        home / ".claude.json",
        {
            "hasCompletedOnboarding": True,
            "autoUpdates": False,
            "numStartups": 1,
            "bypassPermissionsModeAccepted": True,
        },
    )
    _write_json(home / ".claude" / "settings.json", {"permissions": {"allow": ["Bash"]}})
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url.rstrip("/"),
        "ANTHROPIC_API_KEY": "x",
        "ANTHROPIC_AUTH_TOKEN": "",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDECODE": "",
        "CLAUDE_CODE_ENTRYPOINT": "",
    }
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    return env


# --------------------------------------------------------------------------- codex


def write_codex_config(
    codex_home: Path, base_url: str, *, model: str = CODEX_MODEL, retries: int = 0
) -> dict[str, str]:
    """Point a Codex child at the mock's Responses API; return the env it needs.

    Run ``codex exec --json --skip-git-repo-check -m mock-model TASK``
    (:data:`CODEX_MODEL`, also the config's default model) with this env.  Codex calls
    ``POST /v1/responses`` (streaming) for each turn; its shell tool in 0.169 is
    ``exec_command`` (``{"cmd": ...}``), which the mock picks from the request's tools.
    Codex warns once that it has no metadata for ``mock-model`` (an ``error`` item in
    its stream; harmless).

    Writes ``codex_home/config.toml``: ``model``, ``model_provider = "mock"``, and
    ``[model_providers.mock]`` with ``base_url = <base_url>/v1``,
    ``wire_api = "responses"``, ``env_key = "MOCK_API_KEY"`` and
    ``request_max_retries`` / ``stream_max_retries`` = ``retries`` (default 0: an HTTP
    error fails the turn at once); plus no update check and no analytics.

    The env: ``CODEX_HOME``, ``MOCK_API_KEY=x``, ``OPENAI_API_KEY`` /
    ``OPENAI_BASE_URL`` / ``CODEX_API_KEY`` emptied (a parent's must not leak in), and
    ``HOME=codex_home/home``: codex captures its user's shell (a login shell, which reads
    ``~/.profile`` and ``~/.bashrc``) at the start of a session and runs commands through
    it, so a machine's own start-up files (a ``pyenv init`` that rehashes in the background,
    ~2 CPU-s each time) would run, more than once a run.
    """
    codex_home = Path(codex_home)
    (codex_home / "home").mkdir(parents=True, exist_ok=True)
    url = base_url.rstrip("/") + "/v1"
    (codex_home / "config.toml").write_text(
        f"model = {json.dumps(model)}\n"
        f'model_provider = "{PROVIDER}"\n'
        "check_for_update_on_startup = false\n"
        "\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        f"[model_providers.{PROVIDER}]\n"
        'name = "Mock"\n'
        f"base_url = {json.dumps(url)}\n"
        'wire_api = "responses"\n'
        'env_key = "MOCK_API_KEY"\n'
        f"request_max_retries = {int(retries)}\n"
        f"stream_max_retries = {int(retries)}\n"
    )
    return {
        "CODEX_HOME": str(codex_home),
        "HOME": str(codex_home / "home"),
        "MOCK_API_KEY": "x",
        "OPENAI_API_KEY": "",
        "OPENAI_BASE_URL": "",
        "CODEX_API_KEY": "",
    }


# --------------------------------------------------------------------------- gemini


def write_gemini_config(
    home: Path, base_url: str, *, max_attempts: int | None = None
) -> dict[str, str]:
    """Point a Gemini CLI child at the mock's Gemini API; return the env it needs.

    Run ``gemini -p TASK --output-format stream-json -m gemini-2.5-flash``
    (:data:`GEMINI_MODEL`) with this env.  Gemini calls
    ``POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`` for each
    turn; its shell tool is ``run_shell_command`` (``{"command", "description"}``).

    ``home`` becomes the child's ``HOME``, with ``.gemini/settings.json``: API-key
    auth (``security.auth.selectedType = "gemini-api-key"``), folder trust off, no
    usage statistics, telemetry or auto-update, ``run_shell_command`` allowed
    (``tools.allowed``: headless gemini otherwise refuses tools that need a
    confirmation), and, when ``max_attempts`` is given, ``general.maxAttempts``
    (default 10 with a 5 s backoff: pass 1 for a fast failure on HTTP 5xx; 4xx are not
    retried).

    The env: ``HOME``, ``GOOGLE_GEMINI_BASE_URL`` = ``base_url``, ``GEMINI_API_KEY=x``,
    ``GEMINI_CLI_TRUST_WORKSPACE=true`` (what ``--skip-trust`` sets),
    ``GEMINI_CLI_NO_RELAUNCH=true`` (no second node process), ``TMPDIR`` =
    ``home/tmp`` (gemini drops an error report file in the temp dir on every API
    error), and
    ``GOOGLE_API_KEY`` / ``GOOGLE_GENAI_USE_VERTEXAI`` / ``GOOGLE_CLOUD_PROJECT``
    emptied.
    """
    home = Path(home)
    general: JsonObject = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    if max_attempts is not None:
        general["maxAttempts"] = int(max_attempts)
    _write_json(
        home / ".gemini" / "settings.json",
        {
            "security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": False},
            },
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": general,
        },
    )
    (home / ".gemini" / "policies").mkdir(exist_ok=True)
    (home / ".gemini" / "policies" / "mock.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ndecision = "allow"\npriority = 100\n'
    )
    (home / "tmp").mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "GOOGLE_GEMINI_BASE_URL": base_url.rstrip("/"),
        "GEMINI_API_KEY": "x",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GOOGLE_API_KEY": "",
        "GOOGLE_GENAI_USE_VERTEXAI": "",
        "GOOGLE_CLOUD_PROJECT": "",
    }


# --------------------------------------------------------------------------- opencode


def write_opencode_config(
    config_dir: Path, base_url: str, *, price: tuple[float, float] | None = None
) -> dict[str, str]:
    """Point an OpenCode child at the mock's Chat Completions API; return its env.

    Run ``opencode run --format json -m mock/mock-model TASK`` (:data:`OPENCODE_MODEL`)
    with this env.  OpenCode calls ``POST /v1/chat/completions`` (streaming) through
    its bundled ``@ai-sdk/openai-compatible`` provider; its shell tool is ``bash``
    (``{"command"}``).  It retries HTTP 5xx/429 without end (2 s, 4 s, ... backoff):
    script a 4xx to see it fail.

    Writes ``config_dir/opencode.json`` with provider ``mock`` (``npm:
    "@ai-sdk/openai-compatible"``, ``options.baseURL = <base_url>/v1``, ``apiKey``,
    model ``mock-model``, priced at ``price`` = (input, output) USD per million tokens
    when given), outside the work tree, named by ``OPENCODE_CONFIG``.

    The env: ``OPENCODE_CONFIG``; ``HOME`` and ``XDG_{CONFIG,DATA,CACHE,STATE}_HOME``
    under ``config_dir/home`` (opencode keeps its database, logs and an npm cache
    there); ``OPENCODE_DISABLE_MODELS_FETCH=1`` (no models.dev download),
    ``OPENCODE_MODELS_PATH`` = ``config_dir/models.json``, an empty catalogue (the mock's
    model is the config's own; without it opencode builds its bundled catalogue of every
    provider's models on each start, about a third of a run's CPU),
    ``OPENCODE_DISABLE_AUTOUPDATE=1``, ``OPENCODE_DISABLE_SHARE=1``; and
    ``npm_config_offline=true``: opencode installs ``@opencode-ai/plugin`` into its config
    dir from the npm registry in the background on every start (no setting turns that off),
    and offline npm fails it at once, without a request.
    """
    config_dir = Path(config_dir)
    home = config_dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    model: JsonObject = {
        "name": "Mock Model",
        "tool_call": True,
        "limit": {"context": 128000, "output": 4096},
    }
    if price is not None:
        model["cost"] = {"input": price[0], "output": price[1]}
    config: JsonObject = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": base_url.rstrip("/") + "/v1", "apiKey": "x"},
                "models": {MODEL_ID: model},
            }
        },
    }
    _write_json(config_dir / "opencode.json", config)
    _write_json(config_dir / "models.json", {})
    return {
        "OPENCODE_CONFIG": str(config_dir / "opencode.json"),
        "OPENCODE_MODELS_PATH": str(config_dir / "models.json"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "npm_config_offline": "true",
    }
