"""A Ray host's supervisor template (launchers/template.py): one per node while runs come,
so that a run's supervisor is forked from a process that did its start-up once instead of
paying an interpreter's start and imports on the node.

It is started through a keeper (ray_keeper.py) like the node's other supervisors, and its
supervisors are bound to it (SIGTERM when it dies), as a keeper's supervisor is to its
keeper: when the host's process dies, the keeper goes, then the template, then every
supervisor aborts its run, so a lost host still never leaves a child running. Dismissed
(no run for a while), it stays until its last supervisor has ended.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.launchers.template import READY_WAIT, Template

if TYPE_CHECKING:
    from subagents.types import ProcessIdentity, TemplateState

# How long a run's start waits for a template still getting ready.
START_WAIT = 5.0
# After this many templates of this host failed, its runs start as they did without one.
FAILURES = 3


class HostTemplate:
    """The host's template, if any. Used from the host's event loop."""

    def __init__(self, keeper: Sequence[str]) -> None:
        self.keeper = list(keeper)
        self.template: Template | None = None
        self.leaving: list[Template] = []
        self.failures = 0
        self._lock: asyncio.Lock | None = None

    def serving(self) -> bool:
        """Whether it serves the runs (or is getting ready to): no spares meanwhile."""
        return self.template is not None

    def state(self) -> TemplateState | None:
        """What ``ray status`` says of it: None when the host has none (or one that failed,
        which the next run finds and drops)."""
        template = self.template
        if template is None or template.broken or template.popen.poll() is not None:
            return None
        return "ready" if template.ready.is_set() else "starting"

    def want(self, wanted: bool) -> None:
        """(On the loop's thread, which the keeper's death signal follows: see ray_host.)
        Start one when runs come and there is none; dismiss it once they stopped coming."""
        if wanted and self.template is None and self.failures < FAILURES:
            try:
                template = Template.start(self.keeper)
            except OSError:
                self.failures += 1
                return  # runs start their own supervisors, as they always could
            self.template = template
            threading.Thread(
                target=template.wait_ready,
                args=(READY_WAIT,),
                name="subagents-template",
                daemon=True,
            ).start()
        elif not wanted and self.template is not None:
            self._drop()
        self.leaving = [t for t in self.leaving if t.popen.poll() is None]

    def _drop(self) -> None:
        template, self.template = self.template, None
        if template is not None:
            template.dismiss()
            self.leaving.append(template)

    async def fork(self, run_dir: Path) -> ProcessIdentity | None:
        """A supervisor forked for ``run_dir``, or None (start one another way)."""
        template = self.template
        if template is None:
            return None
        if not template.ready.is_set():
            await asyncio.to_thread(template.ready.wait, START_WAIT)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one at a time: one worker thread, replies in order
            forked = await asyncio.to_thread(template.fork, run_dir)
        if forked is None and (template.broken or template.popen.poll() is not None):
            if self.template is template:
                self.failures += 1
                self._drop()
            return None
        return None if forked is None else {"pid": forked[0], "createTime": forked[1]}
