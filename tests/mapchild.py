"""A fake pi for map tests: answers each task at once (or after ``MAP_DELAY`` seconds).

Its task's last word is the row's: the answer is ``done: TASK`` (``MAP_JSON=1``: the JSON
``{"word": …, "length": …}``); a task holding ``FAIL`` fails (exit 3) unless it carries a
retry's note; ``MAP_WRITE=1`` writes ``<word>.txt`` in the cwd; ``MAP_LOG`` gets a line per
start. Every answer costs $0.01. ``MAP_HOLD``: a row waits for that file to exist (at
most 120 s) before answering, unless its word is in ``MAP_FREE``.

Gates (tests/test_gates.py): ``MAP_OK`` writes ``<word>.ok`` in the cwd but for the words
in ``MAP_BAD`` (comma-separated); a continuation (``--fork``: a repair turn) writes the
``.ok`` of the word its task's check command names (``check.py WORD``). A session file is
written where pi would, so a run can be continued.

As a reviewer (its task starts "You review another agent's work") it approves an answer
that says "please" (``MAP_REVIEW=reject``: never), and asks for it otherwise.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

if sys.argv[1:] == ["--version"]:
    sys.exit(0)
args = sys.argv
task = args[-1]
word = task.split("\n")[0].split()[-1]
if "--session-dir" in args:  # as pi: a session file, so that the run can be continued
    sessions = Path(args[args.index("--session-dir") + 1])
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / "session.jsonl").write_text("{}\n")
if "--fork" in args:  # a repair turn: fix what the check named
    named = re.search(r"check\.py (\S+)`", task)
    if named:
        word = named.group(1)
        Path(f"{word}.ok").write_text("fixed\n")
elif os.environ.get("MAP_OK") and word not in os.environ.get("MAP_BAD", "").split(","):
    Path(f"{word}.ok").write_text("ok\n")
log = os.environ.get("MAP_LOG")
if log:
    with open(log, "a") as f:
        f.write(f"{word}\n")
time.sleep(float(os.environ.get("MAP_DELAY", "0")))
hold = os.environ.get("MAP_HOLD")  # a test's gate: wait for this file (bounded), but MAP_FREE
if hold and word not in os.environ.get("MAP_FREE", "").split(","):
    for _ in range(1200):
        if Path(hold).exists():
            break
        time.sleep(0.1)
if "FAIL" in task and "previous attempt" not in task:
    print(f"boom on {word}", file=sys.stderr)
    sys.exit(3)
if os.environ.get("MAP_WRITE"):
    Path(f"{word}.txt").write_text(f"{word}\n")
if task.startswith("You review another agent's work"):
    answer = task.split("## The agent's final answer", 1)[-1].split("## ", 1)[0]
    approve = "please" in answer and os.environ.get("MAP_REVIEW") != "reject"
    text = json.dumps({"approve": approve, "issues": [] if approve else ["say please"]})
elif os.environ.get("MAP_JSON"):
    text = json.dumps({"word": word, "length": len(word)})
else:
    text = f"done: {task}"
usage = {
    "input": 10,
    "output": 5,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 15,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.01},
}
msg = {
    "role": "assistant",
    "content": [{"type": "text", "text": text}],
    "stopReason": "stop",
    "model": "m",
    "usage": usage,
}
print(json.dumps({"type": "message_end", "message": msg}), flush=True)
