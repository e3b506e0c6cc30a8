"""A CLI driven over its stdin and stdout, as a live-control supervisor will: one JSON
object a line each way (split on LF only), every stdout line timestamped by a reader
thread, every wait bounded, the process group killed when it outlives its close."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Obj = dict[str, Any]


class Child:
    """One CLI on pipes: a reader thread timestamps every stdout line (split on LF only)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.out: list[tuple[float, bytes]] = []
        self.sent: list[tuple[float, bytes]] = []
        self.stderr = b""
        self.eof = False
        self.closed_at: float | None = None
        self.ran_until_close = True
        self.exited_at: float | None = None
        self.cv = threading.Condition()
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        while chunk := os.read(fd, 65536):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            with self.cv:
                self.out.extend((self.now(), line) for line in lines)
                self.cv.notify_all()
        with self.cv:
            if buf:
                self.out.append((self.now(), buf))
            self.eof = True
            self.cv.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def objs(self) -> list[Obj]:
        out = []
        for _, line in list(self.out):
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            out.append(obj if isinstance(obj, dict) else {})
        return out

    def wait_for(self, pred: Callable[[Obj], bool], timeout: float = 60, start: int = 0) -> int:
        """The index of the first stdout object at or after ``start`` matching ``pred``."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for i in range(start, len(self.out)):
                    try:
                        obj = json.loads(self.out[i][1])
                    except ValueError:
                        continue
                    if isinstance(obj, dict) and pred(obj):
                        return i
                if self.eof:
                    raise EOFError(f"stdout ended after {len(self.out)} lines")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"nothing matched in {timeout}s ({len(self.out)} lines)")
                self.cv.wait(left)

    def get(self, pred: Callable[[Obj], bool], timeout: float = 60, start: int = 0) -> Obj:
        i = self.wait_for(pred, timeout, start)
        return self.objs()[i]

    def send(self, obj: Obj) -> int:
        """Write one JSON line; the number of stdout lines seen before it."""
        return self.send_raw(json.dumps(obj, separators=(",", ":")).encode())

    def send_raw(self, line: bytes) -> int:
        assert self.proc.stdin is not None
        with self.cv:
            self.sent.append((self.now(), line))
            seen = len(self.out)
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()
        return seen

    def quiet(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self, timeout: float = 30) -> int:
        """Close stdin; the exit code (the process group is killed after ``timeout``)."""
        assert self.proc.stdin is not None
        self.ran_until_close = self.proc.poll() is None
        self.closed_at = self.now()
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            rc = self.proc.wait()
        self.exited_at = self.now()
        for thread, pipe in zip(self._threads, (self.proc.stdout, self.proc.stderr), strict=True):
            thread.join(timeout=5)  # a grandchild may hold the pipe: bounded
            if pipe is not None and not thread.is_alive():
                pipe.close()
        return rc

    def timeline(self) -> str:
        rows = [(t, "<", line) for t, line in self.out] + [(t, ">", line) for t, line in self.sent]
        rows.sort(key=lambda r: r[0])
        return "\n".join(
            f"{t:8.3f} {d} {line.decode(errors='replace')[:200]}" for t, d, line in rows
        )


def response(rid: str | int) -> Callable[[Obj], bool]:
    return lambda o: o.get("id") == rid and ("result" in o or "error" in o or "success" in o)


class Codex:
    """codex app-server's JSON-RPC: requests numbered from 1, one thread."""

    def __init__(self, child: Child, cwd: Path) -> None:
        self.child = child
        self.next_id = 0
        self.thread = ""
        self.call("initialize", {"clientInfo": {"name": "subagents", "version": "0.0"}})
        child.send({"method": "initialized"})
        started = self.call(
            "thread/start",
            {
                "cwd": str(cwd),
                "approvalPolicy": "never",
                "sandbox": "danger-full-access",
                "ephemeral": True,
            },
        )
        self.thread = started["result"]["thread"]["id"]

    def request(self, method: str, params: Obj) -> int:
        self.next_id += 1
        self.child.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def call(self, method: str, params: Obj) -> Obj:
        return self.child.get(response(self.request(method, params)))

    def turn(self, text: str) -> str:
        answer = self.call("turn/start", {"threadId": self.thread, "input": [text_input(text)]})
        return str(answer["result"]["turn"]["id"])


def text_input(text: str) -> Obj:
    return {"type": "text", "text": text}


def notified(method: str, **match: str) -> Callable[[Obj], bool]:
    def pred(o: Obj) -> bool:
        if o.get("method") != method:
            return False
        params = o.get("params", {})
        item = params.get("item", {})
        return all(item.get(k) == v or params.get(k) == v for k, v in match.items())

    return pred
