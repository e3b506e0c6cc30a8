"""Each record's version, and the one function per record that reads any earlier shape as
today's: ``job.json`` (:func:`upgrade_job`), a run's ``meta.json`` (:func:`upgrade_meta`) and
its ``result.json`` (:func:`upgrade_result`).

A record says its ``version``; one without it was written before records had one (version 0)
and may have any shape subagents wrote then. An upgrade fills in what the earlier shape lacked
as that version's readers took it (a field it lacks had its default), so the readers read
today's shape only. A record of a later version than this one knows is read as it is.
Upgrades change the dict they are given (a record just read) and return it.

Standard library only: the supervisor reads a ``meta.json`` without a version through
:func:`upgrade_meta` (one with today's imports nothing of this).
"""

from __future__ import annotations

from pathlib import Path

from subagents.core.files import read_json

# Each record's version is core.records' (what writes a record imports nothing of this).
from subagents.core.records import JOB_VERSION, META_VERSION, RESULT_VERSION

TYPE_CHECKING = False  # not typing's: importing typing costs the supervisor start-up time
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue


# A run request's fields that records written before them lack (budgets, output schemas,
# --parent-pid, isolation, the stall watchdog): their value then was None.
_REQUEST_NONE = (
    "backend",
    "model",
    "cwd",
    "timeout",
    "tools",
    "system_prompt",
    "thinking",
    "agent",
    "agent_source",
    "job_id",
    "isolate",
    "stall_timeout",
    "on_stall",
    "tool_timeout",
    "continue_from",
    "max_turns",
    "max_tokens",
    "max_cost",
    "job_used",
    "output_schema",
)
_DEFAULT_CONCURRENCY = 4


def _version(record: JsonObject) -> int:
    version = record.get("version")
    return version if type(version) is int else 0


def upgrade_job(record: JsonObject) -> JsonObject:
    """``job.json`` of any version as today's (its finished runs' results too)."""
    if _version(record) < 1:
        plan = record.get("plan")
        if isinstance(plan, dict):
            _plan_v0(plan)
    runs = record.get("runs")
    if isinstance(runs, list):
        for run in runs:
            if isinstance(run, dict) and "paths" in run:  # a result.json (not a never-started run)
                upgrade_result(run)
    if _version(record) < JOB_VERSION:
        record["version"] = JOB_VERSION
    return record


def _plan_v0(plan: JsonObject) -> None:
    limits = plan.get("limits")
    limits = limits if isinstance(limits, dict) else {}
    listed = plan.get("requests")
    requests = [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
    # Before placements the runner given for the job was on each request, the executor and
    # Ray's address in the settings the job was planned with.
    runner = next((r["runner"] for r in requests if r.get("runner")), None)
    for request in requests:
        request.pop("runner", None)
        for name in _REQUEST_NONE:
            request.setdefault(name, None)
        request.setdefault("env", {})
        request.setdefault("watch", [])
    placement = plan.get("placement")
    if not isinstance(placement, dict):
        if limits.get("executor") == "ray":
            # As the settings said it (their default: the repository travels).
            shared = limits.get("ray_shared_cwd") is True
            placement = {
                "launcher": "ray",
                "ray_address": limits.get("ray_address"),
                "ray_shared_cwd": shared,
            }
        else:
            given = runner or limits.get("runner")
            placement = {"launcher": "tmux" if given == "tmux" else "process", "ray_address": None}
        plan["placement"] = placement
    if placement.get("launcher") == "ray":
        # A Ray placement recorded before repositories travelled ran on a shared filesystem.
        placement.setdefault("ray_shared_cwd", True)
    plan.setdefault("concurrency", _DEFAULT_CONCURRENCY)
    plan.setdefault("session", None)
    plan.setdefault("extra", {})
    plan.setdefault("budget", {})  # before budgets: none


def upgrade_meta(record: JsonObject) -> JsonObject:
    """A run's ``meta.json`` of any version as today's."""
    if _version(record) < 1:
        _worktree_v0(record.get("worktree"))
        record["version"] = META_VERSION
    return record


def upgrade_result(record: JsonObject) -> JsonObject:
    """A run's ``result.json`` of any version as today's."""
    if _version(record) < 1:
        _worktree_v0(record.get("worktree"))
        # Before continuation a result named neither the child's session nor a run it continues.
        record.setdefault("sessionId", None)
        record.setdefault("continuedFrom", None)
        record.setdefault("worktree", None)  # before isolation
        record["version"] = RESULT_VERSION
    return record


def read_meta(run_dir: Path) -> JsonValue:
    """``run_dir``'s ``meta.json``, upgraded when it is an object (``read_json``'s errors as
    they come): what every reader of a run's spec reads."""
    data = read_json(run_dir / "meta.json")
    return upgrade_meta(data) if isinstance(data, dict) else data


def read_result(run_dir: Path) -> JsonValue:
    """``run_dir``'s ``result.json``, upgraded when it is an object (``read_json``'s errors
    as they come): what every reader of a run's end reads."""
    data = read_json(run_dir / "result.json")
    return upgrade_result(data) if isinstance(data, dict) else data


def _worktree_v0(worktree: JsonValue) -> None:
    """An isolated run's worktree record from before runs in a repository's subdirectory:
    the run worked at the repository's top (``subdir`` ``.``)."""
    if isinstance(worktree, dict) and worktree.get("repo") is not None:
        worktree.setdefault("subdir", ".")
