"""The caller's side of the ray launcher: a run takes a unit of its backend on some node
(ray_pool.py), its node's host actor starts its supervisor (ray_host.py), and a relay
brings what the supervisor writes into the caller's run directory, so the monitor,
``logs -f``, progress and MCP read the same files as locally.

Placement: a node advertises the custom resource ``subagents-<backend>`` (its count is how
many such children it runs at once); each run takes one unit while it runs. When no node
of the cluster offers it, the run fails at once instead of waiting for a node that may
never come; a run waiting for a busy node's unit waits.

The relay is a thread of the caller: it places the run, has its node's host start it
(sending the repository first when it travels: ray_ship.py), long-polls the host for the
artifacts' new bytes, appends them here, and when the supervisor's ``result.json``
arrives, publishes it here (atomically, once) with ``executor: {kind: "ray", node}``,
then has the host drop its copy. Offsets are the sizes of the caller's files, so a relay
started later (a restarted job driver, :meth:`RayLauncher.reattach`) takes up exactly
where the last one stopped.

A run's ``supervisor.json`` names its host actor (None until the run is on a node), the
cluster's address, the node, and its relay: the process relaying it (pid and start
time), never taken for a supervisor. What the record says of the actor is this module's
business alone: the rest of the engine asks the ``RayRun`` handle.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import procs
from subagents.core.files import open_private, publish_once
from subagents.core.records import process_identity
from subagents.core.upgrade import read_meta
from subagents.errors import LaunchError, SubagentsError, UsageError
from subagents.launchers.base import RAY_MISSING, write_record
from subagents.launchers.ray_node import (
    RELAYED,
    SENT_FILES,
    host_name,
    placement_name,
)
from subagents.launchers.ray_pool import (
    check_offered,
    connect,
    find_host,
    first_line,
    forget_host,
    host_for,
    known_host,
    node_state,
    placed_on,
    release,
    reserve,
)
from subagents.supervisor.result import artifact_paths
from subagents.worktree import PATCH_FILE

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.launchers.ray_handles import HostHandle, Ray
    from subagents.launchers.ray_ship import Shipment
    from subagents.supervisor.spec import RunSpec
    from subagents.types import (
        ExecutorPlace,
        HostPullReply,
        HostStartReply,
        JsonObject,
        ProcessIdentity,
        RaySupervisorRecord,
        RunResult,
        RunStarted,
    )

PULL_WAIT = 0.5
# How long one call may take beyond its wait before the node is looked at (a busy node),
# and how long a run waits for a unit between looks at whether any node can give one.
PULL_PATIENCE = 10.0
# A run waiting for a unit looks this often whether it was stopped meanwhile (whole
# seconds: Ray's wait truncates a fraction, 0.5 would not wait at all).
PLACE_LOOK = 1
# Starting a run on its host (a first run on a node waits for the host to start).
START_PATIENCE = 180.0
# A host that is unreachable (not known dead) gets this long to come back.
UNAVAILABLE_PATIENCE = 30.0
KILL_PATIENCE = 10.0


class RayLauncher:
    """Runs on a Ray cluster: a unit of the backend on some node, whose host runs it."""

    name = "ray"
    keeps_spares = False
    echo = False

    def __init__(self, address: str | None = None) -> None:
        self.address = address

    def check(self) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError(RAY_MISSING, "executor") from None

    def launch(
        self, run_dir: Path, spec: RunSpec, *, stopped: Callable[[], bool] | None = None
    ) -> RayRun:
        ray = connect(self.address, stopped=stopped)
        check_offered(ray, spec.backend)
        shipment = None
        if spec.worktree and spec.worktree.get("shipped"):
            from subagents.launchers import ray_ship

            shipment = ray_ship.prepare(run_dir, spec.worktree)
        run = RayRun(run_dir, None, self.address)
        run.follow(ray, shipment, fresh=True)
        return run

    def reattach(self, run_dir: Path, record: JsonObject, *, follow: bool = True) -> RayRun:
        run = RayRun.from_record(run_dir, record)
        if follow:
            run.follow()
        return run


class RayRun:
    """A run on a Ray node: its host actor (by name, in the cluster at ``address``; None
    while it waits for a node), the node once known, and its relay, the process relaying
    its artifacts here. When that is this process, a thread of it relays (``follow``);
    else the run is only looked at from here, and nothing connects to the cluster until
    it is stopped or abandoned."""

    launcher = "ray"

    def __init__(
        self,
        run_dir: Path,
        actor: str | None,
        address: str | None,
        node: str | None = None,
        relay: ProcessIdentity | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.run_id = run_dir.name
        self.actor = actor
        self.address = address
        self.node = node
        # None until a process relays it (a record that names none: nothing relays it).
        self.relay = relay
        self._ray: Ray | None = None
        self._host: HostHandle | None = None
        self._shipment: Shipment | None = None
        self._fresh = False
        self._thread: threading.Thread | None = None
        self._lost: str | None = None
        self._detached = threading.Event()
        # A stop asked for before the run was on a node: the relay gives it up there.
        self._stop: int | None = None

    @classmethod
    def from_record(cls, run_dir: Path, record: JsonObject) -> RayRun:
        """The run its ``supervisor.json`` names (ValueError for one that names none)."""
        # A record written before the launchers were one seam said where the run was under
        # "executor", and its relay's pid and start time as "pid" and "createTime".
        where = record.get("ray") or record.get("executor")
        if not isinstance(where, dict):
            raise ValueError("supervisor.json names no Ray run")
        relay = record.get("relay")
        if not isinstance(relay, dict):
            relay = record
        actor, address, node = where.get("actor"), where.get("address"), where.get("node")
        return cls(
            run_dir,
            actor if isinstance(actor, str) and actor else None,
            address if isinstance(address, str) and address else None,
            node if isinstance(node, str) else None,
            process_identity(relay),
        )

    def record(self) -> RaySupervisorRecord:
        return {
            "runner": "ray",
            "ray": {"actor": self.actor, "address": self.address, "node": self.node},
            "relay": self.relay,
        }

    # ---- the Launched interface ------------------------------------------

    def alive(self) -> bool:
        if self._thread is not None:
            return self._thread.is_alive()
        return self.relay is not None and procs.is_alive(self.relay)

    def terminate(self, sig: int) -> None:
        if self._thread is None and not (self.relay is not None and procs.is_alive(self.relay)):
            # Its relay died with its driver: relay it from here, so its result still comes
            # back and its unit is released.
            self.follow()
        if self.node is None:
            self._stop = sig  # not on a node yet: the relay gives it up
            return
        # The supervisor on the node gets the signal and kills its child's group there.
        with contextlib.suppress(Exception):
            ray = self._ray or connect(self.address)
            host = self._host or find_host(ray, self.node)
            if host is not None:
                ray.get(host.stop.remote(self.run_id, int(sig)), timeout=PULL_PATIENCE)

    def lost(self) -> str | None:
        return self._lost

    def where(self) -> ExecutorPlace:
        return {"kind": "ray", "node": self.node}

    def orphaned(self, child: RunStarted | None, run_id: str) -> str | None:
        """The child's pid is the node's: nothing of it is here. A relay of this process
        ended the run where it ran when it ended; a run followed by a relay that is gone
        (its driver died) is ended on its node by its host (its supervisor aborts it), and
        its unit released."""
        if self._thread is not None:
            return None
        try:
            ray = connect(self.address)
            if self.node is None:  # placed (and started) since its record was written?
                with contextlib.suppress(Exception):
                    from ray.util import get_placement_group

                    self.node = placed_on(ray, get_placement_group(placement_name(self.run_id)))
            host = find_host(ray, self.node) if self.node else None
            ended = False
            if host is not None:
                with contextlib.suppress(Exception):
                    ended = bool(ray.get(host.close.remote(self.run_id), timeout=KILL_PATIENCE))
            release(self.run_id)
        except SubagentsError as exc:  # Ray gone from here, or the cluster unreachable
            return f"its Ray node could not be reached: {exc}"
        if self.node is None:
            return "it had not been placed on a Ray node yet"
        return f"its run on Ray node {self.node} was " + ("ended" if ended else "already over")

    def reap(self, timeout: float) -> None:
        return None  # no process of this machine to collect

    # ---- the relay --------------------------------------------------------

    def follow(
        self, ray: Ray | None = None, shipment: Shipment | None = None, *, fresh: bool = False
    ) -> None:
        """Relay the run from this process (a thread), and say so in its record
        (``fresh``: a run just launched, not yet placed by anyone)."""
        ray = ray or connect(self.address)
        self._ray, self._shipment, self._fresh = ray, shipment, fresh
        # What another process needs to find the run (`subagents stop`, a new driver).
        self.address = ray.get_runtime_context().gcs_address
        self.relay = procs.identity(os.getpid())
        write_record(self.run_dir, self)
        self._thread = threading.Thread(
            target=self._relay, args=(ray,), name=f"relay-{self.run_id}", daemon=True
        )
        self._thread.start()

    def detach(self) -> None:
        """Stop relaying, leaving the run going on its node (what a dying driver does)."""
        self._detached.set()
        if self._thread is not None:
            self._thread.join(PULL_WAIT + PULL_PATIENCE + 5)

    def _offsets(self) -> dict[str, int]:
        out = {}
        for name in RELAYED:
            with contextlib.suppress(OSError):
                out[name] = (self.run_dir / name).stat().st_size
        return out

    def _relay(self, ray: Ray) -> None:
        try:
            self._lost = self._start(ray)
            if self._lost is None and not self._detached.is_set():
                self._lost = self._follow(ray)
        except BaseException as exc:  # it must end with a diagnosis (Ray may raise SystemExit)
            self._lost = f"the relay of Ray run {self.run_id} failed: {first_line(exc)}"
        if self._lost is not None and not self._detached.is_set():
            # Ended where it ran, and its unit released: nothing of it holds a node.
            with contextlib.suppress(Exception):
                if self._host is not None:
                    ray.get(self._host.close.remote(self.run_id), timeout=KILL_PATIENCE)
            release(self.run_id)

    # ---- placing and starting the run ------------------------------------

    def _start(self, ray: Ray) -> str | None:
        """Place the run on a node and have its host start it, unless it is there
        already; returns why not when it cannot be."""
        if self.node is not None:
            self._host = find_host(ray, self.node)
            if self._host is None:
                return self._host_gone(ray)
            return None
        meta = read_meta(self.run_dir)
        if not isinstance(meta, dict):
            return f"{self.run_dir / 'meta.json'} is not a run's spec"
        backend = str(meta.get("backend"))
        group = reserve(ray, self.run_id, backend, fresh=self._fresh)
        next_look = time.monotonic() + PULL_PATIENCE
        while not group.wait(PLACE_LOOK):
            if self._detached.is_set():
                return None
            if self._stop is not None:
                return "stopped before it was placed on a Ray node"
            if time.monotonic() >= next_look:  # can any node still take it?
                next_look = time.monotonic() + PULL_PATIENCE
                try:
                    check_offered(ray, backend, fresh=True)
                except LaunchError as exc:
                    return f"{exc}; the run could not be placed"
        node = placed_on(ray, group)
        if node is None:
            return "Ray placed the run's unit on no node"
        shipment = self._shipment
        worktree = meta.get("worktree")
        if shipment is None and isinstance(worktree, dict) and worktree.get("shipped"):
            from subagents.launchers import ray_ship

            shipment = ray_ship.prepare(self.run_dir, worktree)
        files = {
            n: (self.run_dir / n).read_bytes() for n in SENT_FILES if (self.run_dir / n).exists()
        }
        for attempt in (1, 2):
            known = attempt == 1 and known_host(node)
            host = self._host = host_for(ray, node)
            try:
                if shipment is not None:
                    from subagents.launchers import ray_ship

                    try:
                        ray_ship.send(ray, host, node, shipment)
                    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                        raise
                    except Exception as exc:
                        return (
                            f"could not send {shipment.root} to Ray node {node}: {first_line(exc)}"
                        )
                ship = shipment.for_host() if shipment is not None else None
                reply: HostStartReply = ray.get(
                    host.start.remote(self.run_id, meta, str(self.run_dir), files, ship),
                    timeout=START_PATIENCE,
                )
                break
            except ray.exceptions.RayActorError as exc:
                # A host this process knew of has died since (`ray down`, its process
                # lost): the run never reached it, so a new one gets it.
                forget_host(node)
                if not known or not node_state(ray, node)[0]:
                    return self._diagnose(ray, exc, node)
        self.node, self.actor = node, host_name(node)
        with contextlib.suppress(OSError):  # the record names its node from now on
            write_record(self.run_dir, self)
        if reply.get("error"):
            return str(reply["error"])
        if self._stop is not None:
            ray.get(host.stop.remote(self.run_id, self._stop), timeout=PULL_PATIENCE)
        return None

    # ---- following it ----------------------------------------------------

    def _follow(self, ray: Ray) -> str | None:
        """Relay until the result is published here; return why not when it cannot be."""
        host = self._host
        if host is None:  # (placed and started by _start, or found there)
            return self._host_gone(ray)
        offsets = self._offsets()
        unavailable_since: float | None = None
        while not self._detached.is_set():
            ref = host.pull.remote(self.run_id, offsets, PULL_WAIT)
            try:
                reply: HostPullReply = ray.get(ref, timeout=PULL_WAIT + PULL_PATIENCE)
            except ray.exceptions.GetTimeoutError:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)  # only this pull: the supervisor is not touched
                alive, address = node_state(ray, self.node)
                if not alive:
                    return self._node_died(address)
                continue
            except ray.exceptions.ActorUnavailableError as exc:
                unavailable_since = unavailable_since or time.monotonic()
                if time.monotonic() - unavailable_since > UNAVAILABLE_PATIENCE:
                    return self._diagnose(ray, exc, self.node)
                time.sleep(PULL_WAIT)
                continue
            except ray.exceptions.RayActorError as exc:
                forget_host(self.node)
                return self._diagnose(ray, exc, self.node)
            unavailable_since = None
            for name, data in reply["chunks"].items():
                with open_private(self.run_dir / name, "ab") as f:
                    f.write(data)
                offsets[name] = offsets.get(name, 0) + len(data)
            result = reply["result"]
            reason = reply.get("reason")
            if result is not None:
                if reason and result.get("errorMessage"):  # ended by someone else: who
                    result["errorMessage"] = f"{result['errorMessage']}; {reason}"
                self._publish(ray, host, result)
                return None
            if not reply["alive"] and not reply["chunks"]:
                why = reply["error"] or f"the supervisor on Ray node {self.node} ended"
                return f"{why}; {reason}" if reason else why
        return None

    def _publish(self, ray: Ray, host: HostHandle, result: RunResult) -> None:
        # Its artifacts are the ones relayed here.
        result["paths"] = artifact_paths(self.run_dir)
        meta = read_meta(self.run_dir)
        record = meta.get("worktree") if isinstance(meta, dict) else None
        if isinstance(record, dict) and record.get("shipped"):
            from subagents.launchers import ray_ship

            ray_ship.bring_back(ray, host, self.run_id, result, record, self.run_dir)
        elif (worktree := result.get("worktree")) and worktree.get("patch"):
            worktree["patch"] = str(self.run_dir / PATCH_FILE)  # relayed here
        result["executor"] = self.where()
        # The host lets go of the run before the result is published: a caller that exits
        # as soon as it sees the result leaves nothing holding a node.
        with contextlib.suppress(Exception):
            ray.get(host.close.remote(self.run_id), timeout=KILL_PATIENCE)
        publish_once(self.run_dir / "result.json", result)

    def _node_died(self, address: str) -> str:
        return (
            f"the Ray node {self.node} ({address}) died while running this run;"
            " its child went with it"
        )

    def _host_gone(self, ray: Ray) -> str:
        alive, address = node_state(ray, self.node)
        if not alive:
            return self._node_died(address)
        return f"the subagents host on Ray node {self.node} is gone, and this run with it"

    def _diagnose(self, ray: Ray, exc: BaseException, node: str | None) -> str:
        alive, address = node_state(ray, node)
        if not alive:
            self.node = node
            return self._node_died(address)
        return f"the subagents host on Ray node {node} died: {first_line(exc)}"
