"""The node's side of the ray launcher: one detached actor per run hosting the run's
supervisor, the same ``python -m subagents.supervisor RUN_DIR`` as on the caller's
machine, in a run directory on the node.

The caller's relay pulls the artifacts' new bytes and, once it exists, ``result.json``;
the supervisor owns the child's process group exactly as it does locally, so stopping a
run is a signal to the supervisor (never ``ray.cancel``, which cannot stop a running call
and would orphan the child). A small keeper process stands between the actor and the
supervisor (see ray_keeper.py), so that when the actor's process dies the supervisor gets
SIGTERM and ends the run properly: a lost actor never leaves a child running on its node.

This module imports Ray only where it asks for the node's id: the class is plain Python,
made an actor by the relay (``ray.remote(RunHost)``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from subagents.core import procs
from subagents.core.events import started_event
from subagents.core.files import make_private_dir, open_private, read_events, write_json_atomic
from subagents.core.tail import read_at
from subagents.launchers.base import supervisor_argv
from subagents.launchers.ray_keeper import die_with_parent
from subagents.supervisor.handover import LOG_FILE

# The artifacts relayed to the caller, in the order they are pulled.
RELAYED = ("events.jsonl", "transcript.md", "raw.jsonl", "stderr.log", LOG_FILE)
# At most this much of one file per pull: a huge raw.jsonl comes back in several.
PULL_CHUNK = 4 << 20
POLL = 0.02


def node_runs_dir() -> Path:
    """Where runs live on a node: ``$SUBAGENTS_RAY_RUNS``, else a private temp directory."""
    configured = os.environ.get("SUBAGENTS_RAY_RUNS")
    return (
        Path(configured)
        if configured
        else Path(tempfile.gettempdir()) / f"subagents-ray-{os.getuid()}"
    )


def _localize(meta: dict[str, Any], caller_dir: str, node_dir: Path) -> dict[str, Any]:
    """The caller's spec, made to run here: its run-dir paths (a system prompt file)
    point into the node's run dir, and an agent CLI the caller found at a path this node
    does not have is looked up on this node's PATH by name."""
    argv = [
        str(node_dir / a[len(caller_dir) + 1 :]) if a.startswith(caller_dir + os.sep) else a
        for a in meta["argv"]
    ]
    if argv and not os.access(argv[0], os.X_OK):
        found = shutil.which(os.path.basename(argv[0]))
        if found:
            argv[0] = found
    return {**meta, "argv": argv, "echo": False}


class RunHost:
    """One run's supervisor on this node. Methods are called from the caller's relay."""

    def __init__(
        self, run_id: str, meta: dict[str, Any], caller_dir: str, files: dict[str, bytes]
    ) -> None:
        import ray

        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.dir = node_runs_dir() / run_id
        make_private_dir(self.dir.parent)
        make_private_dir(self.dir)
        for name, data in files.items():
            with open_private(self.dir / Path(name).name, "wb") as f:
                f.write(data)
        write_json_atomic(self.dir / "meta.json", _localize(meta, caller_dir, self.dir))
        # The keeper (see ray_keeper.py) and the supervisor's pid, which it reports.
        self.proc: subprocess.Popen[bytes] | None = None
        self.supervisor_pid = 0
        self.spawn_error: str | None = None
        started = threading.Event()
        # The thread that starts the keeper lives as long as it does: PDEATHSIG fires
        # when the *thread* that forked a process ends, not only its process.
        threading.Thread(target=self._host, args=(started,), daemon=True).start()
        started.wait(30)

    def _host(self, started: threading.Event) -> None:
        log = self.dir / LOG_FILE
        open_private(log, "ab").close()
        keeper = [sys.executable, "-I", "-S", str(Path(__file__).with_name("ray_keeper.py"))]
        try:
            self.proc = subprocess.Popen(
                [*keeper, str(log), *supervisor_argv(self.dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                close_fds=True,
                preexec_fn=die_with_parent,
            )
            assert self.proc.stdout is not None
            self.supervisor_pid = int(self.proc.stdout.readline() or 0)
        except (OSError, ValueError) as exc:
            self.spawn_error = f"could not start the supervisor on Ray node {self.node_id}: {exc}"
        finally:
            started.set()
        if self.proc is not None:
            self.proc.wait()

    def where(self) -> dict[str, Any]:
        return {"node": self.node_id, "dir": str(self.dir), "pid": os.getpid()}

    def _alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pull(self, offsets: dict[str, int], wait: float) -> dict[str, Any]:
        """New bytes of each artifact past ``offsets``, waiting up to ``wait`` s for any;
        ``result`` only once every byte before it has been handed over."""
        deadline = time.monotonic() + wait
        while True:
            result = self._result()  # read before the files: they are complete by then
            alive = self._alive()
            chunks: dict[str, bytes] = {}
            more = False
            for name in RELAYED:
                data = read_at(self.dir / name, offsets.get(name, 0), PULL_CHUNK + 1)
                if len(data) > PULL_CHUNK:
                    data, more = data[:PULL_CHUNK], True
                if data:
                    chunks[name] = data
            if chunks or result is not None or not alive or time.monotonic() >= deadline:
                return {
                    "node": self.node_id,
                    "chunks": chunks,
                    "result": None if more else result,
                    "alive": alive,
                    "error": self.spawn_error or (None if alive else self._orphan_cleanup()),
                }
            time.sleep(POLL)

    def _result(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.dir / "result.json").read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _orphan_cleanup(self) -> str | None:
        """The supervisor ended: without a result, kill whatever its child left and say so."""
        if self._result() is not None:
            return None
        child = started_event(read_events(self.dir / "events.jsonl"))
        if child is not None:
            procs.end_recorded_group(child, self.dir.name)
        code = self.proc.returncode if self.proc is not None else None
        return f"the supervisor on Ray node {self.node_id} ended (code {code}) without a result"

    def stop(self, sig: int) -> bool:
        """Signal the supervisor (its own process group): SIGTERM aborts the run."""
        if not self._alive() or not self.supervisor_pid:
            return False
        return procs.killpg(self.supervisor_pid, sig)

    def close(self) -> None:
        """The caller has everything: end the supervisor if still there, drop the node's copy."""
        if self._alive():
            self.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)
