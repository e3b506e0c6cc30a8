"""Benchmark: what the supervisor's Recorder costs an event, against the Recorder of an
earlier commit, loaded in the same process (issue 36: transcript.times).

    .venv/bin/python bench/bench_recorder.py [--base ee57ab8] [--events 40000] [--repeat 7]

Records ``--events`` canonical events (tool calls and their results, a read's stamp every
third event) into a fresh run directory with each Recorder in turn, ``--repeat`` times in
alternation; prints each one's median µs per event and their ratio (this tree's over the
base's).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PATH = "src/subagents/supervisor/recorder.py"


def load_base(commit: str, work: Path) -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:{PATH}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = work / "base_recorder.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("base_recorder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def events(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n // 2):
        command = f"grep -rn foo src/{i}"
        out.append({"type": "tool_call", "toolCallId": f"c{i}", "toolName": "bash",
                    "args": {"command": command}})  # fmt: skip
        out.append({"type": "tool_result", "toolCallId": f"c{i}", "toolName": "bash",
                    "isError": False, "text": "ok\n", "truncated": False})  # fmt: skip
    return out


def timed(module: ModuleType, work: Path, stream: list[dict[str, Any]]) -> float:
    run_dir = Path(tempfile.mkdtemp(dir=work))
    recorder = module.Recorder(run_dir)
    t0 = time.perf_counter()
    for i, event in enumerate(stream):
        if i % 3 == 0:
            recorder.stamp()
        recorder.record(event)
    recorder.flush(True)
    took = time.perf_counter() - t0
    recorder.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="ee57ab8")
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from subagents.supervisor import recorder as this

    with tempfile.TemporaryDirectory(prefix="bench-recorder-") as tmp:
        work = Path(tmp)
        base = load_base(args.base, work)
        stream = events(args.events)
        figures: dict[str, list[float]] = {"base": [], "this": []}
        for _ in range(args.repeat):
            figures["base"].append(timed(base, work, stream))
            figures["this"].append(timed(this, work, stream))
    per = {k: statistics.median(v) * 1e6 / len(stream) for k, v in figures.items()}
    print(f"base {args.base}: {per['base']:.2f} µs/event; this tree: {per['this']:.2f} µs/event")
    print(f"ratio {per['this'] / per['base']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
