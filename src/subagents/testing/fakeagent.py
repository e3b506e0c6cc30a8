"""A scriptable fake agent CLI: emits any backend's stream with any timing.

It ignores its arguments (so it can stand in for any backend's binary) and reads
its script, a JSON list of steps, from the file named by ``$SUBAGENTS_FAKE_SCRIPT``.
Steps, run in order:

``{"emit": obj}``             one JSON line on stdout (a string is written as is)
``{"copy_stdin": path}``      copy all of stdin into a file (how the task arrived)
``{"raw": base64}``            these bytes on stdout exactly (invalid UTF-8, anything)
``{"replay": path, "delay": s}``  every line of a captured stream, ``delay`` apart
``{"sleep": s}``              pause
``{"wait_for": path}``        pause until ``path`` exists (a test's gate; bounded at 120 s)
``{"stderr": text, "times": n}``  write ``text`` (``n`` times) to stderr
``{"big_line": n}``           one non-JSON line of ``n`` bytes
``{"ignore_sigterm": true}``  from now on SIGTERM does nothing
``{"grandchild": s, "pidfile": path}``  fork a process that keeps stdout open for ``s`` seconds
``{"pidfile": path}``         write this process's pid
``{"kill": "SIGKILL"}``       die by that signal
``{"write": path, "text": t}``  write a file (relative to the cwd; directories made;
                              ``{task}`` in ``t`` is the last argument, the task)
``{"session": true}``         as pi does: a session file in the ``--session-dir`` argument's
                              directory, naming the ``--fork`` argument (the session resumed)
``{"run": [argv...]}``        run a command (an argv list, no shell) in the cwd and wait for it
``{"exit": code}``            exit now
``{"hang": true}``            linger forever (until killed)

After the last step it exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

SCRIPT_ENV = "SUBAGENTS_FAKE_SCRIPT"


class Step(TypedDict, total=False):
    """One step of a script (the module's docstring says what each does)."""

    emit: Any
    copy_stdin: str
    raw: str
    replay: str
    delay: float
    sleep: float
    wait_for: str
    stderr: str
    times: int
    big_line: int
    ignore_sigterm: bool
    grandchild: float
    pidfile: str
    kill: str
    write: str
    text: str
    session: bool
    exit: int
    hang: bool
    run: list[str]


def _publish(path: str, text: str) -> None:
    """Write a file whole or not at all: a test polls for it to appear, then reads it."""
    tmp = f"{path}.{os.getpid()}.tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, path)


def _out(data: bytes) -> None:
    os.write(1, data) if len(data) < 65536 else sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def run_step(step: Step) -> None:
    if "emit" in step:
        item = step["emit"]
        text = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
        _out(text.encode() + b"\n")
    elif "copy_stdin" in step:
        Path(step["copy_stdin"]).write_bytes(sys.stdin.buffer.read())
    elif "raw" in step:
        import base64

        _out(base64.b64decode(step["raw"]))
    elif "replay" in step:
        delay = float(step.get("delay", 0))
        for line in Path(step["replay"]).read_bytes().splitlines(keepends=True):
            _out(line if line.endswith(b"\n") else line + b"\n")
            if delay:
                time.sleep(delay)
    elif "sleep" in step:
        time.sleep(float(step["sleep"]))
    elif "wait_for" in step:
        gate, until = Path(step["wait_for"]), time.monotonic() + 120
        while not gate.exists() and time.monotonic() < until:
            time.sleep(0.02)
    elif "stderr" in step:
        text = str(step["stderr"]) * int(step.get("times", 1))
        sys.stderr.write(text)
        sys.stderr.flush()
    elif "big_line" in step:
        _out(b"x" * int(step["big_line"]) + b"\n")
    elif step.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif "grandchild" in step:
        pid = os.fork()
        if pid == 0:  # keeps the inherited stdout open
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            time.sleep(float(step["grandchild"]))
            os._exit(0)
        if "pidfile" in step:
            _publish(step["pidfile"], str(pid))
    elif "pidfile" in step:
        _publish(step["pidfile"], str(os.getpid()))
    elif "kill" in step:
        os.kill(os.getpid(), getattr(signal, str(step["kill"])))
        time.sleep(5)
    elif "write" in step:
        target = Path(step["write"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(step.get("text", "")).replace("{task}", sys.argv[-1].strip()))
    elif step.get("session"):
        args = sys.argv
        if "--session-dir" in args:
            directory = Path(args[args.index("--session-dir") + 1])
            directory.mkdir(parents=True, exist_ok=True)
            forked = args[args.index("--fork") + 1] if "--fork" in args else None
            (directory / "fake-session.jsonl").write_text(json.dumps({"forkedFrom": forked}) + "\n")
    elif "run" in step:
        import subprocess

        subprocess.run(
            step["run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False
        )
    elif "exit" in step:
        sys.stdout.flush()
        os._exit(int(step["exit"]))
    elif step.get("hang"):
        while True:
            time.sleep(3600)
    else:
        raise SystemExit(f"fakeagent: unknown step {step!r}")


def main() -> None:
    path = os.environ.get(SCRIPT_ENV)
    if not path:
        raise SystemExit(f"fakeagent: ${SCRIPT_ENV} is not set")
    for step in json.loads(Path(path).read_text()):
        run_step(step)


def write_launcher(directory: Path, name: str = "fake-agent") -> Path:
    """An executable that runs this fake agent with the current interpreter (its own
    process: the shell execs it). ``--version`` alone is answered at once, with no
    version in it: a fake pi runs as a pi too old for live input does (json mode)."""
    import shlex

    path = directory / name
    python = shlex.quote(sys.executable)
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$#" = 1 ] && [ "$1" = "--version" ]; then echo "fake-agent"; exit 0; fi\n'
        f'exec {python} -c "from subagents.testing.fakeagent import main; main()" "$@"\n'
    )
    path.chmod(0o755)
    return path


def write_script(directory: Path, steps: list[Step], name: str = "script.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(steps))
    return path


if __name__ == "__main__":
    main()
