"""jobs — what a caller asked for: plans and job specs, the job store and its index, the
orchestrator (single, parallel, chain), the background job driver
(``python -m subagents.jobs.driver JOB_DIR``), what a job records in the session log, and
the live views' rows of running and recent jobs (``live``: ``top``, the web view).

May import: core, config, agents, runs, lifecycle.
"""

from subagents.errors import JobBusyError, JobIdError, PlanError
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
from subagents.jobs.mapjob import MapJob, RowSink, job_for
from subagents.jobs.maplog import logged_runs, map_input_rows, write_input
from subagents.jobs.mapplan import plan_map, read_map_rows, read_rows
from subagents.jobs.mapprogress import MapProgress, MapProgressRecord, progress_line, row_record
from subagents.jobs.mapresults import write_all as write_results
from subagents.jobs.mapwatch import MapWatch
from subagents.jobs.orchestrator import EventSink, Job, exit_code
from subagents.jobs.planning import JobPlan, plan
from subagents.jobs.records import lifecycle_for
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
