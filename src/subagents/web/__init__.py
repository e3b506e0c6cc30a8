"""web — ``subagents web``: a dashboard in the browser over the same job store and run
directories as the command line. Pages: the fleet (``fleet``), a job and its runs
(``jobpage``: transcript, diagnostics, Gantt, diff with Apply, Stop), cost (``costpage``);
their charts (``charts``), Markdown without raw HTML (``markdown``), transcripts read as they
grow (``transcript``), the shared frame and escaping (``layout``), access (``access``: token,
cookie, Host/Origin, CSRF, CSP), the routes and live streams (``app``), serving (``serve``).

May import: everything below the surfaces (api, jobs, lifecycle, runs, present, core, config).
"""

from subagents.web.app import create_app
from subagents.web.serve import DEFAULT_PORT, TOKEN_ENV, serve_web

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "create_app", "serve_web"]
