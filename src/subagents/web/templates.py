"""The pages' markup: Jinja2 templates in ``web/templates/``, with autoescape on. Every value
a template shows is text on the page (a child's words, a task, a path, an id), unless it is
:class:`~markupsafe.Markup` made here on purpose: Markdown rendered without raw HTML
(``markdown``) and nothing else. The page's script and style come from ``/static/``, which
the Content-Security-Policy holds it to: no inline script runs even if markup slipped through.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from subagents.core.clock import epoch
from subagents.present.figures import elapsed, money, tokens

TEMPLATES = Path(__file__).parent / "templates"
NAV = (("/", "Fleet"), ("/cost", "Cost"))


def url(path: str, **params: str | None) -> str:
    """An address of this app: ``path`` with the parameters that have a value (the template
    escapes it where it is put)."""
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v)
    return path + ("?" + query if query else "")


def when(ts: object) -> str:
    value = epoch(ts)
    return "-" if value is None else datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def clock(ts: object) -> str:
    value = epoch(ts)
    return "" if value is None else datetime.fromtimestamp(value).strftime("%H:%M:%S")


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(elapsed=elapsed, tokens=tokens, money=money, when=when, clock=clock)
    env.globals.update(url=url, nav=NAV)
    return env


def render(template: str, /, **context: Any) -> str:
    """The template ``template`` filled with ``context`` (its values escaped where they land)."""
    return environment().get_template(template).render(**context)
