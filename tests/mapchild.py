"""A fake pi for map tests: answers each task at once (or after ``MAP_DELAY`` seconds).

Its task's last word is the row's: the answer is ``done: TASK`` (``MAP_JSON=1``: the JSON
``{"word": …, "length": …}``); a task holding ``FAIL`` fails (exit 3) unless it carries a
retry's note; ``MAP_WRITE=1`` writes ``<word>.txt`` in the cwd; ``MAP_LOG`` gets a line per
start. Every answer costs $0.01.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

if sys.argv[1:] == ["--version"]:
    sys.exit(0)
task = sys.argv[-1]
word = task.split("\n")[0].split()[-1]
log = os.environ.get("MAP_LOG")
if log:
    with open(log, "a") as f:
        f.write(f"{word}\n")
time.sleep(float(os.environ.get("MAP_DELAY", "0")))
if "FAIL" in task and "previous attempt" not in task:
    print(f"boom on {word}", file=sys.stderr)
    sys.exit(3)
if os.environ.get("MAP_WRITE"):
    Path(f"{word}.txt").write_text(f"{word}\n")
text = (
    json.dumps({"word": word, "length": len(word)})
    if os.environ.get("MAP_JSON")
    else f"done: {task}"
)
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
