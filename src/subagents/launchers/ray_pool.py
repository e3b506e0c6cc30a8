"""The caller's view of a Ray cluster: its connection (made once a process, with Ray's own
output kept out of our streams), the pool of host actors (one per node, created on first
use, found again by name by any caller), each run's unit (a placement group), and what
``subagents ray status`` and ``ray down`` say and do.

A run takes one unit of ``subagents-<backend>`` on some node for as long as it runs:
a placement group of one bundle, ``subagents-run-<run id>`` (detached, so that it
outlives a caller that dies), placed by Ray on a node that offers the backend, spread
over them. Its node's host runs it and removes the group when its supervisor ends.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from subagents.core import paths
from subagents.core.records import list_of
from subagents.errors import LaunchError
from subagents.launchers.base import RAY_MISSING
from subagents.launchers.ray_host import NodeHost
from subagents.launchers.ray_node import (
    HOST_PREFIX,
    PLACEMENT_PREFIX,
    PROTOCOL,
    host_name,
    placement_name,
)

if TYPE_CHECKING:
    from subagents.launchers.ray_handles import HostHandle, PlacementGroup, Ray
    from subagents.types import (
        HostHello,
        HostStatus,
        JsonObject,
        RayClusterStatus,
        RayDown,
        RayHostStatus,
        RayHostUnreachable,
        RayNodeStatus,
        RayUnit,
    )

NAMESPACE = "subagents"
# Ray's own messages (its logger, the errors its driver prints) go here, never to our
# stdout or stderr: $SUBAGENTS_HOME/ray.log.
RAY_LOG = "ray.log"
# A new host starts a Ray worker process on its node: this long at most.
HOST_PATIENCE = 120.0
# Ending the hosts (`ray down`): this long for the cluster to let go of each, and for the
# relays of the runs it aborts to collect their results first.
KILL_PATIENCE = 10.0
COLLECT_PATIENCE = 15.0
# Connecting: how long it may take (SUBAGENTS_RAY_CONNECT_TIMEOUT overrides it), and how
# often a caller waiting for it looks whether it was stopped.
CONNECT_PATIENCE = 60.0
CONNECT_LOOK = 0.2
_connect_lock = threading.Lock()
_attempt: _Attempt | None = None
_hosts_lock = threading.Lock()
_hosts: dict[str, HostHandle] = {}
# ``ray.remote(NodeHost)``: Ray's actor class, made once a process (untyped: Ray's own)
_host_class: Any = None
# When each backend was last seen offered by the cluster (launches within OFFERED_TTL
# seconds of it do not ask again; a run waiting for a unit always does).
_offered: dict[str, float] = {}
OFFERED_TTL = 5.0


def resource_name(backend: str) -> str:
    return f"subagents-{backend}"


def first_line(exc: BaseException) -> str:
    """What went wrong, in a line: for an error raised in an actor's method, the error
    itself (Ray's own text starts with where it was raised)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        return first_line(cause)
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def connect(address: str | None, *, stopped: Callable[[], bool] | None = None) -> Ray:
    """This process's connection to the cluster (made once): ``address``, else
    ``$RAY_ADDRESS``, else a cluster started on this machine with ``ray start``.

    Bounded: ``ray.init`` has no limit of its own (against an address where no head
    answers, or a head whose advertised address this machine cannot reach, it retries for
    many minutes, deaf to signals while it does), so it runs in a thread of its own and the
    caller waits for it in slices, no longer than ``connect_patience()`` seconds, and gives
    up at once when ``stopped()`` says its job was stopped (LaunchError either way)."""
    try:
        import ray
    except ImportError:
        raise LaunchError(RAY_MISSING) from None

    global _attempt
    with _connect_lock:
        attempt = _attempt
        if attempt is None or not attempt.usable(ray):
            if ray.is_initialized():  # connected by the program that embeds us
                return cast("Ray", ray)
            target = address or os.environ.get("RAY_ADDRESS") or "auto"
            attempt = _attempt = _Attempt(ray, target, connect_patience())
    attempt.wait(stopped)
    # Ray's own annotations are partial (an actor's handle is ActorHandle[Any]): the calls
    # made of it are checked against the view of it that ray_handles declares.
    return cast("Ray", ray)


def connect_patience() -> float:
    """How long connecting may take: $SUBAGENTS_RAY_CONNECT_TIMEOUT seconds, else
    CONNECT_PATIENCE."""
    given = os.environ.get("SUBAGENTS_RAY_CONNECT_TIMEOUT", "")
    try:
        seconds = float(given)
    except ValueError:
        return CONNECT_PATIENCE
    return seconds if seconds > 0 else CONNECT_PATIENCE


class _Attempt:
    """One ``ray.init``, in a daemon thread: every caller that connects meanwhile waits for
    this one (never a second beside it), each until the same deadline. One that never
    returns stays behind, harmless: the process exits without waiting for it."""

    def __init__(self, ray: ModuleType, target: str, patience: float) -> None:
        self.target = target
        self.patience = patience
        self.deadline = time.monotonic() + patience
        self.error: BaseException | None = None
        self.done = threading.Event()
        threading.Thread(target=self._init, args=(ray,), name="ray-connect", daemon=True).start()

    def _init(self, ray: ModuleType) -> None:
        # In a thread, Ray also leaves the process's SIGTERM handler alone (in the main
        # thread it would put its own in place of the job's).
        _keep_ray_quiet(ray)
        try:
            ray.init(
                address=self.target,
                namespace=NAMESPACE,
                log_to_driver=False,
                configure_logging=False,
            )
        except BaseException as exc:  # said by each waiting caller (Ray may raise SystemExit)
            self.error = exc
        finally:
            _keep_ray_quiet(ray)  # again: ray.init drops the "ray" logger's handlers
            self.done.set()

    def usable(self, ray: ModuleType) -> bool:
        """Under way, or connected still (not failed, nor shut down since)."""
        if not self.done.is_set():
            return True
        return self.error is None and bool(ray.is_initialized())

    def wait(self, stopped: Callable[[], bool] | None) -> None:
        while not self.done.wait(max(0.0, min(CONNECT_LOOK, self.deadline - time.monotonic()))):
            if stopped is not None and stopped():
                raise LaunchError(f"stopped while connecting to the Ray cluster at {self.target}")
            if time.monotonic() >= self.deadline:
                raise LaunchError(
                    f"could not connect to the Ray cluster at {self.target} within"
                    f" {self.patience:g} s: check that it is the head's address (host:port,"
                    " as `ray start --head` prints it), that the head runs, and that this"
                    " machine reaches the addresses the head and its nodes advertise"
                    " (SUBAGENTS_RAY_CONNECT_TIMEOUT sets the wait)"
                )
        if self.error is not None:
            raise LaunchError(
                f"could not connect to the Ray cluster at {self.target}: {first_line(self.error)}"
            )


def _keep_ray_quiet(ray: ModuleType) -> None:
    """Ray's logger, and the errors its driver would print on our stdout (such as
    ``(raylet) Raylet is terminated`` when a node dies), go to the Ray log instead."""
    log = paths.state_home() / RAY_LOG
    handler: logging.Handler
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log, encoding="utf-8")
        handler.setFormatter(logging.Formatter(f"%(asctime)s {os.getpid()} %(name)s %(message)s"))
    except OSError:
        handler = logging.NullHandler()
    ray_logger = logging.getLogger("ray")
    # ray.init clears the "ray" logger's handlers and then warns through its worker's logger
    # (that its thread is not the main one): that logger gets the handler of its own.
    for logger in (ray_logger, logging.getLogger("ray._private.worker")):
        for old in list(logger.handlers):
            if isinstance(old, logging.FileHandler):
                old.close()
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    if worker is not None and hasattr(worker, "print_to_stdstream"):
        # The driver's error listener calls this (by its module-level name) with what the
        # cluster publishes to drivers; it writes to sys.stdout.
        def to_log(data: JsonObject, ignore_prefix: bool = False) -> None:
            for line in list_of(data.get("lines")):
                ray_logger.warning("(%s) %s", data.get("pid"), line)

        worker.print_to_stdstream = to_log


