"""Live control's numbers (issue 22): how soon a message sent reaches the child's stdin, and
where budgets stop a looping child.

    .venv/bin/python bench/bench_live.py [--sends 40] [--runs 3] [--skip-budgets]

1. send -> the text in the child's stdin: a stand-in claude (a Python child speaking
   claude's stream) reads its stdin line by line and notes when each line arrives; the
   time from just before ``subagents.send`` (the API, in this process) to that note, per
   message, median and p90 [floor: median <= 50 ms]. The same through the command line
   (``subagents send``, a process of its own, whose start is most of it) is shown beside.
2. budgets: the real pi (0.87, rpc) against the looping mock model: with ``--max-turns 3``
   the turns used (the child that heeds the wrap-up, and one that ignores it: stopped after
   the 2 grace turns); with ``--max-tokens 100`` and ``--max-cost 0.10`` (15 tokens and
   $0.02 a turn) how far past the limit the run ended [floor: within one turn's usage].
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from benchenv import like_installed  # noqa: E402

import subagents  # noqa: E402
from subagents.config import Settings  # noqa: E402
from subagents.demo import mockmodel as mm  # noqa: E402
from subagents.demo.mockmodel import MockModelServer, Script  # noqa: E402
from subagents.runs import RunRequest, start  # noqa: E402

# A claude stand-in: a tool call, then every stdin line noted (its arrival time) until one
# says "stop"; then the result. Started by the supervisor as claude would be.
CHILD = """\
import json, sys, time
log = open(LOG, "a", buffering=1)
def out(obj): print(json.dumps(obj), flush=True)
out({"type": "system", "subtype": "init", "session_id": "s", "model": "m"})
call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "wait"}}
out({"type": "assistant", "message": {"id": "a1", "model": "m", "content": [call], "usage": {}}})
for line in sys.stdin:
    log.write(f"{time.time()} {line}")
    if '"stop' in line:
        break
out({"type": "result", "subtype": "success", "result": "ok", "usage": {}})
"""


def events_of(run_dir: Path) -> str:
    path = run_dir / "events.jsonl"
    return path.read_text() if path.exists() else ""


def arrivals(log: Path) -> dict[str, float]:
    """text of a message -> when the child read it."""
    out = {}
    for line in log.read_text().splitlines():
        ts, _, body = line.partition(" ")
        message = json.loads(body).get("message", {}).get("content")
        if isinstance(message, str):
            out[message] = float(ts)
    return out


def send_latency(work: Path, sends: int) -> tuple[list[float], list[float]]:
    log = work / "stdin.log"
    child = work / "claude-standin"
    child.write_text(f"#!{sys.executable}\n" + CHILD.replace("LOG", repr(str(log))))
    child.chmod(0o755)
    req = RunRequest(task="wait for messages", backend="claude", cwd=str(work))
    handle = start(req, Settings(bins={"claude": str(child)}, stall_timeout=None))
    deadline = time.monotonic() + 30
    while '"tool_call"' not in events_of(handle.run_dir) and time.monotonic() < deadline:
        time.sleep(0.01)
    api_ms, cli_ms = [], []
    sent: dict[str, float] = {}
    for i in range(sends):
        text = f"api message {i}"
        sent[text] = time.time()
        subagents.send(handle.run_id, text)
        time.sleep(0.02)
    for i in range(max(3, sends // 8)):
        text = f"cli message {i}"
        sent[text] = time.time()
        subprocess.run(
            [sys.executable, "-m", "subagents.cli", "send", handle.run_id, text],
            check=True,
            capture_output=True,
        )
    subagents.send(handle.run_id, "stop now")
    handle.wait(timeout=60)
    got = arrivals(log)
    for text, t0 in sent.items():
        (api_ms if text.startswith("api") else cli_ms).append((got[text] - t0) * 1000)
    return api_ms, cli_ms


def budget_run(work: Path, kind: str, limit: float, heed: bool) -> dict:
    script = Script(loop=True, loop_limit=40, heed_messages=heed, command="sleep 0.1")
    with MockModelServer(script) as srv:
        env = mm.write_pi_config(work / f"pi-{kind}-{heed}", srv.url, price=(1000, 2000))
        req = RunRequest(
            task="loop until told otherwise",
            backend="pi",
            cwd=str(work),
            env=env,
            model="mock/mock-model",
            **{f"max_{kind}": limit},
        )
        result = start(req, Settings()).wait(timeout=180)
    assert result is not None
    return result


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[int(0.9 * (len(values) - 1))]
    return f"median {statistics.median(values):.1f} ms, p90 {p90:.1f} ms ({len(values)} messages)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sends", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-budgets", action="store_true")
    args = ap.parse_args()
    like_installed()
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        work = Path(tmp)
        os.environ["SUBAGENTS_HOME"] = str(work / "home")
        api_ms, cli_ms = send_latency(work, args.sends)
        print("1. send -> text in the child's stdin")
        print(f"   API (subagents.send):     {ms(api_ms)}  [floor: median <= 50 ms]")
        print(f"   CLI (subagents send ...): {ms(cli_ms)}  (a process of its own)")
        print(f"   floor {'met' if statistics.median(api_ms) <= 50 else 'NOT met'}")
        if args.skip_budgets or shutil.which("pi") is None:
            return
        print("\n2. budgets (real pi, looping mock: 15 tokens and $0.02 a turn)")
        rows = []
        for _ in range(args.runs):
            for kind, limit, heed in (
                ("turns", 3, True),
                ("turns", 3, False),
                ("tokens", 100, True),
                ("cost", 0.10, True),
            ):
                result = budget_run(work, kind, limit, heed)
                record = result.get("limit") or {}
                rows.append(
                    (kind, limit, heed, result["status"], record.get("used"), record.get("action"))
                )
        print("| limit | child | status | used | action | past the limit |")
        print("|---|---|---|---|---|---|")
        turn = {"turns": 1, "tokens": 15, "cost": 0.02}
        worst = {}
        for kind, limit, heed, status, used, action in rows:
            past = (used or 0) - limit
            worst[(kind, heed)] = max(worst.get((kind, heed), -1e9), past)
            who = "heeds" if heed else "ignores"
            print(
                f"| {kind} {limit} | {who} the wrap-up | {status} | {used} | {action} | {past:+.4g} |"
            )
        turns_ok = worst[("turns", True)] <= 1 and worst[("turns", False)] <= 2
        usage_ok = all(worst[(k, True)] <= turn[k] + 1e-9 for k in ("tokens", "cost"))
        print(
            f"\nturns: within 2 grace turns {'met' if turns_ok else 'NOT met'};"
            f" tokens, cost: within one turn's usage {'met' if usage_ok else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
