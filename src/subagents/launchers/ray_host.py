"""The node's side of the ray launcher: one long-lived host actor per node (``NodeHost``,
named ``subagents-host-<node id>``, detached), shared by every job and caller of the
cluster. A run is a call on it: it starts the run's supervisor, the same ``python -m
subagents.supervisor RUN_DIR`` as on the caller's machine, in a run directory on the
node, and hands the caller's relay the artifacts' new bytes and, at the end,
``result.json``.

The host holds no Ray resource itself: the run's ``subagents-<backend>`` unit is held by
the run's placement group (``subagents-run-<run id>``, made by the caller), which the host
removes as soon as the run's supervisor has ended, so a unit is held exactly while a run
runs, whoever follows it.

The supervisor owns the child's process group exactly as it does locally, so stopping a
run is a signal to the supervisor. A small keeper process stands between the host and
each supervisor (ray_keeper.py), so that when the host's process dies every supervisor
gets SIGTERM and ends its run properly: a lost host never leaves a child running. Like
the process launcher here, while runs come the host forks their supervisors from a
template (ray_forks.py: one process that did a supervisor's start-up once, behind a keeper
too, its supervisors bound to it), and keeps a few supervisors started ahead (warm
spares) while it has none ready, so a run starts without waiting for an interpreter.

A run whose repository travels (``ship``) gets its worktree from the node's cache
repository (``repo.git`` in the node's runs directory), which keeps every commit a caller
sent it: a commit travels to a node once.

The class is plain Python with ``async`` methods, made an actor by the caller
(``ray.remote(NodeHost)``): Ray runs them on one event loop, so thousands of long polls
wait at once without a thread each, woken by inotify when a run's directory changes.
Whatever blocks runs in a worker thread, except starting a keeper: ``PR_SET_PDEATHSIG``
fires when the *thread* that forked a process ends, and the loop's thread lives as long
as the host.

The names both sides agree on and a node's run directories: ray_node.py.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.core import inotify, procs
from subagents.core.events import started_event
from subagents.core.files import dumps, make_private_dir, open_private, read_events
from subagents.core.records import is_run_result, object_of
from subagents.core.tail import read_at
from subagents.launchers.base import supervisor_argv
from subagents.launchers.ray_forks import HostTemplate
from subagents.launchers.ray_keeper import SPARE
from subagents.launchers.ray_node import (
    PROTOCOL,
    RELAYED,
    cache_dir,
    drop_run_dir,
    localize,
    node_runs_dir,
    remove_placement,
)
from subagents.supervisor import handover
from subagents.supervisor.handover import LOG_FILE

if TYPE_CHECKING:
    from subagents.types import (
        HostHello,
        HostPullReply,
        HostStartReply,
        HostStatus,
        JsonObject,
        ProcessIdentity,
        RunResult,
        ShipmentRecord,
    )

# At most this much of one file per pull: a huge raw.jsonl comes back in several.
PULL_CHUNK = 4 << 20
POLL = 0.02
# With inotify: how often a waiting pull looks at the supervisor all the same.
LOOK = 0.25
# A pull that sees the run finish waits this long at most for its result, to bring both.
FINISHING = 0.2
# How often the host looks at its runs (ended ones release their unit) and its spares.
WATCH = 0.25
# How many reasons for runs ended by others (`ray down --force`) are kept for their relays.
ENDED_KEPT = 1000
# A run whose result nobody collected is dropped after this long.
UNCOLLECTED = 24 * 3600.0
# Closing a run that still runs: SIGTERM, this long for it to end, then SIGKILL.
CLOSE_GRACE = 5.0
# Spares: at most this many, while runs started within SPARE_IDLE seconds.
SPARE_MAX = 8
SPARE_IDLE = 30.0
# A spare waits handover.SPARE_WAIT seconds for a run; it is handed one well inside that.
SPARE_AGE = handover.SPARE_WAIT / 2
# How long a sender of a commit is waited for before another caller sends it instead.
SEND_PATIENCE = 300.0
KEEPER = (sys.executable, "-I", "-S", str(Path(__file__).with_name("ray_keeper.py")))


@dataclass
class HostedRun:
    """One run on this node: its directory, its keeper (whose child is the supervisor), or
    the supervisor the node's template forked for it (``forked``)."""

    run_id: str
    dir: Path
    backend: str
    proc: subprocess.Popen[bytes] | None = None
    supervisor_pid: int = 0
    forked: ProcessIdentity | None = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    # When the supervisor was seen gone (monotonic), and whether its unit went with it.
    ended: float | None = None
    released: bool = False
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when its directory changes (see DirChanges); ``watched``: that works here.
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    watched: bool = False

    def alive(self) -> bool:
        if self.forked is not None:  # (its template reaps it)
            return procs.is_alive(self.forked)
        return self.proc is not None and self.proc.poll() is None

    def result(self) -> RunResult | None:
        try:
            data = json.loads((self.dir / "result.json").read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return data if is_run_result(data) else None


class DirChanges:
    """Wakes the pulls waiting on a run when its directory changes: inotify, one
    descriptor for the whole host, read on the event loop. Where there is none, the
    pulls look again every ``POLL``."""

    def __init__(self) -> None:
        self.ino: inotify.Inotify | None = None
        self.runs: dict[int, HostedRun] = {}
        try:
            self.ino = inotify.Inotify()
            asyncio.get_running_loop().add_reader(self.ino.fileno(), self._read)
        except OSError:
            self.ino = None

    def watch(self, run: HostedRun) -> None:
        if self.ino is None:
            return
        mask = inotify.CREATE | inotify.MODIFY | inotify.MOVED_TO | inotify.CLOSE_WRITE
        try:
            self.runs[self.ino.add_watch(str(run.dir), mask)] = run
        except OSError:
            return
        run.watched = True

    def _read(self) -> None:
        if self.ino is None:
            return
        with contextlib.suppress(OSError):
            for wd, mask in self.ino.read(0):
                run = self.runs.get(wd)
                if mask & inotify.IGNORED:  # its directory is gone
                    self.runs.pop(wd, None)
                if run is not None:
                    run.changed.set()


@dataclass
class NodeSpare:
    """A supervisor started ahead, waiting (behind its keeper) for its run directory."""

    proc: subprocess.Popen[bytes]
    pid: int = 0
    ready: bool = False
    born: float = field(default_factory=time.monotonic)

    def usable(self) -> bool:
        return (
            self.pid > 0 and self.proc.poll() is None and time.monotonic() - self.born < SPARE_AGE
        )

    def hand(self, run_dir: Path) -> bool:
        if self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(os.fsencode(run_dir) + b"\0")
            self.proc.stdin.close()
        except OSError:
            return False
        return True

    def dismiss(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def wait_ready(self) -> None:
        """(In a worker thread.) Its supervisor's pid, then the EOF that says it is ready."""
        out = self.proc.stdout
        if out is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.pid = int(out.readline() or 0)
            while out.read(4096):
                pass
            out.close()
        self.ready = True


class NodeHost:
    """The runs of one node. Every method is called by a caller's relay (or ``subagents
    ray status`` / ``down``)."""

    def __init__(self) -> None:
        import ray

        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.runs: dict[str, HostedRun] = {}
        self.spares: list[NodeSpare] = []
        # Forks the runs' supervisors while runs come (ray_forks.py); spares meanwhile.
        self.forks = HostTemplate((*KEEPER, str(os.getpid()), SPARE))
        self.leaving: list[NodeSpare] = []
        # Commits being sent here: when their sender was told to send.
        self.incoming: dict[str, float] = {}
        self.packs = 0
        self.last_start = 0.0
        # (when, how many ran then): the runs at once over the last SPARE_IDLE seconds.
        self.peaks: collections.deque[tuple[float, int]] = collections.deque()
        # Why runs were ended here by someone else than their relay (`ray down`).
        self.reasons: dict[str, str] = {}
        # Runs closed while their supervisor was still finishing: dropped once it is gone.
        self.closing: list[HostedRun] = []
        self.dir_changes: DirChanges | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.watcher: asyncio.Task[None] | None = None
        self.warmer: asyncio.Task[None] | None = None
        make_private_dir(node_runs_dir())
        self.dir = node_runs_dir() / self.node_id
        make_private_dir(self.dir)
        self._clear_stale()

    def _clear_stale(self) -> None:
        """What a host of this node that died left: its runs ended with it (their
        supervisors saw it die), and nobody will collect them."""
        for stale in self.dir.iterdir():
            drop_run_dir(stale)

    # ---- for the caller ---------------------------------------------------

    async def hello(self) -> HostHello:
        return {"node": self.node_id, "protocol": PROTOCOL, "pid": os.getpid()}

    async def start(
        self,
        run_id: str,
        meta: JsonObject,
        caller_dir: str,
        files: dict[str, bytes],
        ship: ShipmentRecord | None = None,
    ) -> HostStartReply:
        """Start the run's supervisor here (once: a second call for the run answers as
        the first did)."""
        self._watch()
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = HostedRun(run_id, self.dir / run_id, str(meta.get("backend")))
            self.last_start = time.monotonic()
            try:
                if ship is None:  # a few small files
                    self._prepare(run, meta, caller_dir, files, ship)
                else:  # git: a worktree checked out
                    await asyncio.to_thread(self._prepare, run, meta, caller_dir, files, ship)
                if self.dir_changes is None:
                    self.dir_changes = DirChanges()
                self.dir_changes.watch(run)
                await self._spawn(run)
            except Exception as exc:
                run.error = f"could not start the run on Ray node {self.node_id}: {exc}"
            finally:
                run.ready.set()
        await run.ready.wait()
        return {"node": self.node_id, "error": run.error}

    async def pull(self, run_id: str, offsets: dict[str, int], wait: float) -> HostPullReply:
        """New bytes of each artifact past ``offsets``, waiting up to ``wait`` s for any;
        ``result`` only once every byte before it has been handed over."""
        run = self.runs.get(run_id)
        if run is None:
            why = self.reasons.get(run_id) or "it was restarted, or the run was ended there"
            return {
                "node": self.node_id,
                "known": False,
                "chunks": {},
                "result": None,
                "alive": False,
                "error": f"the subagents host on Ray node {self.node_id} no longer has this"
                f" run: {why}",
            }
        await run.ready.wait()
        deadline = time.monotonic() + wait
        finishing: float | None = None
        while True:
            run.changed.clear()  # before looking: a change from now on wakes the wait
            result = run.result()  # read before the files: they are complete by then
            alive = run.alive()
            chunks: dict[str, bytes] = {}
            more = False
            for name in RELAYED:
                data = read_at(run.dir / name, offsets.get(name, 0), PULL_CHUNK + 1)
                if len(data) > PULL_CHUNK:
                    data, more = data[:PULL_CHUNK], True
                if data:
                    chunks[name] = data
            now = time.monotonic()
            if result is None and alive and b'"run_finished"' in chunks.get("events.jsonl", b""):
                # Its result follows within milliseconds: one reply brings both.
                finishing = finishing or now + FINISHING
                if now < finishing:
                    await self._changed(run, finishing - now)
                    continue
            if chunks or result is not None or not alive or now >= deadline:
                return {
                    "node": self.node_id,
                    "known": True,
                    "chunks": chunks,
                    "result": None if more else result,
                    "alive": alive,
                    "error": run.error or (None if alive else self._orphan_cleanup(run)),
                    "reason": self.reasons.get(run_id),
                }
            await self._changed(run, deadline - now)

    async def _changed(self, run: HostedRun, at_most: float) -> None:
        """Until the run's directory changes (inotify), or a look at its supervisor is due."""
        if run.watched:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.changed.wait(), min(at_most, LOOK))
        else:
            await asyncio.sleep(min(at_most, POLL))

    async def stop(self, run_id: str, sig: int) -> bool:
        """Signal the run's supervisor (its own process group): SIGTERM aborts the run."""
        run = self.runs.get(run_id)
        if run is None or not run.alive() or not run.supervisor_pid:
            return False
        return procs.killpg(run.supervisor_pid, sig)

    async def abort(self, run_id: str, why: str) -> bool:
        """End a run for someone else than its caller (`subagents ray down --force`):
        its relay gets its aborted result, and ``why``. True if it was still running."""
        self.reasons[run_id] = why
        while len(self.reasons) > ENDED_KEPT:
            self.reasons.pop(next(iter(self.reasons)))
        run = self.runs.get(run_id)
        if run is None or not run.alive():
            return False
        await self._end(run)
        return True

    async def _end(self, run: HostedRun) -> None:
        """SIGTERM to its supervisor, a grace, then SIGKILL (and its child's group, which a
        killed supervisor cannot end)."""
        procs.killpg(run.supervisor_pid, signal.SIGTERM)
        deadline = time.monotonic() + CLOSE_GRACE
        while run.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if run.alive():
            procs.killpg(run.supervisor_pid, signal.SIGKILL)
            self._orphan_cleanup(run)

    async def close(self, run_id: str) -> bool:
        """The caller has everything, or gives the run up: end it if it still runs,
        release its unit, drop the node's copy. True if it was still running."""
        run = self.runs.pop(run_id, None)
        if run is None:
            await asyncio.to_thread(remove_placement, run_id)
            return False
        await run.ready.wait()
        ending = run.result() is None and run.alive()
        if ending:
            await self._end(run)
        # The unit and the files go after the answer: the caller waits for neither.
        self._background(self._release(run))
        if run.alive():  # its result is out and it is exiting: the watch drops it
            self.closing.append(run)
        else:
            self._background(asyncio.to_thread(self._drop, run))
        return ending

    def _background(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)  # (held: the loop keeps only a weak reference)
        task.add_done_callback(self.tasks.discard)

    async def changes(self, run_id: str, exclude: str) -> bytes:
        """A shipped run's branch as a pack, without what ``exclude`` (the commit it was
        sent) reaches: what the caller lacks."""
        from subagents.worktree import pack

        result = self.runs[run_id].result()
        worktree = result.get("worktree") if result is not None else None
        if worktree is None:
            raise ValueError(f"run {run_id} left no worktree on Ray node {self.node_id}")
        return await asyncio.to_thread(pack, Path(worktree["repo"]), worktree["commit"], exclude)

    async def want_commit(self, commit: str) -> bool:
        """Whether the caller should send ``commit``: not when the node has it, or while
        another caller is sending it (waited for)."""
        from subagents.worktree import cache_repository, has_commit

        repo = await asyncio.to_thread(cache_repository, cache_dir())
        while True:
            if await asyncio.to_thread(has_commit, repo, commit):
                return False
            told = self.incoming.get(commit)
            if told is None or time.monotonic() - told > SEND_PATIENCE:
                self.incoming[commit] = time.monotonic()
                return True
            await asyncio.sleep(0.1)

    async def receive_pack(self, commit: str, data: bytes) -> None:
        """Keep a pack holding ``commit`` (see ``want_commit``)."""
        from subagents.worktree import unpack

        try:
            await asyncio.to_thread(unpack, cache_dir(), data, f"refs/sent/{commit}", commit)
            self.packs += 1
        finally:
            self.incoming.pop(commit, None)

    async def status(self) -> HostStatus:
        return {
            "node": self.node_id,
            "pid": os.getpid(),
            "protocol": PROTOCOL,
            "spares": sum(1 for s in self.spares if s.usable()),
            "template": self.forks.state(),
            "packsReceived": self.packs,
            "runs": [
                {
                    "runId": r.run_id,
                    "backend": r.backend,
                    "running": r.alive(),
                    "supervisorPid": r.supervisor_pid,
                    "startedAt": r.started,
                    "error": r.error,
                }
                for r in self.runs.values()
            ],
        }

    # ---- starting a run ---------------------------------------------------

    def _prepare(
        self,
        run: HostedRun,
        meta: JsonObject,
        caller_dir: str,
        files: dict[str, bytes],
        ship: ShipmentRecord | None,
    ) -> None:
        """(In a worker thread.) The run's directory: its files, its spec, its worktree."""
        make_private_dir(run.dir)
        for name, data in files.items():
            with open_private(run.dir / Path(name).name, "wb") as f:
                f.write(data)
        local = localize(meta, caller_dir, run.dir)
        if ship is not None:
            from subagents.worktree import cache_repository, worktree_from

            repo = cache_repository(cache_dir())
            record = object_of(local["worktree"])
            base = worktree_from(
                repo,
                ship["commit"],
                Path(str(record["path"])),
                str(record["branch"]),
                ship["patch"],
            )
            local["worktree"] = {**record, "repo": str(repo), "base": base}
        # A copy its supervisor reads once: no fsync (the caller's is the record).
        with open_private(run.dir / "meta.json", "wb") as f:
            f.write(dumps(local))

    async def _spawn(self, run: HostedRun) -> None:
        spare = self._take_spare()
        while spare is not None and not spare.hand(run.dir):
            self.leaving.append(spare)
            spare = self._take_spare()
        if spare is not None:
            run.proc, run.supervisor_pid = spare.proc, spare.pid
        elif (forked := await self.forks.fork(run.dir)) is not None:
            run.forked, run.supervisor_pid = forked, forked["pid"]
        else:
            log = run.dir / LOG_FILE
            open_private(log, "ab").close()
            # Here, on the loop's thread (see the module's docstring).
            run.proc = subprocess.Popen(
                [*KEEPER, str(os.getpid()), str(log), *supervisor_argv(run.dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
            assert run.proc.stdout is not None
            line = await asyncio.to_thread(run.proc.stdout.readline)
            run.proc.stdout.close()
            run.supervisor_pid = int(line or 0)
        self._warm()
        if not run.supervisor_pid:
            raise OSError("its supervisor did not start")

    def _take_spare(self) -> NodeSpare | None:
        """A spare to hand a run to: a ready one first, else the oldest still starting."""
        self.spares.sort(key=lambda s: not s.ready)
        for spare in self.spares:
            if spare.usable():
                self.spares.remove(spare)
                return spare
        return None  # (the gone ones are dismissed by the watch)

    # ---- spares -----------------------------------------------------------

    def _spare_target(self) -> int:
        """As many as ran at once lately (a wave of starts as big as the last finds a
        spare each), one more, at most SPARE_MAX; none once no run started for a while."""
        now = time.monotonic()
        if now - self.last_start > SPARE_IDLE:
            self.peaks.clear()
            self.forks.want(False)
            return 0
        running = sum(1 for r in self.runs.values() if r.alive())
        self.peaks.append((now, running))
        while self.peaks and now - self.peaks[0][0] > SPARE_IDLE:
            self.peaks.popleft()
        self.forks.want(True)  # none while its template serves
        return 0 if self.forks.serving() else min(SPARE_MAX, 1 + max(n for _, n in self.peaks))

    def _warm(self) -> None:
        if len(self.spares) < self._spare_target() and (self.warmer is None or self.warmer.done()):
            self.warmer = asyncio.get_running_loop().create_task(self._warm_up())

    async def _warm_up(self) -> None:
        """Start spares one after another (each an interpreter's start on this node)."""
        while len(self.spares) < self._spare_target():
            try:
                proc = subprocess.Popen(
                    [*KEEPER, str(os.getpid()), SPARE, *handover.command()],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    close_fds=True,
                )
            except OSError:
                return  # runs start their own supervisors, as they always could
            spare = NodeSpare(proc)
            self.spares.append(spare)
            await asyncio.to_thread(spare.wait_ready)

    # ---- keeping watch ----------------------------------------------------

    def _watch(self) -> None:
        if self.watcher is None or self.watcher.done():
            self.watcher = asyncio.get_running_loop().create_task(self._keep_watch())

    async def _keep_watch(self) -> None:
        """Release the unit of every run whose supervisor ended (followed or not), drop
        what nobody collected, and keep the spares to their target."""
        while True:
            await asyncio.sleep(WATCH)
            now = time.monotonic()
            for run in list(self.runs.values()):
                if not run.ready.is_set():
                    continue
                if run.ended is None and not run.alive():
                    run.ended = now
                    await self._release(run)
                elif run.ended is not None and now - run.ended > UNCOLLECTED:
                    self.runs.pop(run.run_id, None)
                    await asyncio.to_thread(self._drop, run)
            for run in [r for r in self.closing if not r.alive()]:
                self.closing.remove(run)
                await asyncio.to_thread(self._drop, run)
            target = self._spare_target()
            keep = [s for s in self.spares if s.proc.poll() is None and now - s.born < SPARE_AGE]
            self.leaving += [s for s in self.spares if s not in keep] + keep[target:]
            self.spares = keep[:target]
            for spare in self.leaving:
                spare.dismiss()
            self.leaving = [s for s in self.leaving if s.proc.poll() is None]
            self._warm()

    async def _release(self, run: HostedRun) -> None:
        if not run.released:
            run.released = True
            with contextlib.suppress(Exception):
                await asyncio.to_thread(remove_placement, run.run_id)

    def _drop(self, run: HostedRun) -> None:
        """(In a worker thread.)"""
        drop_run_dir(run.dir)

    def _orphan_cleanup(self, run: HostedRun) -> str | None:
        """The supervisor ended: without a result, kill whatever its child left and say so."""
        if run.result() is not None:
            return None
        child = started_event(read_events(run.dir / "events.jsonl"))
        if child is not None:
            procs.end_recorded_group(child, run.dir.name)
        code = f" (code {run.proc.returncode})" if run.proc is not None else ""
        return f"the supervisor on Ray node {self.node_id} ended{code} without a result"
