"""web — ``subagents web``: a dashboard in the browser over the same job store and run
directories as the command line. Pages: the fleet (``fleet``), a job and its runs
(``jobpage``: transcript, diagnostics, Gantt, diff with Apply, Stop; ``council``), cost
(``costpage``); what needs a person, at the top of the fleet (``needs``: the approvals inbox
plugs in there as a ``WaitingSource`` handed to ``create_app``); their markup in Jinja2 templates with autoescape (``templates/``, filled by
``templates``), charts (``charts``), Markdown without raw HTML (``markdown``), transcripts read
as they grow (``transcript``), every id a request names resolved (``ids``), one watcher of the
store for every live stream (``watch``), access (``access``: token, sessions, Host/Origin,
CSRF, CSP), the routes, streams and errors (``app``), serving (``serve``).

May import: everything below the surfaces (api, jobs, lifecycle, runs, present, core, config).
"""

from subagents.web.app import create_app
from subagents.web.needs import Waiting, WaitingSource
from subagents.web.serve import DEFAULT_PORT, TOKEN_ENV, serve_web

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "Waiting", "WaitingSource", "create_app", "serve_web"]
