"""A live stream ends when its client goes: nothing of it is left in the server (no stream
generator drawing or reading, and, with no stream left, no watcher polling the store), for
the fleet's stream and for a job's stream while its run goes on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.checks import eventually
from support.fake import Fake
from support.webserver import Web

import subagents
from subagents import service
from subagents.jobs import JobStore

TIMEOUT = 60


def _server(web: Web) -> Any:
    """The app's own state (web.app is the access layer around the Starlette app)."""
    return web.app.app.state.web


def _read_until(lines: Iterator[str], wanted: str) -> None:
    """Reads ``lines`` (a stream's ``iter_lines()``, kept: dropping it closes the
    connection) up to the event ``wanted``."""
    for line in lines:
        if line == f"event: {wanted}":
            return
    raise AssertionError(f"the stream ended before {wanted!r}")


def _nothing_left(web: Web) -> bool:
    app = _server(web)
    return app.streams == 0 and app.watcher.listeners == 0 and app.watcher._task is None


def test_the_fleet_streams_end_when_their_clients_go(web: Web) -> None:
    app = _server(web)
    with ExitStack() as first, ExitStack() as others:
        readers = []
        for stack in (first, others, others):
            client = stack.enter_context(web.client())
            readers.append(stack.enter_context(client.stream("GET", "/events/fleet")).iter_lines())
            _read_until(readers[-1], "fleet")
        assert app.streams == 3 and app.watcher.listeners == 3
        assert app.watcher._task is not None
        first.close()  # one client goes
        assert eventually(lambda: app.streams == 2, 15)
        assert app.watcher._task is not None  # the others still listen
    assert eventually(lambda: _nothing_left(web), 15)
    # A new client starts it all again.
    with web.client() as client, client.stream("GET", "/events/fleet") as s:
        lines = s.iter_lines()
        _read_until(lines, "fleet")
        assert app.streams == 1 and app.watcher._task is not None
    assert eventually(lambda: _nothing_left(web), 15)


@pytest.mark.process
def test_a_job_stream_ends_when_its_client_goes_while_the_run_goes_on(
    web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    steps = [*pi.start()]
    for i in range(600):  # a command every 0.1 s for a minute, then it waits
        steps += [*pi.tool_use(f"c{i}", command=f"step {i}"), {"sleep": 0.1}]
        steps += pi.tool_end(f"c{i}")
    job = subagents.start("go on", env=fake.env([*steps, {"hang": True}]))
    try:
        assert eventually(lambda: any(JobStore().load(job.job_id)["runIds"]), TIMEOUT)
        run_id = JobStore().load(job.job_id)["runIds"][0]
        address = f"/events/job/{job.job_id}?run={run_id}"
        with web.client() as client, client.stream("GET", address) as s:
            _read_until(lines := s.iter_lines(), "transcript")
            _read_until(lines, "transcript")  # it streams as the run writes
            assert _server(web).streams == 1
        assert eventually(lambda: _nothing_left(web), 15)
        assert service.job_state(JobStore(), job.job_id)["status"] == "running"
    finally:
        job.stop()
