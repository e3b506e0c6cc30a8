"""Warm command servers in tests (cli/warmserver.py): a runtime dir of the test's own, the
servers serving in it found by asking them (``ping``), and stopped at the test's end."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from subagents.cli.warmclient import ping
from support.checks import eventually


@dataclass
class Servers:
    runtime: Path  # the XDG_RUNTIME_DIR the commands get

    @property
    def where(self) -> Path:
        return self.runtime / "subagents"

    def sockets(self) -> list[Path]:
        return sorted(self.where.glob("*.sock")) if self.where.is_dir() else []

    def serving(self) -> list[tuple[int, float, int]]:
        """(pid, started, commands served) of each server answering here."""
        return [found for sock in self.sockets() if (found := ping(str(sock))) is not None]

    def one(self) -> tuple[int, float, int]:
        """The server serving here, once there is one (started by a first command)."""
        assert eventually(lambda: len(self.serving()) == 1), self.sockets()
        return self.serving()[0]

    def stop(self) -> None:
        """Every server here stopped, and gone."""
        pids = [pid for pid, _, _ in self.serving()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        assert eventually(lambda: not any(alive(pid) for pid in pids)), pids


def alive(pid: int) -> bool:
    """Running (not a zombie): the warm server is not our child, so nothing here reaps it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextlib.contextmanager
def warm_servers() -> Iterator[Servers]:
    """A runtime dir (short: a socket's path has a length limit) whose servers are stopped
    at the end, whatever happened."""
    runtime = Path(tempfile.mkdtemp(prefix="w", dir="/tmp"))
    runtime.chmod(0o700)
    servers = Servers(runtime)
    try:
        yield servers
    finally:
        try:
            servers.stop()
        finally:
            shutil.rmtree(runtime, ignore_errors=True)
