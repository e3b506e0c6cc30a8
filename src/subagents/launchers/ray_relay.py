"""The caller's side of the ray executor: place a run's ``RunHost`` actor on a node that
offers the backend, and relay what the node's supervisor writes into the caller's run
directory, so the monitor, ``logs -f``, progress and MCP read the same files as locally.

Placement: a node advertises the custom resource ``subagents-<backend>`` (its count is how
many such children it runs at once); each run takes one unit. When no node of the cluster
offers it, the run fails at once instead of waiting for a node that may never come.

The relay is a thread of the caller: it long-polls the actor for the artifacts' new bytes,
appends them here, and when the supervisor's ``result.json`` arrives, publishes it here
(atomically, once) with ``executor: {kind: "ray", node}``, then removes the actor. Offsets
are the sizes of the caller's files, so a relay started later (a restarted job driver,
:func:`reattach`) takes up exactly where the last one stopped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from subagents.core.files import open_private, publish_once, read_json
from subagents.errors import LaunchError
from subagents.launchers import Launched, record
from subagents.launchers.ray_host import RELAYED, RunHost

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
    import ray

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


class RayLaunched(Launched):
    """A run hosted by a Ray actor, followed by a relay thread of this process."""

    remote = True

    def __init__(self, run_dir: Path, ray: Any, actor: Any, name: str) -> None:
        me = psutil.Process()
        super().__init__(pid=me.pid, create_time=me.create_time(), runner="ray")
        self.run_dir = run_dir
        self.ray = ray
        self.actor = actor
        self.name = name
        self.node: str | None = None
        self._lost: str | None = None
        self._detached = threading.Event()
        self._thread = threading.Thread(target=self._relay, name=f"relay-{name}", daemon=True)
        self._thread.start()

    # ---- the Launched interface ------------------------------------------

    def alive(self) -> bool:
        return self._thread.is_alive()

    def terminate(self, sig: int) -> None:
        # The supervisor on the node gets the signal and kills its child's group there.
        with contextlib.suppress(Exception):
            self.ray.get(self.actor.stop.remote(int(sig)), timeout=PULL_PATIENCE)

    def lost(self) -> str | None:
        return self._lost

    def where(self) -> dict[str, Any]:
        return {"kind": "ray", "node": self.node}

    def detach(self) -> None:
        """Stop relaying, leaving the run going on its node (what a dying driver does)."""
        self._detached.set()
        self._thread.join(PULL_WAIT + PULL_PATIENCE + 5)

    # ---- the relay --------------------------------------------------------

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
            self._lost = f"the relay of Ray actor {self.name} failed: {exc!r}"
        if self._lost is not None and not self._detached.is_set():
            # The actor goes, releasing its unit (and, through PDEATHSIG, whatever of the
            # run may be left on its node).
            with contextlib.suppress(Exception):
                _kill(self.ray, self.actor, self.name)

    def _follow(self) -> str | None:
        """Relay until the result is published here; return why not when it cannot be."""
        ray = self.ray
        offsets = self._offsets()
        unavailable_since: float | None = None
        while not self._detached.is_set():
            ref = self.actor.pull.remote(offsets, PULL_WAIT)
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
            self.node = reply["node"]
            for name, data in reply["chunks"].items():
                with open_private(self.run_dir / name, "ab") as f:
                    f.write(data)
                offsets[name] = offsets.get(name, 0) + len(data)
            result = reply["result"]
            if result is not None:
                # The actor is released before the result is published: a caller that
                # exits as soon as it sees the result leaves nothing holding a node's unit.
                with contextlib.suppress(Exception):
                    ray.get(self.actor.close.remote(), timeout=PULL_PATIENCE)
                with contextlib.suppress(Exception):
                    _kill(ray, self.actor, self.name)
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
        for node in self.ray.nodes():
            if node.get("NodeID") == self.node:
                return bool(node.get("Alive")), str(node.get("NodeManagerAddress"))
        return False, "unknown address"

    def _diagnose(self, exc: BaseException) -> str:
        if self.node is None:
            return f"the Ray actor {self.name} died before its run started: {_first_line(exc)}"
        alive, address = self._node_state()
        if not alive:
            return (
                f"the Ray node {self.node} ({address}) died while running this run; "
                "its child went with it"
            )
        return f"the Ray actor {self.name} on node {self.node} died: {_first_line(exc)}"

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
            _check_placement(self.ray, backend)
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


def launch(run_dir: Path, backend: str, address: str | None) -> Launched:
    ray = connect(address)
    _check_placement(ray, backend)
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
        resources={resource_name(backend): 1},
        scheduling_strategy="SPREAD",
        max_concurrency=4,
        max_restarts=0,
    )
    try:
        actor = host.remote(run_dir.name, meta, str(run_dir), files)
    except (ValueError, ray.exceptions.RayError) as exc:
        raise LaunchError(f"Ray could not create the run's actor: {_first_line(exc)}") from None
    return _recorded(run_dir, RayLaunched(run_dir, ray, actor, name))


def _recorded(run_dir: Path, launched: RayLaunched) -> Launched:
    # What another process needs to find the run's actor (`subagents stop`, a new driver).
    address = launched.ray.get_runtime_context().gcs_address
    return record(
        run_dir, launched, executor={"kind": "ray", "actor": launched.name, "address": address}
    )


def signal_run(where: dict[str, Any], sig: int) -> bool:
    """Signal the supervisor of a run recorded as ``where`` (from ``supervisor.json``)."""
    ray = connect(str(where.get("address") or "") or None)
    try:
        actor = ray.get_actor(str(where.get("actor")), namespace=NAMESPACE)
        return bool(ray.get(actor.stop.remote(int(sig)), timeout=PULL_PATIENCE))
    except (ValueError, ray.exceptions.RayError):
        return False


def abandon(where: dict[str, Any]) -> bool:
    """End a run whose relay is gone for good: kill its actor, whose supervisor then gets
    SIGTERM (``PR_SET_PDEATHSIG``) and kills the child's group on the node."""
    ray = connect(str(where.get("address") or "") or None)
    name = str(where.get("actor"))
    try:
        return _kill(ray, ray.get_actor(name, namespace=NAMESPACE), name)
    except (ValueError, ray.exceptions.RayError):
        return False


def reattach(run_dir: Path, address: str | None) -> Launched:
    ray = connect(address)
    name = actor_name(run_dir.name)
    try:
        actor = ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        raise LaunchError(f"no Ray actor {name} in the cluster: the run is gone") from None
    return _recorded(run_dir, RayLaunched(run_dir, ray, actor, name))
