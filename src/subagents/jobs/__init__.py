"""jobs — what a caller asked for: plans and job specs, the job store and its index, the
orchestrator (single, parallel, chain), the background job driver
(``python -m subagents.jobs.driver JOB_DIR``) and what a job records in the session log.

May import: core, config, agents, runs, lifecycle.
"""

from subagents.core.lazy import exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.jobs.continuation import chain_of as chain_of
    from subagents.jobs.continuation import continuation_plan as continuation_plan
    from subagents.jobs.continuation import read_run as read_run
    from subagents.jobs.continuation import resolve_run as resolve_run
    from subagents.jobs.control import STOPPED_ORPHAN as STOPPED_ORPHAN
    from subagents.jobs.control import current_activity as current_activity
    from subagents.jobs.control import job_state as job_state
    from subagents.jobs.control import list_jobs as list_jobs
    from subagents.jobs.control import stop_job as stop_job
    from subagents.jobs.control import wait_job as wait_job
    from subagents.jobs.driver import start_background as start_background
    from subagents.jobs.housekeeping import JobBusyError as JobBusyError
    from subagents.jobs.housekeeping import jobs_to_prune as jobs_to_prune
    from subagents.jobs.housekeeping import remove_jobs as remove_jobs
    from subagents.jobs.orchestrator import EventSink as EventSink
    from subagents.jobs.orchestrator import Job as Job
    from subagents.jobs.orchestrator import JobPlan as JobPlan
    from subagents.jobs.orchestrator import PlanOptions as PlanOptions
    from subagents.jobs.orchestrator import exit_code as exit_code
    from subagents.jobs.orchestrator import options_from_settings as options_from_settings
    from subagents.jobs.orchestrator import plan as plan
    from subagents.jobs.records import lifecycle_for as lifecycle_for
    from subagents.jobs.spec import PREVIOUS as PREVIOUS
    from subagents.jobs.spec import JobSpec as JobSpec
    from subagents.jobs.spec import PlanError as PlanError
    from subagents.jobs.spec import Step as Step
    from subagents.jobs.spec import job_of as job_of
    from subagents.jobs.spec import load_plan as load_plan
    from subagents.jobs.spec import parse_job as parse_job
    from subagents.jobs.spec import with_options as with_options
    from subagents.jobs.store import TERMINAL as TERMINAL
    from subagents.jobs.store import JobIdError as JobIdError
    from subagents.jobs.store import JobStore as JobStore

_NAMES = {
    "STOPPED_ORPHAN": "control",
    "current_activity": "control",
    "job_state": "control",
    "list_jobs": "control",
    "stop_job": "control",
    "wait_job": "control",
    "read_run": "continuation",
    "resolve_run": "continuation",
    "chain_of": "continuation",
    "continuation_plan": "continuation",
    "JobSpec": "spec",
    "PlanError": "spec",
    "PREVIOUS": "spec",
    "load_plan": "spec",
    "parse_job": "spec",
    "Step": "spec",
    "job_of": "spec",
    "with_options": "spec",
    "JobStore": "store",
    "JobIdError": "store",
    "TERMINAL": "store",
    "Job": "orchestrator",
    "JobPlan": "orchestrator",
    "PlanOptions": "orchestrator",
    "EventSink": "orchestrator",
    "plan": "orchestrator",
    "options_from_settings": "orchestrator",
    "exit_code": "orchestrator",
    "start_background": "driver",
    "lifecycle_for": "records",
    "JobBusyError": "housekeeping",
    "jobs_to_prune": "housekeeping",
    "remove_jobs": "housekeeping",
}
__all__ = [
    "PREVIOUS",
    "STOPPED_ORPHAN",
    "TERMINAL",
    "EventSink",
    "Job",
    "JobBusyError",
    "JobIdError",
    "JobPlan",
    "JobSpec",
    "JobStore",
    "PlanError",
    "PlanOptions",
    "Step",
    "chain_of",
    "continuation_plan",
    "current_activity",
    "exit_code",
    "job_of",
    "job_state",
    "jobs_to_prune",
    "lifecycle_for",
    "list_jobs",
    "load_plan",
    "options_from_settings",
    "parse_job",
    "plan",
    "read_run",
    "remove_jobs",
    "resolve_run",
    "start_background",
    "stop_job",
    "wait_job",
    "with_options",
]
if not TYPE_CHECKING:
    __getattr__ = exports(__name__, _NAMES)
