"""Per-event cost of the ACP normalizer against pi's: 100k ``session/update`` lines.

    .venv/bin/python bench/bench_acp.py [--events 100000] [--rounds 5]

bench_scaling.py's method: a recorded stream repeated to ``--events`` lines with its ids made
unique per repetition, fed line by line as the supervisor does (parse, ``feed``, and the
progress formatter's transcript wording of every event), CPU time of this process, best of
``--rounds`` runs in alternation after a warm-up. ACP: the ``session/update`` notifications
of Qwen Code's and the Claude adapter's recorded turns (tests/fixtures/streams/acp: message
chunks, tool calls and their updates, usage), after the handshake's answers; pi: its recorded
0.87 stream (message_update deltas are skipped by prefix there, as in a run). Prints each
one's time per line and the ratio ACP / pi (the issue's target: within 1.2x).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_scaling import feed_all, unique_ids
from bench_scaling import stream as pi_stream

from subagents.backends import CommandRequest, Normalizer, get_backend

ACP = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "streams" / "acp"


def acp_stream(events: int) -> list[bytes]:
    updates = [
        json.loads(line)
        for name in ("qwen.ls.jsonl", "claude.ls.jsonl")
        for line in (ACP / name).read_bytes().splitlines()
        if b'"session/update"' in line
    ]
    out: list[bytes] = []
    rep = 0
    while len(out) < events:
        out += [json.dumps(unique_ids(u, str(rep))).encode() for u in updates]
        rep += 1
    return out[:events]


def started_acp() -> Normalizer:
    norm = get_backend("acp:qwen").normalizer()
    record = {"command": ["qwen", "--acp"], "permissions": "allow", "initTimeout": 60.0}
    norm.begin(CommandRequest(task="bench", cwd="/tmp", acp=record))  # type: ignore[arg-type]
    norm.feed({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})
    norm.feed({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s"}})
    return norm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    acp_lines = acp_stream(args.events)
    pi_lines = pi_stream("pi087.ls", args.events)[: args.events]
    feed_all("acp", acp_lines[:2000], started_acp())  # warm-up
    feed_all("pi", pi_lines[:2000])
    best_acp = best_pi = float("inf")
    for _ in range(args.rounds):  # in alternation: a busy machine slows both alike
        best_acp = min(best_acp, feed_all("acp", acp_lines, started_acp()))
        best_pi = min(best_pi, feed_all("pi", pi_lines))
    per_acp = best_acp / len(acp_lines) * 1e6
    per_pi = best_pi / len(pi_lines) * 1e6
    print("| normalizer | lines | CPU s (best) | µs per line |")
    print("|---|---|---|---|")
    print(
        f"| acp (qwen + claude adapter updates) | {len(acp_lines)} | {best_acp:.3f} | {per_acp:.2f} |"
    )
    print(f"| pi 0.87 | {len(pi_lines)} | {best_pi:.3f} | {per_pi:.2f} |")
    print(f"\nratio acp / pi per line: {per_acp / per_pi:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()