# ---- placement: one unit per running run ---------------------------------------------


def check_offered(ray: Ray, backend: str, *, fresh: bool = False) -> None:
    """Fail at once when no node of the cluster offers ``backend`` (what the cluster
    offered is asked again after OFFERED_TTL seconds, or when ``fresh``)."""
    wanted = resource_name(backend)
    with _hosts_lock:
        seen = _offered.get(wanted)
    if not fresh and seen is not None and time.monotonic() - seen < OFFERED_TTL:
        return
    if ray.cluster_resources().get(wanted, 0) >= 1:
        with _hosts_lock:
            _offered[wanted] = time.monotonic()
        return
    with _hosts_lock:
        _offered.pop(wanted, None)
    raise LaunchError(
        f"no Ray node offers {wanted}: no node of the cluster can run {backend} "
        f"(start one with: ray start --address=<head> --resources='{{\"{wanted}\": 4}}')"
    )


def reserve(ray: Ray, run_id: str, backend: str, *, fresh: bool = False) -> PlacementGroup:
    """The run's placement group: made, unless it exists (a relay taking a run over;
    ``fresh``: a run just launched, which has none)."""
    from ray.util import get_placement_group, placement_group

    group: PlacementGroup
    if not fresh:
        with contextlib.suppress(ValueError):
            group = get_placement_group(placement_name(run_id))
            return group
    group = placement_group(
        [{resource_name(backend): 1}],
        strategy="SPREAD",
        name=placement_name(run_id),
        lifetime="detached",
    )
    return group


