"""A live run of a real CLI against the mock model, as the live-control tests follow it: its
events as they come, waits for one, its result, the model's requests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from subagents.demo.mockmodel import MockModelServer
from subagents.runs import RunHandle
from support.checks import eventually


@dataclass
class Live:
    handle: RunHandle
    srv: MockModelServer

    def events(self) -> list[dict[str, Any]]:
        path = self.handle.run_dir / "events.jsonl"
        text = path.read_text() if path.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_for(self, kind: str, count: int = 1) -> None:
        assert eventually(
            lambda: sum(e["type"] == kind for e in self.events()) >= count, timeout=90
        ), f"no {kind} event: {[e['type'] for e in self.events()]}"

    def result(self) -> dict[str, Any]:
        result = self.handle.wait(timeout=120)
        assert result is not None, "the run did not finish"
        return result

    def request(self, n: int) -> str:
        """The ``n``-th model request (from 0), as JSON text."""
        assert eventually(lambda: len(self.srv.requests) > n, timeout=60)
        return json.dumps(self.srv.requests[n])
