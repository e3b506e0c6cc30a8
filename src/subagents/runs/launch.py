"""Starting one run: validate the request, write its run directory, launch its supervisor,
and hand back a handle to follow, wait for or stop it.

Everything that can be wrong with a request is found here, before anything is
spawned, and raised as one ``UsageError`` line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.backends import ARGV_TASK_LIMIT, MAX_TASK_BYTES, Backend, CommandRequest, get_backend
from subagents.core import ids, paths, procs
from subagents.core.files import make_private_dir, open_private, reserve_space, write_json_atomic
from subagents.core.inputs import text_problem, timeout_problem
from subagents.errors import LaunchError, UsageError, WorktreeError
from subagents.launchers import SUPERVISOR_FILE, Launched, launch, reattach, want_spares
from subagents.launchers import check as check_executor
from subagents.runs.monitor import RunMonitor
from subagents.supervisor.spec import RunSpec


@dataclass
class RunRequest:
    task: str
    backend: str | None = None
    model: str | None = None
    cwd: str | None = None
    timeout: float | None = None
    tools: list[str] | None = None
    system_prompt: str | None = None
    thinking: str | None = None
    agent: str | None = None
    agent_source: str | None = None
    job_id: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    runner: str | None = None
    # "worktree": the run works in its own git worktree (subagents/worktree.py).
    isolate: str | None = None
    stall_timeout: float | None = None
    on_stall: str | None = None
    tool_timeout: float | None = None
    # The id of a finished run whose child's conversation this run resumes.
    continue_from: str | None = None


@dataclass
class Limits:
    """The settings a run needs; filled from config by the caller."""

    default_backend: str = "pi"
    grace: float = 0.25
    kill_grace: float = 2.0
    max_depth: int = 2
    timeout: float | None = None
    runner: str = "process"
    bins: dict[str, str] = field(default_factory=dict)
    # Where supervisors execute: "local", or "ray" at ray_address (else $RAY_ADDRESS).
    executor: str = "local"
    ray_address: str | None = None
    # The stall watchdog (None: off), its policy, and the bound on one tool call.
    stall_timeout: float | None = 300.0
    on_stall: str = "notice"
    tool_timeout: float | None = None
    # Keep an isolated run's worktree directory when it changed something (the branch is
    # always kept then).
    keep_worktree: bool = False
    # pi children on github-copilot send `X-Initiator: agent` (backends/pi_copilot.ts).
    copilot_agent_initiator: bool = False


def current_depth(env: Mapping[str, str]) -> int:
    try:
        return max(0, int(env.get("SUBAGENTS_DEPTH", "0")))
    except ValueError:
        return 0


def resolve_binary(backend: Backend, limits: Limits, env: Mapping[str, str]) -> str:
    var = backend.binary_env_var()
    configured = env.get(var) or limits.bins.get(backend.name)
    wanted = configured or backend.default_binary
    if os.sep in wanted:
        if os.path.isfile(wanted) and os.access(wanted, os.X_OK):
            return wanted
        raise UsageError(
            f"{backend.name} executable not found or not executable: {wanted} (from {var} or config)",
            "backend",
        )
    found = shutil.which(wanted, path=env.get("PATH"))
    if found is None:
        hint = f"; install it with: {backend.install_hint}" if backend.install_hint else ""
        raise UsageError(
            f"{backend.name} executable {wanted!r} not found on PATH (set {var} to its path){hint}",
            "backend",
        )
    return found


def check_capabilities(backend: Backend, req: RunRequest) -> None:
    if req.tools is not None and not backend.supports_tools:
        raise UsageError(
            f"backend {backend.name} cannot restrict tools; remove 'tools' from the agent or choose another backend",
            "backend",
        )
    if req.thinking and not backend.supports_thinking:
        raise UsageError(
            f"backend {backend.name} has no thinking level setting; remove 'thinking' from the agent or choose another backend",
            "backend",
        )
    if req.system_prompt and not backend.supports_system_prompt:
        raise UsageError(
            f"backend {backend.name} cannot take a system prompt; choose another backend",
            "backend",
        )


def check_values(req: RunRequest, limits: Limits) -> None:
    """The request's text and numbers, checked as every surface checks them."""
    texts = {
        "task": req.task,
        "model": req.model,
        "cwd": req.cwd,
        "system_prompt": req.system_prompt,
        "thinking": req.thinking,
        **{f"env.{k}": v for k, v in req.env.items()},
        **{f"tools.{i}": t for i, t in enumerate(req.tools or [])},
    }
    for name, value in texts.items():
        problem = text_problem(value) if value is not None else None
        if problem:
            raise UsageError(f"{name}: {problem}", name.split(".")[0])
    for name, timeout in (("timeout", req.timeout), ("timeout", limits.timeout)):
        problem = timeout_problem(timeout) if timeout is not None else None
        if problem:
            raise UsageError(f"timeout: {problem}", name)


