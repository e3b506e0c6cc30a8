"""Peer B of the benchmark (bench/bench_peers.py): claude-agent-sdk's ``query()``.

    .venv/bin/python bench/peer_claude.py STREAM

The SDK spawns ``bench/fake_claude`` as its Claude Code CLI; that answers the SDK's
``initialize`` control request, reads the prompt and replays STREAM (a recorded
``--output-format stream-json`` stream). This loop does what a caller of ``query()``
does: keep every message, take the answer and the usage from the result. It prints
one JSON line: the final answer, the stop reason, how many messages came.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, TextBlock, query

FAKE_CLAUDE = Path(__file__).resolve().parent / "fake_claude"


async def run(stream: Path) -> dict[str, object]:
    options = ClaudeAgentOptions(
        cli_path=str(FAKE_CLAUDE),
        permission_mode="bypassPermissions",
        env={"FAKE_CLAUDE_STREAM": str(stream)},
    )
    messages = []
    texts = 0
    result: ResultMessage | None = None
    async for message in query(prompt="bench", options=options):
        messages.append(message)
        if isinstance(message, AssistantMessage):
            texts += sum(isinstance(b, TextBlock) for b in message.content)
        elif isinstance(message, ResultMessage):
            result = message
    if result is None:
        raise SystemExit("no result message")
    return {
        "finalText": result.result,
        "stopReason": result.stop_reason,
        "isError": result.is_error,
        "costUsd": result.total_cost_usd,
        "messages": len(messages),
        "textBlocks": texts,
    }


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: peer_claude.py STREAM")
    print(json.dumps(asyncio.run(run(Path(sys.argv[1])))))


if __name__ == "__main__":
    main()
