"""`subagents doctor`: which agent CLIs are installed, which version, and whether
they look set up with credentials.

Credentials are only looked for (an environment variable is set, a login or
config file exists); nothing is read out, printed or sent anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from subagents.backends import AcpBackend, get_backend, known_backends, preset_names
from subagents.cli.nodecheck import node_too_old
from subagents.config import Settings
from subagents.errors import BackendError, UsageError
from subagents.runs import parse_version, read_version, resolve_binary
from subagents.types import JsonObject


@dataclass
class BackendCheck:
    name: str
    binary: str | None  # resolved path, or None when not found
    version: str | None  # first line of `<bin> --version`
    usable: bool
    reason: str  # short: what is missing, or what was found
    install_hint: str | None = None  # how to install it, when it is missing
    # Where its version stands against the tested ones, and what a run of it can do
    # (Backend.support: stream, continue, steer, follow-up, budgets, structured output).
    tested: str | None = None
    supports: dict[str, str] | None = None
    # An ACP agent (acp:NAME): what it answered to initialize.
    acp: JsonObject | None = None


# --------------------------------------------------------------------------- credentials


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _set(env: Mapping[str, str], *names: str) -> str | None:
    """The first of ``names`` set to a non-empty value (the name, never the value)."""
    for name in names:
        if env.get(name, "").strip():
            return name
    return None


def _first_file(*paths: Path) -> Path | None:
    for path in paths:
        if path.is_file():
            return path
    return None


def _tilde(path: Path, env: Mapping[str, str]) -> str:
    home = str(_home(env))
    text = str(path)
    return (
        "~" + text[len(home) :]
        if home not in ("", "/") and text.startswith(home + os.sep)
        else text
    )


_PROVIDER_KEYS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "CEREBRAS_API_KEY",
    "AZURE_OPENAI_API_KEY",
)

_NO_CREDENTIALS = "no credentials found"


def _claude(env: Mapping[str, str]) -> tuple[bool, str]:
    found = _set(env, "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    if found:
        return True, f"{found} is set"
    found = _set(
        env, "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"
    )
    if found:
        return True, f"{found} is set (cloud provider credentials not checked)"
    config_dir = (
        Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else _home(env) / ".claude"
    )
    creds = _first_file(config_dir / ".credentials.json")
    if creds:
        return True, f"logged in ({_tilde(creds, env)})"
    if config_dir.is_dir():
        return True, f"{_tilde(config_dir, env)} exists (login not verified)"
    return False, f"{_NO_CREDENTIALS}: set ANTHROPIC_API_KEY or run `claude` once to log in"


def _codex(env: Mapping[str, str]) -> tuple[bool, str]:
    found = _set(env, "OPENAI_API_KEY", "CODEX_API_KEY")
    if found:
        return True, f"{found} is set"
    codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else _home(env) / ".codex"
    auth = _first_file(codex_home / "auth.json")
    if auth:
        return True, f"logged in ({_tilde(auth, env)})"
    config = _first_file(codex_home / "config.toml")
    if config:
        return True, f"{_tilde(config, env)} present (provider credentials not verified)"
    return False, f"{_NO_CREDENTIALS}: set OPENAI_API_KEY or run `codex login`"


def _gemini(env: Mapping[str, str]) -> tuple[bool, str]:
    found = _set(env, "GEMINI_API_KEY", "GOOGLE_API_KEY")
    if found:
        return True, f"{found} is set"
    if _set(env, "GOOGLE_GENAI_USE_VERTEXAI") and _set(env, "GOOGLE_CLOUD_PROJECT"):
        return True, "Vertex AI configured (GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_CLOUD_PROJECT)"
    gemini_dir = _home(env) / ".gemini"
    creds = _first_file(gemini_dir / "oauth_creds.json")
    if creds:
        return True, f"logged in ({_tilde(creds, env)})"
    settings = _first_file(gemini_dir / "settings.json")
    if settings:
        return True, f"{_tilde(settings, env)} present (login not verified)"
    return False, f"{_NO_CREDENTIALS}: set GEMINI_API_KEY or run `gemini` once to log in"


def _opencode(env: Mapping[str, str]) -> tuple[bool, str]:
    data = (
        Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else _home(env) / ".local" / "share"
    )
    auth = _first_file(data / "opencode" / "auth.json")
    if auth:
        return True, f"logged in ({_tilde(auth, env)})"
    found = _set(env, *_PROVIDER_KEYS)
    if found:
        return True, f"{found} is set"
    config_home = (
        Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else _home(env) / ".config"
    )
    configured = [Path(env["OPENCODE_CONFIG"])] if env.get("OPENCODE_CONFIG") else []
    config = _first_file(
        *configured,
        config_home / "opencode" / "opencode.json",
        config_home / "opencode" / "opencode.jsonc",
    )
    if config:
        return True, f"{_tilde(config, env)} present (provider credentials not verified)"
    return False, f"{_NO_CREDENTIALS}: run `opencode auth login` or set a provider API key"


def _pi(env: Mapping[str, str]) -> tuple[bool, str]:
    agent_dir = env.get("PI_CODING_AGENT_DIR")
    base = Path(agent_dir) if agent_dir else _home(env) / ".pi" / "agent"
    found_file = _first_file(base / "models.json", base / "auth.json")
    if found_file:
        return True, f"{_tilde(found_file, env)} present"
    if agent_dir and base.is_dir():
        return True, f"PI_CODING_AGENT_DIR is set ({agent_dir}; credentials not verified)"
    found = _set(env, *_PROVIDER_KEYS)
    if found:
        return True, f"{found} is set"
    return False, f"{_NO_CREDENTIALS}: set a provider API key or configure ~/.pi/agent/models.json"


_CREDENTIALS: dict[str, Callable[[Mapping[str, str]], tuple[bool, str]]] = {
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "opencode": _opencode,
    "pi": _pi,
}


# --------------------------------------------------------------------------- checks


def check_backend(
    name: str, env: Mapping[str, str] | None = None, settings: Settings | None = None
) -> BackendCheck:
    env = os.environ if env is None else env
    try:
        backend = get_backend(name)
    except BackendError as exc:
        return BackendCheck(name, None, None, False, str(exc))
    except Exception as exc:  # a broken plugin must not break doctor
        return BackendCheck(name, None, None, False, f"could not load the backend: {exc!r}")
    hint = backend.install_hint or None
    settings = settings or Settings()
    preset = settings.acp.get(name[4:]) if isinstance(backend, AcpBackend) else None
    if isinstance(backend, AcpBackend) and preset is not None:
        backend.configure(preset.command, preset.env)
    try:
        binary = resolve_binary(backend, settings, env)
    except UsageError as exc:
        configured = env.get(backend.binary_env_var()) or settings.bins.get(backend.name)
        # A configured path that is wrong says so; a plain miss gets the short story.
        reason = str(exc) if configured else f"{backend.default_binary!r} not found on PATH"
        return BackendCheck(name, None, None, False, reason, hint)
    version, problem = read_version(backend.version_argv(binary), env)
    old_node = node_too_old(binary, env)
    if old_node is not None:
        return BackendCheck(name, binary, version, False, old_node, hint)
    if problem is not None:
        return BackendCheck(name, binary, None, False, problem, hint)
    creds = backend.credentials_hint(env)
    if creds is None:
        check = _CREDENTIALS.get(backend.name) or _CREDENTIALS.get(name)
        creds = check(env) if check else (True, "credentials not checked")
    usable, reason = creds
    number = parse_version(version or "")
    found = BackendCheck(
        name,
        binary,
        version,
        usable,
        reason,
        tested=backend.tested(number),
        supports=backend.support(number),
    )
    if isinstance(backend, AcpBackend):
        _initialize(found, backend, binary, env, settings)
    return found


def _initialize(
    check: BackendCheck,
    backend: AcpBackend,
    binary: str,
    env: Mapping[str, str],
    settings: Settings,
) -> None:
    """An ACP agent's answer to initialize: what it advertises, or why it is not usable."""
    from subagents.cli.acpprobe import advertised, probe

    argv = [binary, *backend.command[1:]]
    result, problem = probe(argv, {**env, **backend.env}, min(settings.acp_init_timeout, 30.0))
    if result is None:
        check.usable, check.reason = False, problem or "no answer to initialize"
        return
    check.acp = result
    info = result.get("agentInfo")
    said = ""
    if isinstance(info, dict) and info.get("name"):
        said = f"{info.get('name')} {info.get('version') or ''}".strip() + "; "
    if isinstance(info, dict) and isinstance(info.get("version"), str) and not check.version:
        # An adapter without --version names its version here.
        check.version = str(info["version"])
        number = parse_version(check.version)
        check.tested, check.supports = backend.tested(number), backend.support(number)
    check.reason = f"{said}advertises {advertised(result)}"


