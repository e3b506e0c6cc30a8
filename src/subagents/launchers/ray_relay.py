"""The caller's side of the ray launcher: place a run's ``RunHost`` actor on a node that
offers the backend, and relay what the node's supervisor writes into the caller's run
directory, so the monitor, ``logs -f``, progress and MCP read the same files as locally.

Placement: a node advertises the custom resource ``subagents-<backend>`` (its count is how
many such children it runs at once); each run takes one unit. When no node of the cluster
offers it, the run fails at once instead of waiting for a node that may never come.

The relay is a thread of the caller: it long-polls the actor for the artifacts' new bytes,
appends them here, and when the supervisor's ``result.json`` arrives, publishes it here
(atomically, once) with ``executor: {kind: "ray", node}``, then removes the actor. Offsets
are the sizes of the caller's files, so a relay started later (a restarted job driver,
:meth:`RayLauncher.reattach`) takes up exactly where the last one stopped.

A run's ``supervisor.json`` names its actor, the cluster's address, the node once known,
and its relay: the process relaying it (pid and start time), never taken for a supervisor.
What the record says of the actor is this module's business alone (a pool of host actors
would say it otherwise): the rest of the engine asks the ``RayRun`` handle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.core import procs
from subagents.core.files import open_private, publish_once, read_json
from subagents.errors import LaunchError, SubagentsError, UsageError
from subagents.launchers.base import LAUNCHER_KEY, RAY_MISSING, write_record
from subagents.launchers.ray_host import RELAYED, RunHost

if TYPE_CHECKING:
    from subagents.supervisor.spec import RunSpec
    from subagents.types import RunStarted

NAMESPACE = "subagents"
PULL_WAIT = 0.5
# How long one pull may take beyond its wait before the node is looked at (a busy node,
# or an actor still waiting for a free unit of its resource).
PULL_PATIENCE = 10.0
# An actor that is unreachable (not known dead) gets this long to come back.
UNAVAILABLE_PATIENCE = 30.0
KILL_PATIENCE = 10.0
_connect_lock = threading.Lock()


def actor_name(run_id: str) -> str:
    return f"subagents-run-{run_id}"


def resource_name(backend: str) -> str:
    return f"subagents-{backend}"


def connect(address: str | None) -> Any:
    """This process's connection to the cluster (made once): ``address``, else
    ``$RAY_ADDRESS``, else a cluster started on this machine with ``ray start``."""
    try:
        import ray
    except ImportError:
        raise LaunchError(RAY_MISSING) from None

    with _connect_lock:
        if not ray.is_initialized():
            target = address or os.environ.get("RAY_ADDRESS") or "auto"
            try:
                ray.init(
                    address=target,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise LaunchError(
                    f"could not connect to the Ray cluster at {target}: {first}"
                ) from None
    return ray


def _check_placement(ray: Any, backend: str) -> None:
    wanted = resource_name(backend)
    if ray.cluster_resources().get(wanted, 0) < 1:
        raise LaunchError(
            f"no Ray node offers {wanted}: no node of the cluster can run {backend} "
            f"(start one with: ray start --address=<head> --resources='{{\"{wanted}\": 4}}')"
        )


class RayLauncher:
    """Runs on a Ray cluster: a detached actor per run hosts its supervisor on a node."""

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

    def launch(self, run_dir: Path, spec: RunSpec) -> RayRun:
        ray = connect(self.address)
        _check_placement(ray, spec.backend)
        meta = read_json(run_dir / "meta.json")
        files = {}
        prompt = run_dir / "system-prompt.md"
        if prompt.exists():
            files[prompt.name] = prompt.read_bytes()
        name = actor_name(run_dir.name)
        host = ray.remote(RunHost).options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            num_cpus=0,
            resources={resource_name(spec.backend): 1},
            scheduling_strategy="SPREAD",
            max_concurrency=4,
            max_restarts=0,
        )
        try:
            actor = host.remote(run_dir.name, meta, str(run_dir), files)
        except (ValueError, ray.exceptions.RayError) as exc:
            raise LaunchError(f"Ray could not create the run's actor: {_first_line(exc)}") from None
        run = RayRun(run_dir, name, self.address)
        run.follow(ray, actor)
        return run

    def reattach(self, run_dir: Path, record: dict[str, Any], *, follow: bool = True) -> RayRun:
        run = RayRun.from_record(run_dir, record)
        if follow:
            run.follow()
        return run


class RayRun:
    """A run on a Ray node: its actor (by name, in the cluster at ``address``), the node
    once known, and its relay, the process relaying its artifacts here. When that is this
    process, a thread of it relays (``follow``); else the run is only looked at from here,
    and nothing connects to the cluster until it is stopped or abandoned."""

    launcher = "ray"

    def __init__(
        self,
        run_dir: Path,
        actor: str,
        address: str | None,
        node: str | None = None,
        relay: dict[str, Any] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.actor = actor
        self.address = address
        self.node = node
        self.relay: Mapping[str, Any] = relay or {}
        self._ray: Any = None
        self._actor: Any = None
        self._thread: threading.Thread | None = None
        self._lost: str | None = None
        self._detached = threading.Event()

    @classmethod
    def from_record(cls, run_dir: Path, record: dict[str, Any]) -> RayRun:
        # A record written before the launchers were one seam said where the run was under
        # "executor", and its relay's pid and start time as "pid" and "createTime".
        where = record.get("ray") or record["executor"]
        relay = record.get("relay") or {"pid": record["pid"], "createTime": record["createTime"]}
        return cls(
            run_dir, str(where["actor"]), where.get("address") or None, where.get("node"), relay
        )

    def record(self) -> dict[str, Any]:
        return {
            LAUNCHER_KEY: self.launcher,
            "ray": {"actor": self.actor, "address": self.address, "node": self.node},
            "relay": self.relay,
        }

    # ---- the Launched interface ------------------------------------------

    def alive(self) -> bool:
        if self._thread is not None:
            return self._thread.is_alive()
        return procs.is_alive(self.relay)

    def terminate(self, sig: int) -> None:
        if self._thread is None and not procs.is_alive(self.relay):
            # Its relay died with its driver: relay it from here, so its result still comes
            # back and its actor (and the node's unit it holds) is released.
            self.follow()
        ray = self._ray or connect(self.address)
        # The supervisor on the node gets the signal and kills its child's group there.
        with contextlib.suppress(Exception):
            actor = self._actor or ray.get_actor(self.actor, namespace=NAMESPACE)
            ray.get(actor.stop.remote(int(sig)), timeout=PULL_PATIENCE)

    def lost(self) -> str | None:
        return self._lost

    def where(self) -> dict[str, Any]:
        return {"kind": "ray", "node": self.node}

    def orphaned(self, child: RunStarted | None, run_id: str) -> str | None:
        """The child's pid is the node's: nothing of it is here. A relay of this process
        released the actor when it ended; a run followed by a relay that is gone (its
        driver died) is ended on its node: its actor killed, its supervisor then gets
        SIGTERM (``PR_SET_PDEATHSIG``) and kills the child's group there."""
        if self._thread is not None:
            return None
        try:
            ray = connect(self.address)
            try:
                killed = _kill(ray, ray.get_actor(self.actor, namespace=NAMESPACE), self.actor)
            except (ValueError, ray.exceptions.RayError):
                killed = False
        except SubagentsError as exc:  # Ray gone from here, or the cluster unreachable
            return f"its Ray actor {self.actor} could not be reached: {exc}"
        return f"its Ray actor {self.actor} was " + ("killed" if killed else "already gone")

    def reap(self, timeout: float) -> None:
        return None  # no process of this machine to collect

    # ---- the relay --------------------------------------------------------

    def follow(self, ray: Any = None, actor: Any = None) -> None:
        """Relay the run from this process (a thread), and say so in its record."""
        ray = ray or connect(self.address)
        if actor is None:
            try:
                actor = ray.get_actor(self.actor, namespace=NAMESPACE)
            except ValueError:
                raise LaunchError(
                    f"no Ray actor {self.actor} in the cluster: the run is gone"
                ) from None
        self._ray, self._actor = ray, actor
        # What another process needs to find the actor (`subagents stop`, a new driver).
        self.address = ray.get_runtime_context().gcs_address
        self.relay = procs.identity(os.getpid())
        write_record(self.run_dir, self)
        self._thread = threading.Thread(target=self._relay, name=f"relay-{self.actor}", daemon=True)
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

    def _relay(self) -> None:
        try:
            self._lost = self._follow()
        except BaseException as exc:  # it must end with a diagnosis (Ray may raise SystemExit)
            self._lost = f"the relay of Ray actor {self.actor} failed: {exc!r}"
        if self._lost is not None and not self._detached.is_set():
            # The actor goes, releasing its unit (and, through PDEATHSIG, whatever of the
            # run may be left on its node).
            with contextlib.suppress(Exception):
                _kill(self._ray, self._actor, self.actor)

    def _follow(self) -> str | None:
        """Relay until the result is published here; return why not when it cannot be."""
        ray, actor = self._ray, self._actor
        offsets = self._offsets()
        unavailable_since: float | None = None
        while not self._detached.is_set():
            ref = actor.pull.remote(offsets, PULL_WAIT)
            try:
                reply = ray.get(ref, timeout=PULL_WAIT + PULL_PATIENCE)
            except ray.exceptions.GetTimeoutError:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)  # only this pull: the supervisor is not touched
                why = self._placement_gone()
                if why:
                    return why
                continue
            except ray.exceptions.ActorUnavailableError as exc:
                unavailable_since = unavailable_since or time.monotonic()
                if time.monotonic() - unavailable_since > UNAVAILABLE_PATIENCE:
                    return self._diagnose(exc)
                time.sleep(PULL_WAIT)
                continue
            except ray.exceptions.RayActorError as exc:
                return self._diagnose(exc)
            unavailable_since = None
            if reply["node"] != self.node:
                self.node = reply["node"]
                with contextlib.suppress(OSError):  # the record names its node from now on
                    write_record(self.run_dir, self)
            for name, data in reply["chunks"].items():
                with open_private(self.run_dir / name, "ab") as f:
                    f.write(data)
                offsets[name] = offsets.get(name, 0) + len(data)
            result = reply["result"]
            if result is not None:
                # The actor is released before the result is published: a caller that
                # exits as soon as it sees the result leaves nothing holding a node's unit.
                with contextlib.suppress(Exception):
                    ray.get(actor.close.remote(), timeout=PULL_PATIENCE)
                with contextlib.suppress(Exception):
                    _kill(ray, actor, self.actor)
                self._publish(result)
                return None
            if not reply["alive"] and not reply["chunks"]:
                return reply["error"] or f"the supervisor on Ray node {self.node} ended"
        return None

    def _publish(self, result: dict[str, Any]) -> None:
        paths = result.get("paths")
        if isinstance(paths, dict):
            result["paths"] = {k: str(self.run_dir / Path(v).name) for k, v in paths.items()}
        result["executor"] = self.where()
        publish_once(self.run_dir / "result.json", result)

    def _node_state(self) -> tuple[bool, str]:
        """(alive, address) of this run's node as the cluster sees it."""
        for node in self._ray.nodes():
            if node.get("NodeID") == self.node:
                return bool(node.get("Alive")), str(node.get("NodeManagerAddress"))
        return False, "unknown address"

    def _diagnose(self, exc: BaseException) -> str:
        if self.node is None:
            return f"the Ray actor {self.actor} died before its run started: {_first_line(exc)}"
        alive, address = self._node_state()
        if not alive:
            return (
                f"the Ray node {self.node} ({address}) died while running this run; "
                "its child went with it"
            )
        return f"the Ray actor {self.actor} on node {self.node} died: {_first_line(exc)}"

    def _placement_gone(self) -> str | None:
        """Still waiting for the actor: fail once no node can ever take it."""
        if self.node is not None:
            alive, address = self._node_state()
            if not alive:
                return f"the Ray node {self.node} ({address}) died while running this run"
            return None
        try:
            backend = str(read_json(self.run_dir / "meta.json").get("backend"))
        except (OSError, ValueError, AttributeError):
            return None  # cannot tell: keep waiting, bounded by the run's own monitor
        try:
            _check_placement(self._ray, backend)
        except LaunchError as exc:
            return f"{exc}; the run could not be placed"
        return None


def _kill(ray: Any, actor: Any, name: str) -> bool:
    """Kill ``actor`` and wait (bounded) until the cluster has let go of it: ``ray.kill``
    only sends the request, which a process exiting right after would lose."""
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + KILL_PATIENCE
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return True
        time.sleep(0.05)
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
