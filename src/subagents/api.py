"""The public Python API: ``run`` (blocking) and ``start`` (a handle)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagents import runs


def start(
    task: str,
    *,
    backend: str | None = None,
    model: str | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    tools: list[str] | None = None,
    system_prompt: str | None = None,
    env: dict[str, str] | None = None,
) -> runs.RunHandle:
    """Start one run in the background and return its handle (``wait()``, ``stop()``)."""
    req = runs.RunRequest(
        task=task, backend=backend, model=model, cwd=str(cwd) if cwd else None, timeout=timeout,
        tools=tools, system_prompt=system_prompt, env=dict(env or {}),
    )
    return runs.start(req, runs.limits_from_settings(Path(cwd) if cwd else None))


def run(
    task: str,
    *,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run one task to the end and return its ``result.json`` as a dict."""
    handle = start(task, **kwargs)
    try:
        result = handle.wait(on_event=on_event)
    except BaseException:
        handle.stop()
        raise
    assert result is not None
    return result
