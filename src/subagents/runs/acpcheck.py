"""An ACP run's request, checked: which agent (``--acp-command``, a user's ``[acp.NAME]``
preset, or a built-in one) and the permission policy, as the run's ``AcpRecord``."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from subagents.backends import AcpBackend, Backend, preset_names
from subagents.config import Settings
from subagents.errors import UsageError
from subagents.runs.request import RunRequest

if TYPE_CHECKING:
    from subagents.types import AcpPermissions, AcpRecord

# ``ask``: the same as ``--approvals ask`` (runs/approvalcheck.py), the inbox decides.
POLICIES: tuple[AcpPermissions, ...] = ("allow", "deny", "ask")


def acp_record(backend: Backend, req: RunRequest, settings: Settings) -> AcpRecord | None:
    """The ACP part of a run of ``backend`` (configured with its agent's command here);
    None for any other backend, which takes neither ACP option."""
    if not isinstance(backend, AcpBackend):
        for name, value in (("acp_command", req.acp_command), ("permissions", req.permissions)):
            if value is not None:
                raise _refused(name, "only for ACP agents (--backend acp or acp:NAME)")
        return None
    if req.acp_command is not None:
        try:
            words = shlex.split(req.acp_command)
        except ValueError as exc:
            raise _refused("acp_command", str(exc)) from None
        if not words:
            raise _refused("acp_command", "it names no program")
        backend.configure(
            words, settings.acp[backend.preset].env if backend.preset in settings.acp else None
        )
    elif backend.preset is not None and backend.preset in settings.acp:
        preset = settings.acp[backend.preset]
        backend.configure(preset.command, preset.env)
    elif backend.preset is None:
        known = ", ".join(f"acp:{n}" for n in sorted({*preset_names(), *settings.acp}))
        raise UsageError(
            f'--backend acp needs --acp-command (e.g. "qwen --acp"), or a preset: {known}',
            "backend",
        )
    elif not backend.command:
        known = ", ".join(f"acp:{n}" for n in sorted({*preset_names(), *settings.acp}))
        raise UsageError(
            f"unknown ACP preset {backend.preset!r} (known: {known}; add your own as"
            f" [acp.{backend.preset}] command = [...] in config)",
            "backend",
        )
    policy = req.permissions or "allow"
    if policy not in POLICIES:
        raise _refused("permissions", f"unknown policy {policy!r} (use allow, deny or ask)")
    if policy != "allow" and req.approvals not in (None, "auto"):
        raise _refused("permissions", "--approvals decides the permissions: give one of them")
    return {
        "command": list(backend.command),
        "permissions": policy,
        "initTimeout": settings.acp_init_timeout,
        "files": backend.serve_files,
    }


def _refused(name: str, problem: str) -> UsageError:
    # (the problem alone: its place is named by each surface from the field)
    return UsageError(problem, name)