def placed_on(ray: Ray, group: PlacementGroup) -> str | None:
    """The node holding the group's unit, once placed."""
    from ray.util import placement_group_table

    nodes = placement_group_table(group).get("bundles_to_node_id") or {}
    node = nodes.get(0)
    return str(node) if node else None


def release(run_id: str) -> None:
    """Give the run's unit back (when its host cannot: gone with its node)."""
    from subagents.launchers.ray_node import remove_placement

    with contextlib.suppress(Exception):
        remove_placement(run_id)


def node_state(ray: Ray, node_id: str | None) -> tuple[bool, str]:
    """(alive, address) of a node as the cluster sees it."""
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return bool(node.get("Alive")), str(node.get("NodeManagerAddress"))
    return False, "unknown address"


# ---- the hosts --------------------------------------------------------------------------


def host_for(ray: Ray, node_id: str) -> HostHandle:
    """The host actor of ``node_id``, created on first use (by whichever caller comes
    first: the others find it by name)."""
    global _host_class
    with _hosts_lock:
        known = _hosts.get(node_id)
        if known is not None:
            return known
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if _host_class is None:
            _host_class = ray.remote(NodeHost)
        try:
            handle: HostHandle = _host_class.options(
                name=host_name(node_id),
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                max_restarts=0,
                max_concurrency=1000,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
            hello: HostHello = ray.get(handle.hello.remote(), timeout=HOST_PATIENCE)
        except Exception as exc:
            raise LaunchError(
                f"could not start the subagents host on Ray node {node_id}: {first_line(exc)}"
            ) from None
        if hello.get("protocol") != PROTOCOL:
            raise LaunchError(
                f"the subagents host on Ray node {node_id} is of another subagents version"
                f" (protocol {hello.get('protocol')}, this one {PROTOCOL}): replace the hosts"
                " with `subagents ray down` once no run uses them"
            )
        _hosts[node_id] = handle
        return handle


def find_host(ray: Ray, node_id: str) -> HostHandle | None:
    """The host actor of ``node_id`` if it exists, looked up by name (never created: a run
    it does not have is not there; never this process's handle, which may be of a host
    replaced since)."""
    try:
        return ray.get_actor(host_name(node_id), namespace=NAMESPACE)
    except ValueError:
        return None


def known_host(node_id: str) -> bool:
    """Whether this process holds a handle on ``node_id``'s host (which may have died since)."""
    with _hosts_lock:
        return node_id in _hosts


def forget_host(node_id: str | None) -> None:
    """A host found dead: the next run on its node makes a new one."""
    with _hosts_lock:
        _hosts.pop(str(node_id), None)


# ---- subagents ray status / down -------------------------------------------------------


def _hosts_of(ray: Ray) -> list[tuple[str, HostHandle]]:
    names = [n for n in ray.util.list_named_actors() if str(n).startswith(HOST_PREFIX)]
    found = []
    for name in sorted(names):
        with contextlib.suppress(ValueError):
            found.append((name, ray.get_actor(name, namespace=NAMESPACE)))
    return found


def _units(ray: Ray) -> list[RayUnit]:
    from ray.util import placement_group_table

    out: list[RayUnit] = []
    for group in placement_group_table().values():
        name = str(group.get("name") or "")
        if name.startswith(PLACEMENT_PREFIX) and group.get("state") != "REMOVED":
            bundles = group.get("bundles") or {}
            out.append(
                {
                    "runId": name[len(PLACEMENT_PREFIX) :],
                    "state": group.get("state"),
                    "node": (group.get("bundles_to_node_id") or {}).get(0),
                    "resources": bundles.get(0) or {},
                }
            )
    return out


def cluster_status(address: str | None) -> RayClusterStatus:
    """The nodes (what each offers, what is free), the hosts and their runs, and the
    units held (a run waiting for a node holds a pending one)."""
    ray = connect(address)
    seen = ray.nodes()  # Ray's own records of its nodes
    units = _units(ray)
    nodes: list[RayNodeStatus] = []
    for node in seen:
        offered: dict[str, float] = {
            k: v for k, v in (node.get("Resources") or {}).items() if k.startswith("subagents-")
        }
        held = [u for u in units if u["node"] == node.get("NodeID") and u["state"] == "CREATED"]
        nodes.append(
            {
                "node": node["NodeID"],
                "address": node["NodeManagerAddress"],
                "alive": bool(node.get("Alive")),
                "offers": offered,
                "free": {
                    k: v - sum(float(u["resources"].get(k, 0)) for u in held)
                    for k, v in offered.items()
                },
            }
        )
    hosts: list[RayHostStatus | RayHostUnreachable] = []
    for name, handle in _hosts_of(ray):
        try:
            said: HostStatus = ray.get(handle.status.remote(), timeout=30)
            hosts.append({"name": name, **said})
        except Exception as exc:
            hosts.append({"name": name, "error": first_line(exc), "runs": []})
    return {
        "address": ray.get_runtime_context().gcs_address,
        "nodes": nodes,
        "hosts": hosts,
        "units": units,
    }


def cluster_down(address: str | None, *, force: bool = False) -> RayDown:
    """Remove the hosts (and every unit a run holds). Refused while runs run, unless
    ``force``: their supervisors then abort them (SIGTERM, as a lost host does)."""
    status = cluster_status(address)
    running = [r for h in status["hosts"] for r in h.get("runs") or [] if r.get("running")]
    if running and not force:
        raise LaunchError(
            f"{len(running)} run{'s' if len(running) != 1 else ''} still running on the"
            " cluster's hosts (see `subagents ray status`): stop them first, or pass --force"
            " to abort them"
        )
    ray = connect(address)
    hosts = _hosts_of(ray)
    if running:
        # Aborted where they run; their relays bring their results home before the hosts go.
        why = "it was aborted by `subagents ray down --force`"
        ending = []
        for name, handle in hosts:
            runs = next((h.get("runs") or [] for h in status["hosts"] if h["name"] == name), [])
            ending += [handle.abort.remote(r["runId"], why) for r in runs if r.get("running")]
        with contextlib.suppress(Exception):
            ray.get(ending, timeout=KILL_PATIENCE)
        aborted = {str(r["runId"]) for r in running}
        deadline = time.monotonic() + COLLECT_PATIENCE
        while time.monotonic() < deadline and aborted & _held(ray, hosts):
            time.sleep(0.2)
    removed = []
    for name, handle in hosts:
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)
        removed.append(name)
    for name in removed:
        deadline = time.monotonic() + KILL_PATIENCE
        while time.monotonic() < deadline:
            try:
                ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                break
            time.sleep(0.05)
    with _hosts_lock:
        _hosts.clear()
    units = _units(ray)
    for unit in units:
        release(str(unit["runId"]))
    return {"hosts": removed, "aborted": [r["runId"] for r in running], "units": len(units)}


