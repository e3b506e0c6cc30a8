"""Following and controlling jobs, for every surface (CLI, MCP, the Python API): a job's
state (ending it if its driver died), waiting for its end without waiting on a dead driver,
stopping it so no process of it is left, a message for one of its running runs, and what its
newest run is doing now."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import ids, paths, procs
from subagents.core.files import read_tail
from subagents.core.records import is_event
from subagents.errors import DamagedRecord, JobIdError, MessageRefused
from subagents.jobs.store import TERMINAL, JobStore, matching, unknown_id

if TYPE_CHECKING:
    from subagents.present.progress import ProgressFormatter
    from subagents.types import Event, JobRow, JobState, Receipt, RunStatus

# How a job whose driver is gone is ended: its status and why.
Orphaned = tuple["RunStatus", str]


def job_state(store: JobStore, job_id: str) -> JobState:
    state = store.load(job_id)
    if state.get("status") not in TERMINAL:
        state = _recovered(store, job_id, state)
    store.settle_end_entry(job_id, state)
    return state


def _recovered(
    store: JobStore, job_id: str, state: JobState, orphaned_as: Orphaned | None = None
) -> JobState:
    """The job, ended now if its driver died (as ``orphaned_as`` says, else failed); as it
    is when that cannot be recorded (a full disk): looking at jobs only reads."""
    try:
        if orphaned_as is None:
            return store.recover_if_orphaned(job_id)
        return store.recover_if_orphaned(job_id, status=orphaned_as[0], message=orphaned_as[1])
    except OSError:
        return state


def wait_job(
    store: JobStore,
    job_id: str,
    timeout: float | None = None,
    *,
    orphaned_as: Orphaned | None = None,
) -> JobState | None:
    """The job result once the job has ended (its state, holding it); None if ``timeout``
    ran out first.

    A job whose driver is gone is ended (``orphaned_as``: status and message) once its
    runs are over, so this never waits on a dead driver.
    """
    from subagents.core.waker import DirWaker

    deadline = None if timeout is None else time.monotonic() + timeout
    waker = DirWaker(store.dir / job_id)
    waker.arm()  # before the first look, so no write in between is missed
    try:
        next_check = time.monotonic()  # a dead driver found at the first look, then each 1 s
        while True:
            state = store.load(job_id)
            if state.get("status") in TERMINAL and "runs" in state:
                store.settle_end_entry(job_id, state)
                return state
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 1.0
                state = _recovered(store, job_id, state, orphaned_as)
                if state.get("status") in TERMINAL:
                    return state
            if deadline is not None and now >= deadline:
                return None
            waker.wait(min(next_check, deadline or next_check) - now)
    finally:
        waker.close()


STOPPED_ORPHAN: Orphaned = ("aborted", "stopped; its driver was gone")


def stop_job(store: JobStore, job_id: str, grace: float = 15.0) -> JobState:
    """Abort a job. Its driver is asked (through the job directory) to start no more runs,
    and every running run is stopped here, so no process of the job is left alive. Only a
    background driver is signalled: a foreground one may be a CLI or an MCP server driving
    other jobs too."""
    state = store.load(job_id)
    if state.get("status") in TERMINAL:
        return state
    store.request_cancel(job_id)
    driver = state.get("driver")
    driver_alive = driver is not None and procs.is_alive(driver)
    if driver is not None and driver_alive and state.get("background"):
        os.kill(driver["pid"], signal.SIGTERM)
        if wait_job(store, job_id, timeout=grace) is not None:
            return store.load(job_id)
    _stop_runs(store, _runs_of(store, job_id), grace)
    # The driver (one that is alive, or one still starting) records the end itself once
    # it sees the request and its runs are over; a gone driver's job is ended here.
    done = wait_job(store, job_id, timeout=grace, orphaned_as=STOPPED_ORPHAN)
    if done is not None:
        return done
    if state.get("background") and driver is not None and procs.is_alive(driver):
        with contextlib.suppress(OSError):
            os.kill(driver["pid"], signal.SIGKILL)
    _stop_runs(store, _runs_of(store, job_id), grace)
    return store.recover_if_orphaned(job_id, status=STOPPED_ORPHAN[0], message=STOPPED_ORPHAN[1])


def _runs_of(store: JobStore, job_id: str) -> list[str]:
    """The job's runs that may still be going: those its record lists, and (not a map) any
    whose meta.json names it that the list lacks yet (the driver writes it while the run's
    child starts)."""
    state = store.load(job_id)
    known = store.run_ids(state)
    if state.get("mode") == "map":
        return known
    from subagents.runs import runs_naming

    return known + [r for r in runs_naming(store.home, job_id) if r not in known]


def _stop_runs(store: JobStore, run_ids: Sequence[str | None], grace: float) -> None:
    from subagents.runs import stop_run

    for run_id in run_ids:
        if run_id:
            stop_run(paths.runs_dir(store.home) / run_id, grace)


def follow_events(
    store: JobStore,
    job_id: str,
    on_event: Callable[[int, Event], None],
    stop: threading.Event,
) -> None:
    """Hand each event of the job's runs to ``on_event(index, event)`` as it lands (from
    each run's first event), until ``stop`` is set; then what is written by then, and
    return. Only reads: whoever waits for the job ends it if its driver died."""
    from subagents.core.waker import DirWaker
    from subagents.runs import RunMonitor

    monitors: dict[int, RunMonitor] = {}
    waker = DirWaker(store.dir / job_id)
    waker.arm()
    try:
        while True:
            ending = stop.is_set()
            with contextlib.suppress(OSError, ValueError):
                for i, run_id in enumerate(store.load(job_id).get("runIds") or []):
                    if run_id and i not in monitors:
                        monitors[i] = RunMonitor(paths.runs_dir(store.home) / run_id)
            for i, monitor in monitors.items():
                while events := monitor.new_events():  # a chunk at a time, to the end
                    for event in events:
                        on_event(i, event)
            if ending:
                return
            # Wakes at once when the job's state changes (a new run, the end); the runs'
            # events grow in their own directories: look again every 0.25 s.
            waker.wait(0.25)
    finally:
        waker.close()


def send_message(store: JobStore, target: str, text: str, mode: str = "steer") -> Receipt:
    """Send ``text`` to a running run: ``target`` is its id (any unambiguous prefix), or its
    job's when that job has one run running. The receipt; ``MessageRefused`` or
    ``JobIdError`` as one line when nothing was sent."""
    from subagents.runs import check_message, send

    check_message(text, mode)  # bad text is told before the id is looked up
    return send(paths.runs_dir(store.home) / message_target(store, target), text, mode)


def message_target(store: JobStore, target: str) -> str:
    """The run a message for ``target`` (a run id, or a job id) goes to."""
    prefix = target.strip().lower()
    if not ids.is_valid_id_prefix(prefix):
        raise unknown_id(prefix)
    runs = matching(paths.runs_dir(store.home), prefix)
    jobs = matching(store.dir, prefix)
    if len(runs) + len(jobs) > 1:
        raise JobIdError(f"ambiguous id {prefix!r}: matches {len(runs) + len(jobs)} runs and jobs")
    if runs:
        return runs[0]
    if not jobs:
        raise unknown_id(prefix)
    state = store.load(jobs[0])
    started = [r for r in state.get("runIds") or [] if r]
    running = [r for r in started if not (paths.runs_dir(store.home) / r / "result.json").exists()]
    if len(running) == 1:
        return running[0]
    if not running:
        status = state.get("status")
        raise MessageRefused(
            f"job {jobs[0]} has no run going ({status}): nothing takes messages now"
        )
    raise JobIdError(
        f"job {jobs[0]} has {len(running)} runs going: send to one by its run id"
        f" ({', '.join(running)})"
    )


ACTIVITY_TAIL_BYTES = 64 * 1024


def current_activity(home: Path, run_ids: list[str | None]) -> str | None:
    """What the job's newest run is doing now, from the tail of its events."""
    fmt = _newest_run(home, run_ids)
    return fmt.activity() if fmt is not None else None