def check_backends(
    env: Mapping[str, str] | None = None, settings: Settings | None = None
) -> list[BackendCheck]:
    """Every known backend (built-in and plugins), in name order; version checks run in parallel."""
    env = os.environ if env is None else env
    settings = settings or Settings()
    # ``acp`` alone names no agent: each preset (built in, or the user's) is one.
    names = [n for n in known_backends() if n != "acp"]
    names = sorted([*names, *(f"acp:{p}" for p in {*preset_names(), *settings.acp})])
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return list(pool.map(lambda n: check_backend(n, env, settings), names))


def render_text(checks: list[BackendCheck]) -> str:
    """A plain aligned table, one backend a line, then install hints for missing ones."""
    header = ("BACKEND", "STATUS", "VERSION", "BINARY", "NOTE")
    rows = [header]
    for c in checks:
        status = "ok" if c.usable else ("missing" if c.binary is None else "not ready")
        rows.append((c.name, status, c.version or "-", c.binary or "-", c.reason))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    ]
    hints = [f"  {c.name}: {c.install_hint}" for c in checks if c.binary is None and c.install_hint]
    if hints:
        lines += ["", "To install:", *hints]
    found = [c for c in checks if c.supports is not None]
    if found:
        lines += ["", "What runs of each can do (docs/backends.md):", *_support_table(found)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _support_table(checks: list[BackendCheck]) -> list[str]:
    header = ("BACKEND", "VERSION", "CONTINUE", "STEER", "FOLLOW-UP", "BUDGETS")
    rows = [header]
    for c in checks:
        s = c.supports or {}
        shown = parse_version(c.version or "") or c.version or "-"
        version = f"{shown} ({c.tested})" if c.tested else shown
        rows.append((c.name, version, s["continue"], s["steer"], s["follow-up"], s["budgets"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    ]


def warm_server_line(env: Mapping[str, str]) -> str:
    """Whether this interpreter's warm command server runs (cli/warmserver.py)."""
    import time

    from subagents.cli import warmclient
    from subagents.present.figures import elapsed

    if env.get("SUBAGENTS_WARM") == "0":
        return "Warm command server: off (SUBAGENTS_WARM=0)"
    path = warmclient.socket_name(env)
    found = warmclient.ping(path) if path is not None else None
    if found is None:
        return "Warm command server: none running (a scripted `subagents run` starts one)"
    pid, started, served = found
    age = elapsed(max(0.0, time.time() - started))
    return f"Warm command server: pid {pid}, up {age}, {served} commands served ({path})"
