"""Where state lives: ``$SUBAGENTS_HOME`` or the platform's user state dir."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def state_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get("SUBAGENTS_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    from platformdirs import user_state_dir

    return Path(user_state_dir("subagents"))


def runs_dir(home: Path) -> Path:
    return home / "runs"


def jobs_dir(home: Path) -> Path:
    return home / "jobs"


def sessions_dir(home: Path) -> Path:
    return home / "sessions"


# Written by `stop` (any process) into a job's directory: the job starts no more runs,
# and each of its runs' monitors stops its run. Part of the job directory's contract.
CANCEL_FILE = "cancel-requested"


def cancel_file(home: Path, job_id: str) -> Path:
    return jobs_dir(home) / job_id / CANCEL_FILE


def working_dir() -> Path:
    """This process's working directory; a ``UsageError`` naming ``cwd`` when it no longer
    exists (deleted under a shell still in it), where ``Path.cwd()`` would raise a bare
    "no such file or directory"."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        from subagents.errors import UsageError

        raise UsageError(
            "cwd: the current directory no longer exists (deleted?): change to one that"
            " does, or pass --cwd",
            "cwd",
        ) from None
