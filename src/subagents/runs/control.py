"""Talking to a running run from any process: a message for its child (``send``) and a job's
budget reached (``tell_limit``), through the run's control endpoint (``control.sock``, the
supervisor's side is ``supervisor/live.py``). Everything that can be told without the
supervisor is refused here first, as one line: bad text, a run that has ended, a kind of
message its CLI cannot take, a run on a Ray node."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import controlsock
from subagents.core.files import read_json
from subagents.core.inputs import message_problem
from subagents.core.records import object_of
from subagents.core.upgrade import read_meta, read_result
from subagents.errors import MessageRefused, UsageError

if TYPE_CHECKING:
    from subagents.types import ControlRequest, JsonObject, LimitKind, MessageMode, Receipt

MODES = ("steer", "follow-up")
# How long a supervisor that is starting may take to open its endpoint, and to answer.
CONNECT_WITHIN = 10.0
ANSWER_WITHIN = 10.0


def check_message(text: str, mode: str) -> MessageMode:
    problem = message_problem(text)
    if problem:
        raise UsageError(f"text: {problem}", "text")
    if mode == "steer":
        return "steer"
    if mode == "follow-up":
        return "follow-up"
    raise UsageError(f"mode: must be 'steer' or 'follow-up', not {mode!r}", "mode")


def _ended(run_dir: Path) -> str | None:
    try:
        result = read_result(run_dir)
    except (OSError, ValueError):
        return None
    status = result.get("status") if isinstance(result, dict) else None
    return (
        f"run {run_dir.name} has ended ({status}): nothing takes messages now;"
        f" continue its conversation with `subagents continue {run_dir.name} TEXT`"
    )


def _refused_here(run_dir: Path, mode: str) -> str | None:
    """Why the run cannot take a ``mode`` message, as its records say; None: ask it."""
    ended = _ended(run_dir)
    if ended:
        return ended
    with contextlib.suppress(OSError, ValueError):
        meta = object_of(read_meta(run_dir))
        why = object_of(meta.get("refuse")).get(mode)
        if why:
            return f"run {run_dir.name}: {why}"
    with contextlib.suppress(OSError, ValueError):
        if object_of(read_json(run_dir / "supervisor.json")).get("runner") == "ray":
            return f"run {run_dir.name} runs on a Ray node: messages do not reach it there yet"
    return None


def _ask(run_dir: Path, payload: ControlRequest) -> JsonObject:
    """The supervisor's reply; waits (bounded) for a supervisor still starting."""
    deadline = time.monotonic() + CONNECT_WITHIN
    while True:
        try:
            return controlsock.request(run_dir, payload, ANSWER_WITHIN)
        except (FileNotFoundError, ConnectionRefusedError):
            ended = _ended(run_dir)
            if ended:
                raise MessageRefused(ended) from None
            if time.monotonic() >= deadline:
                raise MessageRefused(
                    f"run {run_dir.name}: its supervisor does not answer (it may be starting, or"
                    f" gone: see `subagents show {run_dir.name}`)"
                ) from None
            time.sleep(0.05)
        except (OSError, ValueError) as exc:
            ended = _ended(run_dir)
            raise MessageRefused(ended or f"run {run_dir.name}: no answer ({exc})") from None


def send(run_dir: Path, text: str, mode: str = "steer") -> Receipt:
    """Send ``text`` to the run's child: its receipt (``queued`` or ``delivered``). Raises
    ``MessageRefused`` (one line, nothing sent) or ``UsageError`` for bad text."""
    checked = check_message(text, mode)
    why = _refused_here(run_dir, checked)
    if why:
        raise MessageRefused(why)
    reply = _ask(run_dir, {"v": controlsock.VERSION, "op": "send", "mode": checked, "text": text})
    receipt = reply.get("receipt")
    reason = reply.get("reason")
    if receipt not in ("queued", "delivered"):
        raise MessageRefused(f"run {run_dir.name}: {reason or 'the message was refused'}")
    out: Receipt = {
        "runId": run_dir.name,
        "id": str(reply.get("id", "")),
        "mode": checked,
        "receipt": "delivered" if receipt == "delivered" else "queued",
    }
    if isinstance(reason, str) and reason:
        out["reason"] = reason
    return out


def tell_limit(run_dir: Path, kind: LimitKind, limit: float, used: float) -> bool:
    """Tell a run its job's budget is reached (it wraps up or stops); False when it could
    not be told (ended, on a Ray node, no endpoint)."""
    if _refused_here(run_dir, "limit"):
        return False
    try:
        reply = controlsock.request(
            run_dir,
            {"v": controlsock.VERSION, "op": "limit", "kind": kind, "limit": limit, "used": used},
            ANSWER_WITHIN,
        )
    except (OSError, ValueError):
        return False
    return reply.get("receipt") == "queued"
