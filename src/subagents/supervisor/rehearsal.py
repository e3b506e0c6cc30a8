"""A spare's rehearsal: while it waits for its run, a supervisor forked from a warm worker
(launchers/spares.py) goes once through the steps every run takes on its way to the child
and from it to ``result.json``, on a run of its own in a private temporary directory, which
it then removes: a spec read, the records' wording and JSON, a result built and published.
Nothing is started and nothing of a caller's is touched. A forked process's first pass
through code touches pages its parent shares with it and fills caches; its second costs
a fraction of that (~1-2 ms of a delegation's supervisor, on its way to the child and back).
Standard library only, like the supervisor.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from subagents.backends import get_backend
from subagents.core.childtext import parse_line
from subagents.core.files import dumps
from subagents.core.records import META_VERSION
from subagents.present.progress import ProgressFormatter, transcript_entry
from subagents.supervisor.result import build_result, publish_result
from subagents.supervisor.spec import RunSpec

# What a pi child says when it answers (its other lines are passed over unparsed).
_ANSWER = (
    b'{"type":"message_end","message":{"role":"assistant","content":[{"type":"text",'
    b'"text":"ok"}],"stopReason":"stop","model":"m","usage":{"input":1,"output":1}}}'
)


def rehearse() -> None:
    """Once, never raising: whatever fails here is only not rehearsed."""
    with contextlib.suppress(Exception):
        _rehearse()


def _rehearse() -> None:
    where = Path(os.environ.get("TMPDIR") or "/tmp") / (  # (tempfile's import: ~5 ms)
        f"subagents-rehearsal-{os.getpid()}-{os.urandom(4).hex()}"
    )
    os.mkdir(where, 0o700)
    try:
        spec = RunSpec.from_dict(
            {
                "version": META_VERSION,
                **RunSpec(
                    runId="r", jobId=None, backend="pi", task="x", cwd=str(where), argv=["pi"]
                ).to_dict(),
            }
        )
        norm = get_backend(spec.backend).normalizer()
        formatter = ProgressFormatter()
        obj = parse_line(bytearray(_ANSWER))
        if isinstance(obj, dict):
            for event in norm.feed(obj):
                dumps(event)
                formatter.line(event)
                transcript_entry(event, formatter)
        result = build_result(
            spec, where, status="completed", started_at=time.time(), final_text="ok", exit_code=0
        )
        publish_result(where, result)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(where / "result.json")
        with contextlib.suppress(OSError):
            os.rmdir(where)
