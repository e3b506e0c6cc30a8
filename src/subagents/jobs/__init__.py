"""jobs — what a caller asked for: plans and job specs, the job store and its index, the
orchestrator (single, parallel, chain), the background job driver
(``python -m subagents.jobs.driver JOB_DIR``), what a job records in the session log, and
the live views' rows of running and recent jobs (``live``: ``top``, the web view).

May import: core, config, agents, runs, lifecycle.
"""

from __future__ import annotations

from subagents.core.lazy import names_from
from subagents.errors import JobBusyError, JobIdError, PlanError

TYPE_CHECKING = False  # not typing's: nothing more is imported until a name is asked for
if TYPE_CHECKING:
    from subagents.jobs.continuation import chain_of, continuation_plan, read_run, resolve_run
    from subagents.jobs.control import (
        STOPPED_ORPHAN,
        current_activity,
        follow_events,
        job_state,
        list_jobs,
        message_target,
        send_message,
        stop_job,
        wait_job,
    )
    from subagents.jobs.council import VERDICT_SCHEMA, member_step
    from subagents.jobs.driver import start_background
    from subagents.jobs.housekeeping import jobs_to_prune, remove_jobs
    from subagents.jobs.live import LiveJobs
    from subagents.jobs.mapinput import Row, parse_where, render
    from subagents.jobs.mapjob import MapJob, RowSink
    from subagents.jobs.maplog import logged_runs, map_input_rows, write_input
    from subagents.jobs.mapplan import plan_map, read_map_rows, read_rows
    from subagents.jobs.mapprogress import MapProgress, MapProgressRecord, progress_line, row_record
    from subagents.jobs.mapresults import write_all as write_results
    from subagents.jobs.mapwatch import MapWatch
    from subagents.jobs.orchestrator import EventSink, Job, exit_code
    from subagents.jobs.planning import JobPlan, plan
    from subagents.jobs.records import lifecycle_for
    from subagents.jobs.runner import job_for
    from subagents.jobs.spec import (
        MAP_FIELDS,
        PREVIOUS,
        JobSpec,
        Step,
        budget_of,
        job_of,
        load_plan,
        parse_job,
        with_options,
    )
    from subagents.jobs.store import TERMINAL, JobStore

# Where each name lives: its module is imported when the name is first used.
_WHERE = {
    "chain_of": "continuation",
    "continuation_plan": "continuation",
    "read_run": "continuation",
    "resolve_run": "continuation",
    "STOPPED_ORPHAN": "control",
    "current_activity": "control",
    "follow_events": "control",
    "job_state": "control",
    "list_jobs": "control",
    "message_target": "control",
    "send_message": "control",
    "stop_job": "control",
    "wait_job": "control",
    "VERDICT_SCHEMA": "council",
    "member_step": "council",
    "start_background": "driver",
    "jobs_to_prune": "housekeeping",
    "remove_jobs": "housekeeping",
    "LiveJobs": "live",
    "Row": "mapinput",
    "parse_where": "mapinput",
    "render": "mapinput",
    "MapJob": "mapjob",
    "RowSink": "mapjob",
    "logged_runs": "maplog",
    "map_input_rows": "maplog",
    "write_input": "maplog",
    "plan_map": "mapplan",
    "read_map_rows": "mapplan",
    "read_rows": "mapplan",
    "MapProgress": "mapprogress",
    "MapProgressRecord": "mapprogress",
    "progress_line": "mapprogress",
    "row_record": "mapprogress",
    "write_results": "mapresults:write_all",
    "MapWatch": "mapwatch",
    "EventSink": "orchestrator",
    "Job": "orchestrator",
    "exit_code": "orchestrator",
    "JobPlan": "planning",
    "plan": "planning",
    "lifecycle_for": "records",
    "job_for": "runner",
    "MAP_FIELDS": "spec",
    "PREVIOUS": "spec",
    "JobSpec": "spec",
    "Step": "spec",
    "budget_of": "spec",
    "job_of": "spec",
    "load_plan": "spec",
    "parse_job": "spec",
    "with_options": "spec",
    "TERMINAL": "store",
    "JobStore": "store",
}
__getattr__ = names_from(__name__, _WHERE)

__all__ = [
    "MAP_FIELDS",
    "PREVIOUS",
    "STOPPED_ORPHAN",
    "TERMINAL",
    "VERDICT_SCHEMA",
    "EventSink",
    "Job",
    "JobBusyError",
    "JobIdError",
    "JobPlan",
    "JobSpec",
    "JobStore",
    "LiveJobs",
    "MapJob",
    "MapProgress",
    "MapProgressRecord",
    "MapWatch",
    "PlanError",
    "Row",
    "RowSink",
    "Step",
    "budget_of",
    "chain_of",
    "continuation_plan",
    "current_activity",
    "exit_code",
    "follow_events",
    "job_for",
    "job_of",
    "job_state",
    "jobs_to_prune",
    "lifecycle_for",
    "list_jobs",
    "load_plan",
    "logged_runs",
    "map_input_rows",
    "member_step",
    "message_target",
    "parse_job",
    "parse_where",
    "plan",
    "plan_map",
    "progress_line",
    "read_map_rows",
    "read_rows",
    "read_run",
    "remove_jobs",
    "render",
    "resolve_run",
    "row_record",
    "send_message",
    "start_background",
    "stop_job",
    "wait_job",
    "with_options",
    "write_input",
    "write_results",
]
