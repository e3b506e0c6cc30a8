"""Typed views of what subagents uses of Ray, which ships no types: the ``ray`` module
(:class:`Ray`), a node's host actor (:class:`HostHandle`, one remote method per
``NodeHost`` method) and a run's unit (:class:`PlacementGroup`). The launchers pass these,
never ``Any``: a call the views do not declare is a type error here, not a surprise on a
cluster. What a remote method answers comes back through :meth:`Ray.get` as Ray unpickled
it; its readers say which record of ``subagents.types`` it is (``HostPullReply`` …).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class ObjectRef(Protocol):
    """A remote call's pending answer (Ray's ``ObjectRef``), for :meth:`Ray.get`."""


class RemoteMethod(Protocol):
    """An actor's method as its handle offers it: ``handle.method.remote(*args)``."""

    def remote(self, *args: object) -> ObjectRef: ...


class HostHandle(Protocol):
    """A node's host actor (``ray_host.NodeHost``) as callers hold it."""

    hello: RemoteMethod
    start: RemoteMethod
    pull: RemoteMethod
    stop: RemoteMethod
    abort: RemoteMethod
    close: RemoteMethod
    changes: RemoteMethod
    want_commit: RemoteMethod
    receive_pack: RemoteMethod
    status: RemoteMethod


class PlacementGroup(Protocol):
    """A run's unit: a placement group of one bundle (``ray.util.placement_group``)."""

    def wait(self, timeout_seconds: float) -> bool: ...


class RuntimeContext(Protocol):
    @property
    def gcs_address(self) -> str: ...

    def get_node_id(self) -> str: ...


class RayExceptions(Protocol):
    """``ray.exceptions``: the errors the relays tell apart."""

    RayError: type[Exception]
    RayActorError: type[Exception]
    GetTimeoutError: type[Exception]
    ActorUnavailableError: type[Exception]


class RayUtil(Protocol):
    def list_named_actors(self, all_namespaces: bool = False) -> list[str]: ...


class Ray(Protocol):
    """The ``ray`` module, connected (``ray_pool.connect``)."""

    exceptions: RayExceptions
    util: RayUtil

    def is_initialized(self) -> bool: ...

    def init(self, *, address: str, namespace: str, **options: bool) -> object: ...

    # The answer is what the actor's method returned, unpickled: typed by its reader.
    def get(
        self, refs: ObjectRef | Sequence[ObjectRef], *, timeout: float | None = None
    ) -> Any: ...

    def get_actor(self, name: str, namespace: str | None = None) -> HostHandle: ...

    def kill(self, actor: HostHandle, *, no_restart: bool = True) -> None: ...

    def cancel(self, ref: ObjectRef) -> None: ...

    # Ray's records of its nodes (``NodeID``, ``Alive``, ``NodeManagerAddress``, ``Resources``).
    def nodes(self) -> list[dict[str, Any]]: ...

    def cluster_resources(self) -> dict[str, float]: ...

    def get_runtime_context(self) -> RuntimeContext: ...

    # The actor class ``ray.remote(NodeHost)`` makes: ``.options(...).remote()`` is a handle.
    def remote(self, cls: type) -> Any: ...
