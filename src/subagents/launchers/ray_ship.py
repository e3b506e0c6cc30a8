"""A repository that travels to a Ray node, from the caller's side (``--isolate worktree``
on Ray without ``--ray-shared-cwd``).

What goes: the history up to the run's base commit (``HEAD`` when it was asked for) as one
git pack, sent to a node only when the node does not have that commit yet (its host keeps
every commit it was sent), built here once per commit (the last one is kept in memory),
and the working tree's uncommitted changes as a patch, per run (kept in the run directory
as ``uncommitted.patch``). What comes back: the run's branch as a pack, stored in the
caller's repository as ``subagents/<run-id>``, so ``apply``, ``rm`` and ``prune
--branches`` work as for a local isolated run. Nothing of the user's working tree or index
changes.

Limits (MiB, from the environment): ``SUBAGENTS_RAY_MAX_PACK_MB`` (default 512) for the
history, ``SUBAGENTS_RAY_MAX_PATCH_MB`` (default 64) for the uncommitted changes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subagents import worktree as wt
from subagents.core.files import open_private
from subagents.errors import LaunchError, WorktreeError

if TYPE_CHECKING:
    from subagents.launchers.ray_handles import HostHandle, Ray
    from subagents.types import JsonObject, RunResult, ShipmentRecord, WorktreeRecord

SHIPPED_PATCH = "uncommitted.patch"
PACK_LIMIT_MB = 512
PATCH_LIMIT_MB = 64
# How long sending a commit to a node (or waiting for another caller sending it) may take.
SEND_PATIENCE = 600.0
_lock = threading.Lock()
# The last pack built: ((repository, commit), pack).
_last: tuple[tuple[str, str], bytes] | None = None
# Per (node, commit): one send at a time from this process, and which were done.
_sending: dict[tuple[str, str], threading.Lock] = {}
_sent: set[tuple[str, str]] = set()
# What this process built and sent (bench/bench_ray.py reads it).
COUNTS = {"packsBuilt": 0, "packsSent": 0}


def _limit(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default))) << 20
    except ValueError:
        return default << 20


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@dataclass
class Shipment:
    """What travels with one run: the repository (here), its base commit, the patch."""

    root: Path
    commit: str
    patch: bytes

    def for_host(self) -> ShipmentRecord:
        return {"commit": self.commit, "patch": self.patch or None}


def prepare(run_dir: Path, record: Mapping[str, object]) -> Shipment:
    """The run's shipment, checked against the limits (``LaunchError``, one line): its
    patch taken now (and kept in the run dir), its pack built unless the last one was of
    this commit. A run taken over by another process sends the patch its first sending
    took."""
    root, commit = Path(str(record["repo"])), str(record["base"])
    kept = run_dir / SHIPPED_PATCH
    try:
        if kept.exists():
            patch = kept.read_bytes()
        else:
            patch = wt.uncommitted_patch(root)
            limit = _limit("SUBAGENTS_RAY_MAX_PATCH_MB", PATCH_LIMIT_MB)
            if len(patch) > limit:
                raise LaunchError(
                    f"the uncommitted changes in {root} are {_mib(len(patch))} as a patch, over"
                    f" the {_mib(limit)} a run may take to a Ray node"
                    " (SUBAGENTS_RAY_MAX_PATCH_MB): commit them, or leave some out"
                )
            with open_private(kept, "wb") as f:
                f.write(patch)
        pack_of(root, commit)
    except WorktreeError as exc:
        raise LaunchError(f"could not send {root} to a Ray node: {exc}") from None
    return Shipment(root, commit, patch)


def pack_of(root: Path, commit: str) -> bytes:
    """The history up to ``commit`` as one pack, checked against the limit."""
    global _last
    key = (str(root), commit)
    with _lock:
        if _last is not None and _last[0] == key:
            return _last[1]
        data = wt.pack(root, commit)
        COUNTS["packsBuilt"] += 1
        limit = _limit("SUBAGENTS_RAY_MAX_PACK_MB", PACK_LIMIT_MB)
        if len(data) > limit:
            raise LaunchError(
                f"the history of {root} up to {commit[:12]} is {_mib(len(data))} as a git"
                f" pack, over the {_mib(limit)} a run may send to a Ray node"
                " (SUBAGENTS_RAY_MAX_PACK_MB)"
            )
        _last = (key, data)
        return data


def send(ray: Ray, host: HostHandle, node: str, shipment: Shipment) -> None:
    """Make sure ``node`` has the shipment's commit: sent once per node, whoever asks."""
    key = (node, shipment.commit)
    with _lock:
        lock = _sending.setdefault(key, threading.Lock())
    with lock:
        if key in _sent:
            return
        if ray.get(host.want_commit.remote(shipment.commit), timeout=SEND_PATIENCE):
            data = pack_of(shipment.root, shipment.commit)
            ray.get(host.receive_pack.remote(shipment.commit, data), timeout=SEND_PATIENCE)
            COUNTS["packsSent"] += 1
        _sent.add(key)


def bring_back(
    ray: Ray, host: HostHandle, run_id: str, result: RunResult, record: JsonObject, run_dir: Path
) -> None:
    """A shipped run's ``result.worktree`` made the caller's: its branch stored in the
    caller's repository (when the run changed something), its paths here."""
    got = result.get("worktree")
    if not isinstance(got, dict):
        return
    root = Path(str(record["repo"]))
    back: WorktreeRecord = {
        **got,
        "repo": str(root),
        "path": str(record["path"]),
        "shipped": True,
        "patch": str(run_dir / wt.PATCH_FILE) if got.get("patch") else None,
    }
    if got.get("kept") and not got.get("error"):
        try:
            data = ray.get(host.changes.remote(run_id, str(record["base"])), timeout=SEND_PATIENCE)
            wt.unpack(root, data, f"refs/heads/{got['branch']}", str(got["commit"]), new=True)
        except Exception as exc:
            back["kept"] = False
            back["error"] = (
                f"the run's changes could not be brought back from its Ray node ({exc});"
                f" they are in {run_dir / wt.PATCH_FILE}"
            )
    result["worktree"] = back
