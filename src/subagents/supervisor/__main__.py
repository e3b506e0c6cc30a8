"""``python -m subagents.supervisor RUN_DIR`` (or ``--spare``): one run's supervisor process;
``--template [--bound]``: one that forks a supervisor for each run (supervisor/template.py)."""

import signal

from subagents.core.procs import STOP_SIGNALS  # standard library only: 0.2 ms

# A stop request that comes while the process is still starting is remembered (and honoured
# before anything is spawned) instead of killing it without a result: so the handlers go in
# before the other imports.
_early: list[int] = []
for _sig in STOP_SIGNALS:
    signal.signal(_sig, lambda signum, _frame: _early.append(signum))

import contextlib
import os
import sys
import time
from pathlib import Path

from subagents.core.files import describe_os_error, read_json
from subagents.core.procs import killpg
from subagents.supervisor.handover import (
    BOUND_FLAG,
    REHEARSE_FLAG,
    SPARE_FLAG,
    TEMPLATE_FLAG,
    await_run,
)
from subagents.supervisor.main import Supervisor
from subagents.supervisor.result import publish_ended
from subagents.supervisor.spec import RunSpec


def fail_before_start(run_dir: Path, message: str) -> None:
    """Could not even read the spec: still leave a failed result behind."""
    publish_ended(run_dir, status="failed", error_message=message, started_at=time.time())


def main(argv: list[str] | None = None, early_signals: list[int] | None = None) -> int:
    """The supervisor process: ``RUN_DIR``, or ``--spare`` to wait for one on stdin, or
    ``--template [--bound]`` to fork one for each run directory handed on stdin.
    ``early_signals`` fills with the stop signals that arrive before the run is under way."""
    args = sys.argv[1:] if argv is None else argv
    early = early_signals if early_signals is not None else []
    if args in (
        [SPARE_FLAG],
        [SPARE_FLAG, REHEARSE_FLAG],
        [TEMPLATE_FLAG],
        [TEMPLATE_FLAG, BOUND_FLAG],
    ):
        if args[0] == SPARE_FLAG:
            if REHEARSE_FLAG in args:  # (a spare forked from a warm worker: rehearsal.py)
                from subagents.supervisor.rehearsal import rehearse

                rehearse()
            handed = await_run(early)
        else:
            from subagents.supervisor.template import serve

            handed = serve(early, bound=BOUND_FLAG in args)
        if handed is None:
            return 0
        args = [str(handed)]
    if len(args) != 1:
        print("usage: python -m subagents.supervisor RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    try:
        spec = RunSpec.from_dict(read_json(run_dir / "meta.json"))
    except (OSError, ValueError, TypeError) as exc:
        fail_before_start(run_dir, f"could not read the run spec: {exc}")
        return 1
    echo = None
    if spec.echo:

        def echo(line: str) -> None:
            with contextlib.suppress(OSError):
                print(line, flush=True)

    sup: Supervisor | None = None
    try:
        sup = Supervisor(run_dir, spec, echo, early)
        result = sup.run()
    except Exception as exc:
        # A bug or a full disk must neither orphan the child nor leave the caller without a
        # result: the result names the cause (an OSError as one line, not its repr).
        if sup is not None and sup.pgid:
            killpg(sup.pgid, signal.SIGKILL)
        why = describe_os_error(exc) if isinstance(exc, OSError) else repr(exc)
        fail_before_start(run_dir, f"supervisor error: {why}")
        return 1
    return 0 if result["status"] == "completed" else 1


code = main(early_signals=_early)
# result.json is published and every artifact closed: skip the interpreter's teardown.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
