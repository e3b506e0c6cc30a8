"""present — how things are told to a person: the shared progress formatter (one wording for
the live view and ``transcript.md``), failure diagnostics, and the terminal display.

May import: core. The supervisor uses the formatter and diagnostics, so those stay standard
library only; ``display`` (rich) is imported only by the command line.
"""

from subagents.core.lazy import exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.present.diagnostics import fence as fence
    from subagents.present.diagnostics import render as render_diagnostics
    from subagents.present.display import Display as Display
    from subagents.present.feed import JsonlFeed as JsonlFeed
    from subagents.present.humanize import humanize_tool_call as humanize_tool_call
    from subagents.present.humanize import one_line as one_line
    from subagents.present.jobview import RunRow as RunRow
    from subagents.present.jobview import Snapshot as Snapshot
    from subagents.present.progress import ProgressFormatter as ProgressFormatter
    from subagents.present.progress import transcript_entry as transcript_entry
    from subagents.present.top import run_top as run_top

_NAMES = {
    "ProgressFormatter": "progress",
    "transcript_entry": "progress",
    "humanize_tool_call": "humanize",
    "one_line": "humanize",
    "render_diagnostics": "diagnostics:render",
    "fence": "diagnostics",
    "Display": "display",
    "RunRow": "jobview",
    "Snapshot": "jobview",
    "run_top": "top",
    "JsonlFeed": "feed",
}
__all__ = [
    "Display",
    "JsonlFeed",
    "ProgressFormatter",
    "RunRow",
    "Snapshot",
    "fence",
    "humanize_tool_call",
    "one_line",
    "render_diagnostics",
    "run_top",
    "transcript_entry",
]
if not TYPE_CHECKING:
    __getattr__ = exports(__name__, _NAMES)