def _newest_run(home: Path, run_ids: list[str | None]) -> ProgressFormatter | None:
    """The job's newest running run, as a progress formatter fed the tail of its events."""
    from subagents.present.progress import ProgressFormatter

    for run_id in reversed([r for r in run_ids if r]):
        run_dir = paths.runs_dir(home) / run_id
        if (run_dir / "result.json").exists():
            continue
        fmt = ProgressFormatter(max_len=60)
        # Only the tail: a long run's events file can be large, and ps looks at every
        # running job. Where the tail starts mid-file, its cut first line is skipped.
        events_file = run_dir / "events.jsonl"
        lines = read_tail(events_file, ACTIVITY_TAIL_BYTES).split("\n")
        with contextlib.suppress(OSError):
            if events_file.stat().st_size > ACTIVITY_TAIL_BYTES:
                lines = lines[1:]
        for line in lines:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if is_event(event):
                    fmt.line(event)
        return fmt
    return None


def usage_so_far(home: Path, run_ids: list[str | None]) -> tuple[int | None, float | None]:
    """A running job's tokens and cost so far: each ended run's result, each running run's
    last running total (``usage`` events); None where no run reported one."""
    from subagents.core.files import read_json

    tokens: int | None = None
    cost: float | None = None
    for run_id in (r for r in run_ids if r):
        run_dir = paths.runs_dir(home) / run_id
        usage: object = None
        try:
            result = read_json(run_dir / "result.json")
            usage = result.get("usage") if isinstance(result, dict) else None
        except FileNotFoundError:
            for line in reversed(
                read_tail(run_dir / "events.jsonl", ACTIVITY_TAIL_BYTES).split("\n")
            ):
                if '"usage"' in line:
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if isinstance(event, dict) and event.get("type") == "usage":
                            usage = event
                            break
        except (OSError, ValueError):
            continue
        if not isinstance(usage, dict):
            continue
        if isinstance(usage.get("totalTokens"), int):
            tokens = (tokens or 0) + usage["totalTokens"]
        if isinstance(usage.get("cost"), int | float):
            cost = (cost or 0.0) + float(usage["cost"])
    return tokens, cost


def list_jobs(
    limit: int = 20,
    home: Path | None = None,
    session: str | None = None,
    damaged: list[str] | None = None,
) -> list[JobRow]:
    """The newest jobs as ``ps`` lists them; ``damaged`` gets a line for each job file that
    could not be read as a job's (passed over)."""
    store = JobStore(home or paths.state_home())
    items = store.list(limit, session)
    problems = store.damaged
    for item in items:
        if item.get("status") not in TERMINAL:
            try:
                item["status"] = store.recover_if_orphaned(item["jobId"])["status"]
            except DamagedRecord as exc:
                problems.append(str(exc))
            except (OSError, ValueError):
                pass  # as it is: looking at jobs only reads
            fmt = _newest_run(store.home, item.get("runIds") or [])
            item["activity"] = fmt.activity() if fmt is not None else None
            if fmt is not None and fmt.waiting():
                item["waiting"] = True
            if item.get("totalTokens") is None:  # the runs' figures so far, where known
                item["totalTokens"], item["cost"] = usage_so_far(
                    store.home, item.get("runIds") or []
                )
        else:
            store.settle_end_entry(item["jobId"])
    if damaged is not None:
        damaged.extend(problems)
    return items