def check_task_size(backend: Backend, task: str) -> None:
    size = len(task.encode())
    if size > MAX_TASK_BYTES:
        raise UsageError(
            f"the task is {size} bytes, over the limit of {MAX_TASK_BYTES} bytes (10 MiB)", "task"
        )
    if size > ARGV_TASK_LIMIT and not backend.reads_task_from_stdin:
        raise UsageError(
            f"the task is {size} bytes; backend {backend.name} takes its task on the command"
            f" line, which holds at most {ARGV_TASK_LIMIT} bytes",
            "task",
        )


@dataclass
class Checked:
    """A request that passed every check, with what the checks found."""

    backend: Backend
    binary: str
    cwd: Path
    depth: int


def check(req: RunRequest, limits: Limits, env: Mapping[str, str]) -> Checked:
    """Everything that can be wrong with ``req``, found without creating anything."""
    if not req.task or not req.task.strip():
        raise UsageError("the task is empty", "task")
    check_values(req, limits)
    depth = current_depth(env) + 1
    if depth > limits.max_depth:
        raise UsageError(
            f"refusing to delegate: nesting depth {depth} would exceed the maximum of {limits.max_depth}"
            " (SUBAGENTS_DEPTH; raise max_depth in config to allow it)"
        )
    name = req.backend or limits.default_backend
    backend = get_backend(name)
    check_capabilities(backend, req)
    check_task_size(backend, req.task)
    check_executor(limits.executor)
    cwd = Path(req.cwd).expanduser() if req.cwd else Path.cwd()
    if not cwd.is_dir():
        raise UsageError(f"working directory does not exist or is not a directory: {cwd}", "cwd")
    check_watchdog(req)
    if req.isolate is not None:
        if req.isolate != "worktree":
            raise UsageError(f"unknown isolation {req.isolate!r} (use worktree)", "isolate")
        from subagents.worktree import repo_root

        if req.continue_from is None and repo_root(cwd) is None:
            raise UsageError(
                f"--isolate worktree needs a git repository, and {cwd} is not in one", "isolate"
            )
    return Checked(backend, resolve_binary(backend, limits, env), cwd.resolve(), depth)


def check_watchdog(req: RunRequest) -> None:
    for name in ("stall_timeout", "tool_timeout"):
        value = getattr(req, name)
        if value is not None and value < 0:
            raise UsageError(f"{name} must be 0 (off) or a positive number of seconds", name)
    if req.on_stall not in (None, "notice", "abort"):
        raise UsageError(
            f"unknown on_stall policy {req.on_stall!r} (use notice or abort)", "on_stall"
        )


def _seconds(value: float | None, default: float | None) -> float | None:
    """A request's limit over the configured one; 0 means off."""
    chosen = default if value is None else value
    return chosen or None