def _held(ray: Ray, hosts: list[tuple[str, HostHandle]]) -> set[str]:
    """The runs the hosts hold (running, or ended and not yet collected by their relay)."""
    held: set[str] = set()
    for _, host in hosts:
        with contextlib.suppress(Exception):
            status: HostStatus = ray.get(host.status.remote(), timeout=KILL_PATIENCE)
            held |= {r["runId"] for r in status["runs"]}
    return held


def describe_status(status: RayClusterStatus) -> str:
    """``subagents ray status`` in words."""
    lines = [f"Ray cluster at {status['address']}"]
    for node in status["nodes"]:
        offers = ", ".join(
            f"{k} {node['free'].get(k, 0):g}/{v:g} free" for k, v in sorted(node["offers"].items())
        )
        state = "alive" if node["alive"] else "dead"
        lines.append(f"  node {node['node']} {node['address']} {state}: {offers or 'no backend'}")
    if not status["hosts"]:
        lines.append("no subagents hosts (made on a node when a run first goes there)")
    for host in status["hosts"]:
        if "error" in host:  # it did not answer (first_line: never empty)
            lines.append(f"  host {host['name']}: unreachable: {host['error']}")
            continue
        runs = host.get("runs") or []
        running = sum(1 for r in runs if r.get("running"))
        template = host.get("template")
        lines.append(
            f"  host on node {host['node']} (pid {host['pid']}): {running} running,"
            f" {len(runs) - running} ended not yet collected, {host.get('spares', 0)} spare"
            + (f", a supervisor template ({template})" if template else "")
        )
        for run in runs:
            since = datetime.datetime.fromtimestamp(float(run.get("startedAt") or 0))
            state = "running" if run.get("running") else "ended"
            lines.append(f"    {run['runId']} {run.get('backend')} {state} since {since:%H:%M:%S}")
    waiting = [u for u in status["units"] if u.get("state") != "CREATED"]
    if waiting:
        lines.append(f"{len(waiting)} run(s) waiting for a node's unit")
    return "\n".join(lines)


def ray_log() -> Path:
    return paths.state_home() / RAY_LOG
