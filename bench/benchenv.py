"""What every benchmark does before it measures: run the code as an installed package does."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def like_installed(warm: bool = False) -> None:
    """Compiled bytecode, read from ``__pycache__``: this environment may set
    PYTHONDONTWRITEBYTECODE, and then every start would compile the package anew.
    Commands run in-process (``SUBAGENTS_WARM=0``: the figures of the processes each starts,
    their roles by command line) unless ``warm``: then with warm command servers of the
    benchmark's own (cli/warmserver.py), in a private runtime dir; its first ``subagents run``
    starts one, as a user's first does, never one found already running; stopped as the
    benchmark exits."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    if not warm:
        os.environ["SUBAGENTS_WARM"] = "0"
        return
    os.environ.pop("SUBAGENTS_WARM", None)
    runtime = tempfile.mkdtemp(prefix="bench-runtime-")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    atexit.register(_stop_warm_servers, runtime)


def _stop_warm_servers(runtime: str) -> None:
    from subagents.cli.warmclient import ping

    where = Path(runtime) / "subagents"
    for sock in where.glob("*.sock") if where.is_dir() else ():
        found = ping(str(sock))
        if found is not None:
            with contextlib.suppress(OSError):
                os.kill(found[0], signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)
