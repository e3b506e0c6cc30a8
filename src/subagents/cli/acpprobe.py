"""What an ACP agent advertises: ``doctor`` starts it, sends ``initialize`` and reads the
answer (its name, version, protocol version and capabilities), then stops it. Bounded by a
timeout; the agent's whole process group is stopped whatever it does."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Mapping

from subagents.core.procs import stop_group
from subagents.types import JsonObject, JsonValue

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
        "clientInfo": {"name": "subagents-doctor", "version": "1"},
    },
}


def probe(
    argv: list[str], env: Mapping[str, str], timeout: float = 30.0
) -> tuple[JsonObject | None, str | None]:
    """``(initialize's result, None)``, or ``(None, why not)``."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        return None, f"could not start: {exc.strerror or exc}"
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        return _answer(proc, timeout)
    except OSError:
        return None, "it closed its input before initialize"
    finally:
        stop_group(proc.pid, 2.0)
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()


def _answer(proc: subprocess.Popen[bytes], timeout: float) -> tuple[JsonObject | None, str | None]:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    buffer = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None, "it exited without answering initialize (not an ACP agent?)"
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                found = _response(line)
                if found is not None:
                    return found
    return None, f"no answer to initialize within {timeout:g} s"


def _response(line: bytes) -> tuple[JsonObject | None, str | None] | None:
    try:
        msg: JsonValue = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("id") != 1 or "method" in msg:
        return None
    result = msg.get("result")
    if isinstance(result, dict):
        return result, None
    return None, f"initialize refused: {json.dumps(msg.get('error'))[:200]}"


def advertised(result: JsonObject) -> str:
    """What an initialize result advertises, in a few words."""
    caps = result.get("agentCapabilities")
    caps = caps if isinstance(caps, dict) else {}
    words = [f"protocol {result.get('protocolVersion')}"]
    if caps.get("loadSession") is True:
        words.append("loadSession")
    for group in ("promptCapabilities", "mcpCapabilities"):
        inner = caps.get(group)
        if isinstance(inner, dict):
            words += [k for k, v in sorted(inner.items()) if v is True]
    return ", ".join(words)
