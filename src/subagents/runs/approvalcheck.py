"""A run's approval policy, checked (docs/approvals.md): ``--approvals`` and its rules as the
run's ``ApprovalPolicy`` (None: ``auto``, the CLI's own headless mode), refused in one line
for a backend whose CLI has no way to ask."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.backends import Backend
from subagents.errors import UsageError
from subagents.runs.request import RunRequest

if TYPE_CHECKING:
    from subagents.config import Settings
    from subagents.types import ApprovalPolicy

# How long an item waits for a decision before it is denied, by default (seconds).
DEFAULT_TIMEOUT = 1800.0


def approval_policy(
    backend: Backend, req: RunRequest, settings: Settings | None = None
) -> ApprovalPolicy | None:
    """The run's policy; under ``parent``, with what the user lets the parent allow
    (``parent_may_approve``: the settings', never the request's, so a parent cannot widen
    its own bound)."""
    policy = req.approvals or "auto"
    if policy == "auto" and req.permissions == "ask":  # an ACP agent's older word for it
        policy = "ask"
    if policy == "auto":
        for name, value in (
            ("approve", req.approve),
            ("approve_edits_in_tree", req.approve_edits_in_tree),
            ("approval_timeout", req.approval_timeout),
        ):
            if value is not None:
                raise UsageError("only with --approvals ask, parent or deny", name)
        return None
    if not backend.asks:
        raise UsageError(
            f"{backend.name} has no way to ask before it acts: use --approvals auto"
            " (docs/approvals.md lists the backends that ask)",
            "approvals",
        )
    from subagents.core.approve import split_rules  # with --approvals only

    checked: ApprovalPolicy = {
        "policy": policy,
        "rules": split_rules(req.approve or ""),
        "editsInTree": bool(req.approve_edits_in_tree),
        "timeout": req.approval_timeout or DEFAULT_TIMEOUT,
    }
    bound = settings.parent_may_approve if settings is not None else None
    if policy == "parent" and bound is not None:
        checked["parentMay"] = split_rules(bound)
    return checked
