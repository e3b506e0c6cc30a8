"""``subagents web``: the app on 127.0.0.1 and its address printed once: with the token when
the server made it (nobody else knows it), without it when the user chose it (they do). The
browser ``--open`` starts gets a one-time code, never the token (a command line is public)."""

from __future__ import annotations

import sys

from subagents.core import paths
from subagents.loopback import HOST, access_token, listen, serve
from subagents.web.app import create_app

DEFAULT_PORT = 8766
TOKEN_ENV = "SUBAGENTS_WEB_TOKEN"


def serve_web(port: int = DEFAULT_PORT, *, open_browser: bool = False) -> None:
    """Serve until SIGTERM, SIGINT or SIGHUP. The token: ``$SUBAGENTS_WEB_TOKEN``, else
    ``web_token`` in the user config, else a new one (a TokenError: bad input)."""
    token, generated = access_token("web_token", TOKEN_ENV)
    sock = listen(port)
    actual = sock.getsockname()[1]
    app, stop_streams = create_app(token=token, port=actual, home=paths.state_home())
    base = f"http://{HOST}:{actual}/"
    if generated:
        line = f"open {base}?token={token}  (set {TOKEN_ENV} to choose the token)"
    else:
        line = f"open {base}?token=YOUR-TOKEN  (the token from ${TOKEN_ENV} or web_token in the config)"
    print(f"subagents web: {line}", file=sys.stderr, flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(f"{base}?code={app.one_time_code()}")
    serve(app, sock, on_stop=stop_streams)
