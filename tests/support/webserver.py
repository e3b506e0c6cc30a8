"""The web app served for a test: in this process (uvicorn in a thread, on a free port of
127.0.0.1, over the test's own SUBAGENTS_HOME), or as the ``subagents web`` command; and a
headless Debian chromium to look at it, with :func:`until` to wait on the page,
:func:`too_wide` for what would not fit a phone, and :func:`screenshot` for the docs'
pictures of a page a test checked."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any

import httpx2
import uvicorn

from subagents.loopback import listen
from subagents.web import create_app

TOKEN = "test-token-0123456789abcdef"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Without the background-networking flags chromium tries hosts this machine cannot reach.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--window-size=1280,900",
)


# The two screens the pages are made for (docs/web.md's screenshots are of both).
DESKTOP = {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
# A directory here makes the browser tests save their screenshots into it (docs/web/).
SHOTS_ENV = "SUBAGENTS_SCREENSHOTS"


def have_chromium() -> bool:
    return Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()


@dataclass
class Web:
    port: int
    app: Any = None  # the app behind its access checks (subagents.web.access.Access)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def sign_in(self) -> str:
        return f"{self.base}/?token={TOKEN}"

    def client(self, **kw: Any) -> httpx2.Client:
        """A program's client: the bearer token on every request."""
        headers = {"Authorization": f"Bearer {TOKEN}", **kw.pop("headers", {})}
        return httpx2.Client(base_url=self.base, headers=headers, timeout=30, **kw)


@contextmanager
def web_server(home: Path, **options: Any) -> Iterator[Web]:
    """The app over ``home`` (``options``: more of ``create_app``'s, e.g. ``waiting``)."""
    sock = listen(0)
    port = sock.getsockname()[1]
    app, stop_streams = create_app(token=TOKEN, port=port, home=home, **options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the web server did not start"
    try:
        yield Web(port, app)
    finally:
        stop_streams()
        server.should_exit = True
        thread.join(15)
        sock.close()


@contextmanager
def chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="sa-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextmanager
def web_command(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """``subagents web --port 0`` under ``env`` (over os.environ): the process, its base
    address and the line it printed; stopped (and reaped) at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "subagents.cli", "web", "--port", "0"],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, line
        yield proc, found.group(0), line
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(15)


def cost_tables(page: str) -> dict[str, list[list[str]]]:
    """The cost page's tables by grouping: each row's cells as text."""
    tables = {}
    for by, body in re.findall(
        r'<table class="cost" data-by="(\w+)">.*?<tbody>(.*?)</tbody>', page, re.S
    ):
        rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
        tables[by] = [
            [unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows
        ]
    return tables


def cost_rows(report: dict[str, Any]) -> list[list[str]]:
    """What the cost page's table shows of ``subagents cost --json --by …``'s report: its
    rows, then the total."""
    from subagents.lifecycle.cost import money

    return [
        [str(r["key"]), str(r["jobs"]), str(r["runs"]), str(r["input"]), str(r["output"]),
         f"{r['cacheRead']}/{r['cacheWrite']}", str(r["totalTokens"]), money(r["cost"], r["unpriced"])]
        for r in [*report["rows"], {**report["total"], "key": "total"}]
    ]  # fmt: skip


def until(driver: Any, script: str, timeout: float = 30.0) -> Any:
    """Waits for a JavaScript expression (run in the page) to be truthy; returns its value.
    An expression that throws (its element is not there yet) is not true yet."""
    from support.checks import eventually

    value: list[Any] = [None]

    def check() -> bool:
        value[0] = driver.execute_script(f"try {{ return {script} }} catch (e) {{ return null }}")
        return bool(value[0])

    assert eventually(check, timeout), f"never true: {script}"
    return value[0]


def too_wide(driver: Any) -> list[str]:
    """Elements (shown) reaching past the right edge of the viewport, and page scroll; what
    scrolls in its own box (``.scroll``, ``pre``) may."""
    found: list[str] = driver.execute_script(
        """
        const out = [], w = document.documentElement.clientWidth;
        if (document.documentElement.scrollWidth > w) out.push('page ' + document.documentElement.scrollWidth);
        for (const e of document.querySelectorAll('body *')) {
          const r = e.getBoundingClientRect();
          if (r.width && r.right > w + 1 && !e.closest('.scroll, pre')) out.push(e.tagName + '.' + e.className + ' ' + r.right);
        }
        return out.slice(0, 10);
        """
    )
    return found


def screenshot(driver: Any, name: str) -> Path | None:
    """What the browser shows, saved as ``NAME.png`` in the directory ``$SUBAGENTS_SCREENSHOTS``
    names (nothing without it): called once a test has checked the page, so a picture in the
    docs is always of a page a test looked at."""
    where = os.environ.get(SHOTS_ENV)
    if not where:
        return None
    path = Path(where) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(str(path)), path
    return path
