"""Deterministic agent stdout streams for the peer benchmark (bench/bench_peers.py).

    .venv/bin/python bench/streams.py NAME OUT [--quick]
    .venv/bin/python bench/streams.py --list

Same name, same size flag: the same bytes, on every machine. As a module:
``write(name, path, quick=False) -> bytes written`` and ``STREAMS`` (name -> backend).

Streams (full size; ``--quick`` is about a tenth of the events):
  tiny       pi, one short answer: 8 lines
  flat       pi, 100k tool calls: 200k ``tool_execution_*`` lines, ~49 MB
  quadratic  pi, 2,980 ``message_update`` lines repeating the growing answer, ~50 MB
  bigline    pi, an ``agent_end`` line of ~17 MB (the run's messages) after the answer
  claude     Claude Code stream-json, 20k ``assistant`` messages of ~2.5 kB, ~51 MB
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support import pistream as pi  # noqa: E402

CLAUDE_FIXTURE = ROOT / "tests" / "fixtures" / "streams" / "claude.jsonl"
FINAL_ANSWER = "All done: the benchmark run finished."

# Commands of the flat stream: plain words, quotes, pipes, a `bash -lc` wrapper.
COMMANDS = (
    "ls -la src/subagents",
    'grep -rn "def feed" src/subagents/backends | head -20',
    "git status --short",
    "python -m pytest -q tests/test_progress.py -k 'shorten and not slow'",
    "bash -lc 'cd /work/project && npm test -- --reporter=dot'",
    "cat pyproject.toml",
    "find . -name '*.py' -newer setup.cfg -print",
    "sed -n '1,80p' src/subagents/supervisor.py",
)
WORDS = (
    "the",
    "stream",
    "repeats",
    "every",
    "partial",
    "answer",
    "so",
    "each",
    "line",
    "is",
    "longer",
    "than",
    "the",
    "one",
    "before",
)


def _line(obj: dict[str, Any]) -> bytes:
    # pi and claude print compact JSON, one object a line.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}


def _final() -> dict[str, Any]:
    return pi.assistant([{"type": "text", "text": FINAL_ANSWER}], "stop")


def _pi_tail(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    final = _final()
    yield {"type": "message_start", "message": final}
    yield {"type": "message_end", "message": final}
    yield {"type": "turn_end", "message": final, "toolResults": []}
    yield {"type": "agent_end", "messages": [*messages, final]}


def tiny(quick: bool) -> Iterator[bytes]:
    user = _user("say done")
    for obj in (
        {"type": "agent_start"},
        {"type": "turn_start"},
        {"type": "message_start", "message": user},
        {"type": "message_end", "message": user},
        *_pi_tail([user]),
    ):
        yield _line(obj)


def flat(quick: bool) -> Iterator[bytes]:
    calls = 10_000 if quick else 100_000
    user = _user("run the commands")
    yield _line({"type": "agent_start"})
    yield _line({"type": "turn_start"})
    for i in range(calls):
        call_id = f"call_{i:06d}"
        command = COMMANDS[i % len(COMMANDS)]
        yield _line(
            {
                "type": "tool_execution_start",
                "toolCallId": call_id,
                "toolName": "bash",
                "args": {"command": command},
            }
        )
        output = f"{command}: line {i}\n" + "output of the command, as the tool returned it\n" * 3
        yield _line(
            {
                "type": "tool_execution_end",
                "toolCallId": call_id,
                "toolName": "bash",
                "result": {"content": [{"type": "text", "text": output}], "details": {}},
                "isError": False,
            }
        )
    for obj in _pi_tail([user]):
        yield _line(obj)


def quadratic(quick: bool) -> Iterator[bytes]:
    updates = 940 if quick else 2_980
    user = _user("write a long answer")
    yield _line({"type": "agent_start"})
    yield _line({"type": "turn_start"})
    text = ""
    for i in range(updates):
        delta = WORDS[i % len(WORDS)] + " "
        text += delta
        partial = pi.assistant([{"type": "text", "text": text}], "stop")
        yield _line(
            {
                "type": "message_update",
                "assistantMessageEvent": {
                    "type": "text_delta",
                    "contentIndex": 0,
                    "delta": delta,
                    "partial": partial,
                },
                "message": partial,
            }
        )
    for obj in _pi_tail([user]):
        yield _line(obj)


def bigline(quick: bool) -> Iterator[bytes]:
    """pi's agent_end carries every message of the run: one very long line."""
    messages = 100 if quick else 1_000
    body = ("x" * 79 + "\n") * 212  # ~17 kB of tool output per message
    history: list[dict[str, Any]] = [_user("read everything")]
    for i in range(messages):
        history.append(
            {
                "role": "toolResult",
                "toolCallId": f"call_{i:06d}",
                "toolName": "read",
                "content": [{"type": "text", "text": body}],
                "isError": False,
                "timestamp": 0,
            }
        )
    yield _line({"type": "agent_start"})
    yield _line({"type": "turn_start"})
    for obj in _pi_tail(history):
        yield _line(obj)


def claude(quick: bool) -> Iterator[bytes]:
    """Claude Code stream-json: init, one ``assistant`` line per message, the result."""
    messages = 2_000 if quick else 20_000
    fixture = CLAUDE_FIXTURE.read_bytes().splitlines(keepends=True)
    init, result = json.loads(fixture[0]), json.loads(fixture[-1])
    session = init["session_id"]
    yield _line(init)
    sentence = "Reading the next file and noting what it does for the summary. "
    for i in range(messages):
        text = f"Step {i}. " + sentence * 33
        yield _line(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{i:08d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 100,
                        "cache_creation_input_tokens": 50,
                        "cache_read_input_tokens": 25,
                        "output_tokens": 500,
                    },
                    "context_management": None,
                },
                "parent_tool_use_id": None,
                "session_id": session,
                "uuid": f"00000000-0000-4000-8000-{i:012d}",
            }
        )
    result.update(num_turns=messages, result=FINAL_ANSWER)
    yield _line(result)


GENERATORS: dict[str, Callable[[bool], Iterator[bytes]]] = {
    "tiny": tiny,
    "flat": flat,
    "quadratic": quadratic,
    "bigline": bigline,
    "claude": claude,
}
STREAMS: dict[str, str] = {
    "tiny": "pi",
    "flat": "pi",
    "quadratic": "pi",
    "bigline": "pi",
    "claude": "claude",
}


def write(name: str, path: Path, quick: bool = False) -> int:
    """Write stream ``name`` to ``path``; return its size in bytes."""
    size = 0
    with open(path, "wb") as f:
        for line in GENERATORS[name](quick):
            f.write(line)
            size += len(line)
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", nargs="?", choices=list(GENERATORS))
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--quick", action="store_true", help="about a tenth of the events")
    ap.add_argument("--list", action="store_true", help="name, backend, lines and size of each")
    args = ap.parse_args()
    if args.list:
        for name, backend in STREAMS.items():
            lines = size = 0
            for line in GENERATORS[name](args.quick):
                lines += 1
                size += len(line)
            print(f"{name:10} {backend:7} {lines:>8} lines {size / 1e6:8.2f} MB")
        return
    if args.name is None or args.out is None:
        ap.error("give NAME and OUT, or --list")
    size = write(args.name, args.out, args.quick)
    print(f"{args.out}: {size} bytes")


if __name__ == "__main__":
    main()
