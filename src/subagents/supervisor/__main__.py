"""``python -m subagents.supervisor RUN_DIR`` (or ``--spare``): one run's supervisor process."""

import signal

from subagents.core.procs import STOP_SIGNALS  # standard library only: 0.2 ms

# A stop request that comes while the process is still starting is remembered (and honoured
# before anything is spawned) instead of killing it without a result: so the handlers go in
# before the other imports.
_early: list[int] = []
for _sig in STOP_SIGNALS:
    signal.signal(_sig, lambda signum, _frame: _early.append(signum))

import os
import sys

from subagents.supervisor.main import main

code = main(early_signals=_early)
# result.json is published and every artifact closed: skip the interpreter's teardown.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
