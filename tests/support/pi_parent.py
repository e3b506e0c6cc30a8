"""The real pi as a parent with the pi package (integrations/pi) loaded, against the mock
model: its environment, the children's providers and agents, and the skip when pi is too old."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.cli.nodecheck import node_too_old
from subagents.demo.mockmodel import MockModelServer, Script, pi_argv, write_pi_config
from subagents.runs.versions import package_version
from support.pistream import Played, stand_in

REPO = Path(__file__).resolve().parents[2]


EXTENSION = REPO / "integrations" / "pi" / "index.ts"


SUBAGENTS = Path(sys.executable).with_name("subagents")


def pi_version_of(binary: str) -> str:
    """The version of the pi at ``binary``, read from its npm package as the engine reads it
    (no pi started: a start is ~0.5 CPU-s); "" when it is not there or the Node on PATH is
    too old to run it."""
    if not Path(binary).exists() or node_too_old(binary, os.environ) is not None:
        return ""
    return package_version(os.path.realpath(binary)) or ""


def _pi_version() -> tuple[int, ...] | None:
    """The version of the pi on PATH (``pi_version_of``), None if there is none to run."""
    pi = shutil.which("pi")
    found = pi_version_of(pi) if pi else ""
    return tuple(int(x) for x in found.split(".")) if found else None


_VERSION = _pi_version()


needs_pi_parent = pytest.mark.skipif(
    _VERSION is None or _VERSION < (0, 87) or not SUBAGENTS.exists(),
    reason="needs pi >= 0.87 on PATH (with Node >= 22) and the subagents CLI in the venv",
)


def add_provider(agent_dir: Path, name: str, base_url: str) -> None:
    """A second provider in the parent's models.json: children given ``name/mock-model``
    talk to another mock server."""
    path = agent_dir / "models.json"
    models = json.loads(path.read_text())
    models["providers"][name] = {**models["providers"]["mock"], "baseUrl": base_url + "/v1"}
    path.write_text(json.dumps(models))


class Parent:
    """A pi parent against ``server``, with the package loaded and a session directory."""

    def __init__(self, tmp: Path, server: MockModelServer) -> None:
        self.tmp = tmp
        self.work = tmp / "project"
        self.work.mkdir(exist_ok=True)
        self.agent_dir = tmp / "pi-agent"
        self.sessions = tmp / "sessions"
        self.env = {
            **os.environ,
            **write_pi_config(self.agent_dir, server.url, retry={"enabled": False}),
            "SUBAGENTS_BIN": str(SUBAGENTS),
        }
        self.env.pop("PI_SUBAGENTS_CHILD", None)
        self.model = server  # the parent's own mock
        self.stderr = ""  # the last print-mode run's
        self.children: dict[str, MockModelServer] = {}  # the children's providers' mocks

    def stand_in(self, **providers: list[Played]) -> None:
        """Children played by a stand-in (``support.pistream.stand_in``), each by the steps
        of its provider, where the test's subject is what the parent makes of them."""
        self.env.update(stand_in(self.tmp / "pi-stand-in", **providers))

    def run(self, prompt: str, *extra: str, load: bool = True) -> list[dict[str, Any]]:
        argv = pi_argv(prompt)
        argv.remove("--no-session")
        argv[-1:-1] = ["--session-dir", str(self.sessions), *extra]
        if load:
            argv[-1:-1] = ["-e", str(EXTENSION)]
        p = subprocess.run(
            argv,
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        self.stderr = p.stderr
        return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]

    def spawn(self, argv: list[str], stdin: int) -> subprocess.Popen[str]:
        """pi with ``argv`` as a live process; events on its stdout."""
        return subprocess.Popen(
            argv,
            cwd=self.work,
            env=self.env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def session_file(self) -> Path:
        files = list(self.sessions.rglob("*.jsonl"))
        assert len(files) == 1, files
        return files[0]

    def agent_events(self) -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in self.session_file().read_text().splitlines() if x]
        return [
            e["data"] for e in lines if e["type"] == "custom" and e["customType"] == "agent_event"
        ]


@contextlib.contextmanager
def delegating(
    tmp_path: Path,
    args: dict[str, Any],
    calls: int = 1,
    answer: str | None = None,
    **children: Script,
) -> Iterator[tuple[Parent, MockModelServer]]:
    """A pi parent whose mock model calls ``subagent(args)`` (``calls`` times, then answers
    ``answer``, by default quoting the tool's output); each ``NAME=script`` is a mock of its
    own, the provider of children on ``NAME/mock-model``."""
    script = Script(tool_name="subagent", tool_args=args, final_text=answer)
    if calls > 1:
        script = Script(
            tool_name="subagent", tool_args=args, final_text=answer, loop=True, loop_limit=calls
        )
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(MockModelServer(script))
        parent = Parent(tmp_path, server)
        for name, child in children.items():
            parent.children[name] = stack.enter_context(MockModelServer(child))
            add_provider(parent.agent_dir, name, parent.children[name].url)
        yield parent, server


def write_agent(name: str, model: str) -> None:
    """An agent (in the test's own config dir) whose runs use ``model``."""
    agents = Path(os.environ["SUBAGENTS_CONFIG_DIR"]) / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: {name}\nmodel: {model}\n---\nYou are {name}.\n"
    )


def mixed_tasks(first: str, second: str) -> dict[str, Any]:
    """Two tasks in parallel: ``first`` for the agent ``scout`` (on the provider ``child``),
    ``second`` for ``failer`` (on ``broken``)."""
    write_agent("scout", "child/mock-model")
    write_agent("failer", "broken/mock-model")
    return {"tasks": [{"task": first, "agent": "scout"}, {"task": second, "agent": "failer"}]}


BROKEN = Script(error_status=500, error_times=-1)  # every request: 500 mock server error


COLUMNS = ("JOB", "TASK", "AGENTS", "BACKENDS", "STATUS", "ELAPSED", "TOKENS", "COST")
