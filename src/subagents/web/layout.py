"""The frame every page shares, and the one way text becomes HTML here: :func:`esc`.

Pages are built from f-strings in which every value that is not markup of ours goes through
:func:`esc` (a child's words, a task, a path, an id): nothing a child wrote reaches the page
as markup. The page's script and style come from the app itself (``/static/``), which the
Content-Security-Policy holds it to: no inline script runs even if markup slipped through.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from subagents.present.figures import elapsed, money, tokens

NAV = (("/", "Fleet"), ("/cost", "Cost"))


def esc(value: Any) -> str:
    """``value`` as text on the page (quotes too, so it is safe in an attribute)."""
    return escape("" if value is None else str(value), quote=True)


def url(path: str, **params: str | None) -> str:
    """An address of this app: ``path`` with the parameters that have a value."""
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v)
    return path + ("?" + query if query else "")


def href(path: str, **params: str | None) -> str:
    """:func:`url`, escaped for an attribute of the page."""
    return esc(url(path, **params))


def badge(status: str, cls: str = "") -> str:
    return f'<span class="badge st-{esc(status)} {cls}">{esc(status)}</span>'


def numbers(seconds: float | None, count: int, cost: float | None) -> tuple[str, str, str]:
    """Elapsed, tokens and cost in the words of ``subagents top``."""
    return elapsed(seconds), tokens(count), money(cost)


def page(title: str, body: str, *, csrf: str, active: str, name: str = "") -> str:
    """A whole page: ``active`` is the address its navigation marks, ``name`` says which
    page it is (``data-page``, for the stylesheet and the tests)."""
    nav = " ".join(
        f'<a href="{path}"{" aria-current=page" if path == active else ""}>{label}</a>'
        for path, label in NAV
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{esc(csrf)}">
<title>{esc(title)} · subagents</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script>
</head><body data-page="{esc(name)}">
<header><strong>subagents</strong> <nav>{nav}</nav><span id="live" class="live" title="live updates">●</span></header>
<main>
{body}
</main>
</body></html>
"""
