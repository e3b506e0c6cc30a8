"""Where a Ray node keeps its runs, and the names a caller and a node's host agree on:
the host actors' and the runs' units' names, the artifacts relayed, the files sent with a
run; a caller's spec made to run on the node (``localize``), and a run's directory
dropped there with what a travelling repository left of it (``drop_run_dir``). Shared by
both sides (ray_relay.py and ray_pool.py on the caller's, ray_host.py on the node's).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import stamps
from subagents.core.records import list_of
from subagents.supervisor.handover import LOG_FILE
from subagents.worktree import PATCH_FILE, STAT_FILE

if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, WorktreeRecord

# What a caller and a host must agree on; a host that says otherwise is replaced
# (`subagents ray down`).
PROTOCOL = 2
HOST_PREFIX = "subagents-host-"
PLACEMENT_PREFIX = "subagents-run-"
# The artifacts relayed to the caller, in the order they are pulled.
RELAYED = (
    "events.jsonl",
    stamps.NAME,  # (before the transcript: a chunk relayed finds its time there)
    "transcript.md",
    "raw.jsonl",
    "stderr.log",
    LOG_FILE,
    PATCH_FILE,
    STAT_FILE,
)


def host_name(node_id: str) -> str:
    return HOST_PREFIX + node_id


def placement_name(run_id: str) -> str:
    return PLACEMENT_PREFIX + run_id


def node_runs_dir() -> Path:
    """Where runs live on a machine: ``$SUBAGENTS_RAY_RUNS``, else a private temp directory;
    each node's host keeps its runs in ``<node id>/<run id>`` there."""
    configured = os.environ.get("SUBAGENTS_RAY_RUNS")
    return (
        Path(configured)
        if configured
        else Path(tempfile.gettempdir()) / f"subagents-ray-{os.getuid()}"
    )


def cache_dir() -> Path:
    """The cache repository of the machine's nodes: every commit sent to one of them."""
    return node_runs_dir() / "repo.git"


def remove_placement(run_id: str) -> None:
    """Release the run's unit (its placement group), if it still holds one."""
    from ray.util import get_placement_group, remove_placement_group

    try:
        group = get_placement_group(placement_name(run_id))
    except ValueError:
        return
    with contextlib.suppress(Exception):  # removed meanwhile by another
        remove_placement_group(group)


# The spec's fields that name a file of the caller's run directory (sent with the run).
_PATH_FIELDS = ("sessionDir", "stdinFile")
# The files of the caller's run directory a run reads: a system prompt, a long task.
SENT_FILES = ("system-prompt.md", "task.md")


def localize(meta: JsonObject, caller_dir: str, node_dir: Path) -> JsonObject:
    """The caller's spec, made to run here: its run-dir paths (a system prompt file, a
    task file, a shipped run's worktree) point into the node's run dir, and an agent CLI
    the caller found at a path this node does not have is looked up on this node's PATH
    by name. (An isolated run on a shared filesystem keeps the worktree the caller made.)"""

    def here(value: JsonValue) -> JsonValue:
        if isinstance(value, str) and (
            value == caller_dir or value.startswith(caller_dir + os.sep)
        ):
            return str(node_dir) + value[len(caller_dir) :]
        return value

    argv = [here(a) for a in list_of(meta["argv"])]
    if argv and isinstance(argv[0], str) and not os.access(argv[0], os.X_OK):
        found = shutil.which(os.path.basename(argv[0]))
        if found:
            argv[0] = found
    local: JsonObject = {**meta, "argv": argv, "echo": False, "keepWorktree": False}
    for key in _PATH_FIELDS:
        local[key] = here(meta.get(key))
    worktree = meta.get("worktree")
    if isinstance(worktree, dict) and worktree.get("shipped"):
        local["cwd"] = here(meta.get("cwd"))
        local["worktree"] = {**worktree, "path": here(worktree.get("path"))}
    return local


def drop_run_dir(run_dir: Path) -> None:
    """A run's directory on this node, with its worktree and branch in the cache
    repository when its repository was sent here."""
    try:
        shipped = bool(json.loads((run_dir / "meta.json").read_bytes())["worktree"]["shipped"])
    except (OSError, ValueError, KeyError, TypeError):
        shipped = False
    if shipped:
        from subagents.worktree import WORKTREE_DIR, branch_name, discard_worktree

        record: WorktreeRecord = {
            "repo": str(cache_dir()),
            "path": str(run_dir / WORKTREE_DIR),
            "branch": branch_name(run_dir.name),
            "base": "",
            "subdir": ".",
        }
        with contextlib.suppress(Exception):
            discard_worktree(record)
    shutil.rmtree(run_dir, ignore_errors=True)
