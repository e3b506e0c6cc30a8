"""A Ray host's supervisor template (launchers/ray_forks.py), without a cluster: this test
process plays the host. The template stands behind a keeper, forks each run's supervisor,
and binds them to it: its death aborts their runs (a lost host leaves no child running);
dismissed, it stays until its last supervisor has ended. Real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.checks import eventually, pid_alive
from support.warmchild import request

from subagents.config import Settings
from subagents.launchers.ray_forks import HostTemplate
from subagents.launchers.ray_host import KEEPER
from subagents.launchers.ray_keeper import SPARE
from subagents.runs import prepare

pytestmark = pytest.mark.process


@pytest.fixture
def host() -> Iterator[HostTemplate]:
    forks = HostTemplate((*KEEPER, str(os.getpid()), SPARE))
    yield forks
    for template in [forks.template, *forks.leaving]:
        if template is not None and template.popen.poll() is None:
            template.popen.kill()
            template.popen.wait(30)


def run_dir(tmp_path: Path, name: str, gate: Path) -> Path:
    req, env = request(tmp_path, name, gate)
    return prepare(req, Settings(kill_grace=1.0), env=env)[1]


def result(path: Path) -> dict[str, object]:
    assert eventually(lambda: (path / "result.json").exists(), 60), "no result within 60 s"
    data: dict[str, object] = json.loads((path / "result.json").read_text())
    return data


def test_a_host_template_forks_bound_supervisors(host: HostTemplate, tmp_path: Path) -> None:
    async def go() -> None:
        assert host.state() is None  # `ray status`: no template
        host.want(True)
        assert host.serving()
        gate = tmp_path / "gate"
        dirs = [run_dir(tmp_path, f"r{i}", gate) for i in range(2)]
        forked = [await host.fork(d) for d in dirs]
        template = host.template
        assert template is not None and template.ready.is_set() and not template.broken
        assert host.state() == "ready"
        keeper = psutil.Process(template.pid)
        (server,) = keeper.children()  # the template, behind its keeper
        assert "--bound" in server.cmdline()
        for ident in forked:
            assert ident is not None
            proc = psutil.Process(ident["pid"])
            assert proc.ppid() == server.pid
            assert abs(proc.create_time() - ident["createTime"]) < 0.05
            assert os.getsid(ident["pid"]) == ident["pid"]
        gate.touch()
        for d, name in zip(dirs, ("r0", "r1"), strict=True):
            done = result(d)
            assert done["status"] == "completed" and done["finalText"] == f"done {name}"

        # Its death (the keeper's, as when the host dies) aborts the runs still going.
        late = run_dir(tmp_path, "late", tmp_path / "never")
        ident = await host.fork(late)
        assert ident is not None
        assert eventually(lambda: (tmp_path / "late.env.json").exists())
        keeper.kill()
        done = result(late)
        assert done["status"] == "aborted" and "SIGTERM" in str(done["errorMessage"])
        assert eventually(lambda: not pid_alive(server.pid))
        assert eventually(lambda: host.state() is None)  # gone: not said to be there
        # The next run finds it gone: started another way (None here), never twice.
        assert await host.fork(run_dir(tmp_path, "next", gate)) is None
        assert not host.serving()

    asyncio.run(go())


def test_a_dismissed_host_template_stays_until_its_last_supervisor_ends(
    host: HostTemplate, tmp_path: Path
) -> None:
    async def go() -> None:
        host.want(True)
        gate = tmp_path / "gate"
        d = run_dir(tmp_path, "long", gate)
        ident = await host.fork(d)
        assert ident is not None
        assert eventually(lambda: (tmp_path / "long.env.json").exists())
        template = host.template
        assert template is not None
        host.want(False)  # no more runs coming: dismissed
        assert not host.serving()
        assert template.popen.poll() is None  # its supervisor still runs: it stays
        assert pid_alive(ident["pid"])
        gate.touch()
        assert result(d)["status"] == "completed"
        assert template.popen.wait(30) == 0  # then goes
        host.want(False)
        assert host.leaving == []

    asyncio.run(go())


def test_a_template_stop_signal_ends_it_and_its_bound_supervisors(
    host: HostTemplate, tmp_path: Path
) -> None:
    async def go() -> None:
        host.want(True)
        d = run_dir(tmp_path, "stopped", tmp_path / "never")
        ident = await host.fork(d)
        assert ident is not None and host.template is not None
        assert eventually(lambda: (tmp_path / "stopped.env.json").exists())
        (server,) = psutil.Process(host.template.pid).children()
        os.kill(server.pid, signal.SIGTERM)
        done = result(d)
        assert done["status"] == "aborted"

    asyncio.run(go())
