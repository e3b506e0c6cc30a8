"""An agent CLI's installed version, where a run's command line depends on it (pi: rpc mode
since 0.80.4). An npm-installed CLI says it in its package's ``package.json`` (the one whose
``bin`` is the binary): read there, no process started. Else ``<bin> --version`` is run
once per binary and its answer kept in ``$SUBAGENTS_HOME/cache/versions.json`` under the
binary's real path, size and modification time (reinstalling the CLI reads it again)."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from subagents.backends import Backend
from subagents.core import procs
from subagents.core.files import read_json, write_json_atomic
from subagents.core.records import object_of

VERSION_TIMEOUT = 10.0
# What is read of a ``--version`` answer at most: a version is in its first line.
READ_AT_MOST = 1 << 16
CACHE_FILE = Path("cache") / "versions.json"
_VERSION = re.compile(r"\b(\d+\.\d+\.\d+)\b")
_lock = threading.Lock()
_seen: dict[str, str | None] = {}


def parse_version(text: str) -> str | None:
    """The first ``X.Y.Z`` in a ``--version`` output (``codex-cli 0.169.0`` -> ``0.169.0``)."""
    found = _VERSION.search(text)
    return found.group(1) if found else None


def _first_line(data: bytes) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def _error_line(data: bytes) -> str:
    """The line naming the error (a Node stack starts with a file path), else the first."""
    for line in data.decode("utf-8", "replace").splitlines():
        if re.match(r"\s*\w*(Error|Exception)\b", line):
            return line.strip()[:200]
    return _first_line(data)


def read_version(argv: list[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(the first line it printed, None)`` or ``(None, why it could not be read)``: the
    ``--version`` command in its own process group, bounded in time and in what is read of
    it (a stand-in that prints a whole stream is cut off), its group killed after."""
    what = "`" + " ".join([Path(argv[0]).name, *argv[1:]]) + "`"
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,  # its own group, so a timeout kills all of it
        )
    except OSError as exc:
        return None, f"could not run it: {exc.strerror or exc}"
    assert proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    open_pipes = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    deadline = time.monotonic() + VERSION_TIMEOUT
    with selectors.DefaultSelector() as sel:
        for fd in open_pipes:
            sel.register(fd, selectors.EVENT_READ)
        while open_pipes and len(out) + len(err) < READ_AT_MOST:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, READ_AT_MOST)
                if chunk:
                    open_pipes[key.fd] += chunk
                else:
                    sel.unregister(key.fd)
                    del open_pipes[key.fd]
    timed_out = bool(open_pipes) and time.monotonic() >= deadline
    try:
        code = proc.wait(timeout=0 if open_pipes else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        code = None
    procs.killpg(proc.pid)  # whatever it left (a child holding the pipe, a stream still going)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2.0)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    if timed_out or (code is None and not out and not err):
        return None, f"{what} did not answer within {VERSION_TIMEOUT:g}s"
    if code not in (0, None):
        detail = _error_line(bytes(err)) or _first_line(bytes(out))
        return None, f"{what} failed (exit {code})" + (f": {detail}" if detail else "")
    # (pi 0.73 prints its version on stderr)
    return (_first_line(bytes(out)) or _first_line(bytes(err)) or "unknown"), None


def package_version(real: str) -> str | None:
    """The version in the ``package.json`` of the npm package whose ``bin`` is ``real``."""
    target = Path(real)
    for parent in list(target.parents)[:5]:
        try:
            data = read_json(parent / "package.json")
        except (OSError, ValueError):
            continue
        package = object_of(data)
        bins = package.get("bin")
        paths = [bins] if isinstance(bins, str) else list(object_of(bins).values())
        version = package.get("version")
        if isinstance(version, str) and any(
            isinstance(p, str) and os.path.realpath(parent / p) == real for p in paths
        ):
            return parse_version(version)
    return None


def installed_version(
    backend: Backend, binary: str, env: Mapping[str, str], home: Path, *, probe: bool = True
) -> str | None:
    """The version of ``binary`` (``X.Y.Z``), or None when it cannot be told (``probe``
    False: nor without running it)."""
    try:
        real = os.path.realpath(binary)
        st = os.stat(real)
    except OSError:
        return None
    key = f"{real}\0{st.st_size}\0{st.st_mtime_ns}"
    with _lock:
        if key in _seen:
            return _seen[key]
        found = package_version(real)
        if found is not None:
            _seen[key] = found
            return found
        cache_path = home / CACHE_FILE
        cache: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = object_of(read_json(cache_path))
            cache = {k: v for k, v in loaded.items() if isinstance(v, str)}
        known = cache.get(key)
        problem = None
        if known is None and not probe:
            return None
        if known is None:
            line, problem = read_version(backend.version_argv(binary), env)
            known = parse_version(line or "") or ""
            # Kept: a version, or an answer without one (a stand-in, a wrapper). Not kept: a
            # failure (its Node too old, say), which the next run reads again.
            if problem is None:
                cache = {k: v for k, v in cache.items() if not k.startswith(real + "\0")}
                cache[key] = known
                with contextlib.suppress(OSError):
                    cache_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                    write_json_atomic(cache_path, cache)
        version = known or None
        if problem is None:
            _seen[key] = version
        return version