def prepare(
    req: RunRequest,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[RunSpec, Path]:
    """Validate ``req`` and write its run directory with ``meta.json``."""
    limits = limits or Limits()
    env = os.environ if env is None else env
    checked = check(req, limits, env)
    home = home or paths.state_home(env)
    run_id = ids.new_id()
    run_dir = paths.runs_dir(home) / run_id
    try:
        return _write_run_dir(req, limits, checked, run_id, run_dir)
    except OSError:
        # A full disk (or an unwritable home): no half-made run directory is left behind.
        shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _write_run_dir(
    req: RunRequest, limits: Limits, checked: Checked, run_id: str, run_dir: Path
) -> tuple[RunSpec, Path]:
    backend, binary, cwd, depth = checked.backend, checked.binary, checked.cwd, checked.depth
    make_private_dir(run_dir)
    reserve_space(run_dir)
    try:
        resume, worktree = _continuation(req, backend, run_dir.parent)
        if worktree is None and req.isolate == "worktree":
            from subagents import worktree as wt

            worktree = wt.create(cwd, run_id, run_dir)
    except Exception as exc:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-written
        if isinstance(exc, WorktreeError):
            raise UsageError(str(exc), "isolate") from None
        raise
    child_cwd = cwd
    if worktree is not None:
        from subagents.worktree import child_cwd as cwd_in

        child_cwd = Path(cwd_in(worktree))
    command = CommandRequest(
        task=req.task,
        cwd=str(child_cwd),
        model=req.model,
        tools=req.tools,
        thinking=req.thinking,
        system_prompt=req.system_prompt,
        session_dir=str(run_dir / "session") if backend.can_continue else None,
        resume=resume,
        task_on_stdin=len(req.task.encode()) > ARGV_TASK_LIMIT,
        copilot_agent_initiator=limits.copilot_agent_initiator,
    )
    stdin_file = None
    if command.task_on_stdin:
        stdin_file = run_dir / "task.md"
        with open_private(stdin_file, "wb") as f:
            f.write(backend.stdin_task(req.task).encode())
    if req.system_prompt:
        prompt_file = run_dir / "system-prompt.md"
        with open_private(prompt_file, "w") as f:
            f.write(req.system_prompt)
        command.system_prompt_file = str(prompt_file)
    spec = RunSpec(
        runId=run_id,
        jobId=req.job_id,
        backend=backend.name,
        agent=req.agent,
        agentSource=req.agent_source,
        task=req.task,
        cwd=str(child_cwd),
        requestedModel=req.model,
        argv=backend.build_argv(binary, command),
        env={**backend.child_env(command), **req.env},
        timeout=req.timeout if req.timeout is not None else limits.timeout,
        grace=limits.grace,
        killGrace=limits.kill_grace,
        depth=depth,
        createdAt=time.time(),
        echo=(req.runner or limits.runner) == "tmux",
        worktree=worktree,
        keepWorktree=limits.keep_worktree,
        stallTimeout=_seconds(req.stall_timeout, limits.stall_timeout),
        onStall=req.on_stall or limits.on_stall,
        toolTimeout=_seconds(req.tool_timeout, limits.tool_timeout),
        continuedFrom=req.continue_from,
        sessionDir=command.session_dir,
        stdinFile=str(stdin_file) if stdin_file else None,
    )
    write_json_atomic(run_dir / "meta.json", spec.to_dict())
    return spec, run_dir


def _continuation(
    req: RunRequest, backend: Backend, runs_dir: Path
) -> tuple[str | None, dict[str, Any] | None]:
    """For a run that continues another: what its child resumes, and the earlier run's
    worktree reopened (a worktree run continues in its own branch)."""
    if req.continue_from is None:
        return None, None
    from subagents.core.files import read_json

    earlier = runs_dir / req.continue_from
    try:
        meta = read_json(earlier / "meta.json")
        result = read_json(earlier / "result.json")
    except (OSError, ValueError):
        raise UsageError(f"run {req.continue_from} has not ended (or its files are gone)") from None
    resume = backend.resume_point(str(earlier), result)
    if resume is None:
        raise UsageError(
            f"run {req.continue_from} left no {backend.name} session to continue"
            " (runs before sessions were kept cannot be continued)"
        )
    record = result.get("worktree") or meta.get("worktree")
    if not isinstance(record, dict):
        return resume, None
    from subagents import worktree as wt

    try:
        return resume, wt.reopen(record)
    except WorktreeError as exc:
        raise UsageError(f"cannot reopen the worktree of run {req.continue_from}: {exc}") from None


class RunHandle:
    """A started run: follow its events, wait for its result, or stop it."""

    def __init__(self, spec: RunSpec, run_dir: Path, launched: Launched) -> None:
        self.spec = spec
        self.run_id = spec.runId
        self.run_dir = run_dir
        self.launched = launched
        self.monitor = RunMonitor(run_dir, launched)

    def wait(
        self,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any] | None:
        result = self.monitor.wait(on_event=on_event, timeout=timeout)
        if result is not None:
            self.reap()
        return result

    def reap(self, timeout: float = 5.0) -> None:
        """Collect the supervisor's exit status once its result is out (it exits right after
        publishing it), so a long-lived caller (the MCP server) keeps no zombie per run.
        In the background: the caller (a job's slot) goes on to its next run meanwhile."""
        popen = self.launched.popen
        if popen is not None and popen.poll() is None:
            threading.Thread(target=_reap, args=(popen, timeout), daemon=True).start()

    def result(self) -> dict[str, Any] | None:
        return self.monitor.result()

    def stop(
        self,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        sig: int = signal.SIGTERM,
    ) -> dict[str, Any]:
        """Abort the run: the supervisor kills the child's group and writes ``aborted``.
        ``sig`` is what the supervisor gets: the signal the caller itself was sent (Ctrl-C is
        SIGINT), so the result names the signal that was sent.

        Bounded: if the supervisor does not answer, it is killed and the result is
        written here.
        """
        self.monitor.stop_requested = True
        if self.result() is None and self.launched.alive():
            answered = procs.escalate(
                self.launched.terminate,
                lambda grace: self.wait(on_event=on_event, timeout=grace) is not None,
                self.spec.killGrace + 5.0,
                sig,
            )
            if answered and (done := self.result()) is not None:
                return done  # followed to its end by that wait: events delivered, reaped
        done = self.wait(on_event=on_event, timeout=5.0)
        return done if done is not None else self.monitor.recover_dead_supervisor()


def _reap(popen: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout)


def start_prepared(
    spec: RunSpec,
    run_dir: Path,
    runner: str = "process",
    executor: str = "local",
    ray_address: str | None = None,
) -> RunHandle:
    try:
        launched = launch(
            run_dir, backend=spec.backend, runner=runner, executor=executor, address=ray_address
        )
    except LaunchError as exc:
        # The run directory exists: it must not be left without a result.
        from subagents.supervisor.result import publish_ended

        publish_ended(
            run_dir, spec=spec, status="failed", error_message=str(exc), started_at=time.time()
        )
        raise UsageError(str(exc)) from None
    return RunHandle(spec, run_dir, launched)


def keep_warm(owner: object, count: int, runner: str, executor: str) -> None:
    """Have ``count`` supervisors started ahead for ``owner``'s next runs (a job with runs
    still to start; 0 once it has none): a run then starts without waiting for an
    interpreter. Local process runs only."""
    want_spares(owner, count if executor == "local" else 0, runner)


def resume(run_dir: Path) -> RunHandle:
    """Follow again a run whose starter is gone (a restarted job driver): its supervisor
    goes on without it, here or on a Ray node (found again by its actor's name)."""
    from subagents.core.files import read_json
    from subagents.supervisor.result import spec_of

    try:
        ident = read_json(run_dir / SUPERVISOR_FILE)
    except (OSError, ValueError):
        ident = {}
    if not isinstance(ident, dict):
        ident = {}
    where = ident.get("executor")
    if isinstance(where, dict) and not (run_dir / "result.json").exists():
        with contextlib.suppress(LaunchError):
            launched = reattach(run_dir, str(where.get("address") or "") or None)
            return RunHandle(spec_of(run_dir), run_dir, launched)
    # A local supervisor (or one that is gone: the monitor then finds it dead and ends the run).
    with contextlib.suppress(KeyError, TypeError, ValueError):
        launched = Launched(int(ident["pid"]), float(ident["createTime"]), str(ident["runner"]))
        launched.remote = isinstance(where, dict)
        return RunHandle(spec_of(run_dir), run_dir, launched)
    return RunHandle(spec_of(run_dir), run_dir, Launched(0, 0.0, "unknown"))


def start(
    req: RunRequest,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> RunHandle:
    limits = limits or Limits()
    spec, run_dir = prepare(req, limits, env, home)
    return start_prepared(
        spec, run_dir, req.runner or limits.runner, limits.executor, limits.ray_address
    )


def limits_from_settings(
    cwd: Path | None = None, env: Mapping[str, str] | None = None, settings: Any = None
) -> Limits:
    """Limits from the effective config (raises ``config.ConfigError``); from ``settings``
    when the caller has read them already."""
    if settings is None:
        from subagents.config import load_settings

        settings = load_settings(cwd, env)
    s = settings
    return Limits(
        default_backend=s.default_backend,
        grace=s.grace,
        kill_grace=s.kill_grace,
        max_depth=s.max_depth,
        timeout=s.timeout,
        runner=s.runner,
        bins=dict(s.bins),
        executor=s.executor,
        ray_address=s.ray_address,
        stall_timeout=s.stall_timeout,
        on_stall=s.on_stall,
        tool_timeout=s.tool_timeout,
        keep_worktree=s.keep_worktree,
        copilot_agent_initiator=s.copilot_agent_initiator,
    )
