"""The live view's rows (one per run) and how their numbers are written: kept apart from the
Textual app so that gathering them costs no TUI import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class RunRow:
    """One run, as a row of ``subagents top``."""

    job_id: str
    run_id: str | None
    mode: str
    agent: str
    backend: str
    status: str
    elapsed: float | None
    tools: int
    tokens: int
    cost: float | None
    activity: str
    first_of_job: bool = True
    # What the web view shows besides: the run's task, where it ran (an isolated run's
    # repository too), its job's session, and when it started (epoch seconds).
    task: str = ""
    cwd: str = ""
    worktree_repo: str | None = None
    session: str | None = None
    started: float | None = None
    agent_name: str | None = None  # the agent it runs, if any (``agent`` falls back on the backend)
    # The budget it reached (result.json's ``limit``: kind, limit, used, action, scope), if any.
    limit: Mapping[str, object] | None = None
    # Its budget in words: while it runs, each limit and what it used so far
    # (``turns 2/5 · tokens 1.2k/10k``); once a budget ended it, the mark and what it used.
    budget: str | None = None

    @property
    def key(self) -> str:
        return f"{self.job_id}/{self.run_id or '-'}"


@dataclass
class Snapshot:
    """Everything one refresh shows: the rows and the totals for the footer."""

    rows: list[RunRow] = field(default_factory=list)
    jobs: int = 0  # the jobs shown (at most the view's limit)
    total: int = 0  # the jobs there are (of the session, when the view is of one)
    running: int = 0
    tokens: int = 0
    cost: float | None = None
    damaged: list[str] = field(default_factory=list)  # job files passed over

    def footer(self) -> str:
        """The totals line: how many jobs (of how many), running, tokens, cost."""
        from subagents.present.figures import money, tokens

        shown = (
            f"{self.jobs} jobs" if self.total <= self.jobs else f"{self.jobs} of {self.total} jobs"
        )
        text = (
            f"{shown} · {self.running} running · {tokens(self.tokens)} tokens · {money(self.cost)}"
        )
        if self.damaged:
            text += f" · {len(self.damaged)} damaged job file(s): see subagents ps"
        return text
