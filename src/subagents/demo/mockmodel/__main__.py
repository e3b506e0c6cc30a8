"""A foreground mock model server: ``python -m subagents.demo.mockmodel --help``."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from subagents.demo.mockmodel import (
    MockModelServer,
    Script,
    pi_argv,
    write_claude_config,
    write_codex_config,
    write_gemini_config,
    write_opencode_config,
    write_pi_config,
)

# --------------------------------------------------------------------------- CLI

_WRITERS: dict[str, Callable[[Path, str], dict[str, str]]] = {
    "claude": write_claude_config,
    "codex": write_codex_config,
    "gemini": write_gemini_config,
    "opencode": write_opencode_config,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m subagents.demo.mockmodel",
        description=__doc__.split("\n")[0] if __doc__ else None,
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    p.add_argument(
        "--final", dest="final_text", help="final answer text ({tool_output} is substituted)"
    )
    p.add_argument("--command", default="ls", help="shell command of the default tool call")
    p.add_argument("--tool", dest="tool_name", help="tool to call (default: the API's shell tool)")
    p.add_argument("--tool-args", help="tool arguments as JSON (default: run --command)")
    p.add_argument("--no-tool", action="store_true", help="answer text at once, no tool call")
    p.add_argument("--error-status", type=int)
    p.add_argument("--error-times", type=int, default=-1, help="with --error-status; -1 = always")
    p.add_argument(
        "--retry-after-ms", type=int, help="with --error-status: a retry-after-ms header"
    )
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between SSE chunks")
    p.add_argument("--text-chunks", type=int, default=1)
    p.add_argument(
        "--loop", action="store_true", help="call the tool every turn until a user message comes"
    )
    p.add_argument("--loop-limit", type=int, default=50, help="with --loop: at most this many")
    p.add_argument("--stubborn", action="store_true", help="with --loop: ignore user messages")
    p.add_argument("--reply", help="with --loop: the answer to a message ({message}: its text)")
    p.add_argument(
        "--usage", type=int, nargs=2, default=(10, 5), metavar=("IN", "OUT"), help="per answer"
    )
    p.add_argument("--pi-config", type=Path, metavar="DIR", help="also write a pi agent dir there")
    for name in _WRITERS:
        p.add_argument(
            f"--{name}-config", type=Path, metavar="DIR", help=f"also write a {name} config there"
        )
    a = p.parse_args(argv)
    tool_args = None
    if a.tool_args is not None:
        tool_args = json.loads(a.tool_args)
        if not isinstance(tool_args, dict):
            p.error("--tool-args must be a JSON object")
    script = Script(
        use_tool=not a.no_tool,
        tool_name=a.tool_name,
        tool_args=tool_args,
        command=a.command,
        final_text=a.final_text,
        error_status=a.error_status,
        error_times=a.error_times if a.error_status is not None else 0,
        retry_after_ms=a.retry_after_ms,
        delay_s=a.delay,
        chunk_delay_s=a.chunk_delay,
        text_chunks=a.text_chunks,
        usage=(a.usage[0], a.usage[1]),
        loop=a.loop,
        loop_limit=a.loop_limit,
        heed_messages=not a.stubborn,
    )
    if a.reply is not None:
        script.reply_text = a.reply
    with MockModelServer(script, host=a.host, port=a.port) as srv:
        print(srv.url, flush=True)
        if a.pi_config is not None:
            env = write_pi_config(a.pi_config, srv.url)
            print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
            print(" ".join(pi_argv("TASK")), flush=True)
        for name, writer in _WRITERS.items():
            target = getattr(a, f"{name}_config")
            if target is not None:
                env = writer(target, srv.url)
                print(f"{name}: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
