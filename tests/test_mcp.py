"""The MCP server, through the official SDK client: in this process over the SDK's
in-memory transport, and a spawned `subagents mcp` over stdio (support/mcp_client.py); the
runs it starts are the fake agent's processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult
from support import pistream as pi
from support.checks import pid_alive
from support.fake import Fake, fake_env, script_launcher
from support.mcp_client import TIMEOUT, connect, run, spawn, text_of

from subagents.jobs.store import JobStore
from subagents.mcp import progress as mcp_progress

pytestmark = [
    pytest.mark.process,
    pytest.mark.filterwarnings("ignore:resources/subscribe is removed"),
]


# ---- tools ---------------------------------------------------------------------------------


def test_lists_the_tools_and_the_job_resource() -> None:
    async def main() -> None:
        async with connect({}) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {
                "subagent",
                "subagent_status",
                "subagent_result",
                "subagent_send",
                "subagent_inbox",
                "subagent_decide",
                "subagent_cancel",
                "list_agents",
                "continue",
                "subagent_map",
            }
            props = tools["subagent"].input_schema["properties"]
            assert {
                "task",
                "tasks",
                "chain",
                "agent",
                "cwd",
                "model",
                "background",
                "concurrency",
            } <= set(props)
            assert tools["subagent"].description and "{previous}" in tools["subagent"].description
            assert tools["subagent_result"].input_schema["required"] == ["job_id"]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["subagent://jobs/{id}"]
            agents = await client.call_tool("list_agents", {})
            assert not agents.is_error and "scout" in text_of(agents)

    run(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026 envelope and the 2025 handshake
def test_foreground_call_streams_progress_and_returns_the_answer(
    fake: Fake, isolated_state: Path, mode: str
) -> None:
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def main() -> None:
        # Over a spawned server's stdio: the transport a client of `subagents mcp` uses.
        async with spawn(fake_env(fake, pi.answer("The answer.")), mode=mode) as client:
            result = await client.call_tool(
                "subagent", {"task": "do the thing"}, progress_callback=on_progress
            )
        assert not result.is_error, text_of(result)
        job = result.structured_content
        assert job is not None and job["status"] == "completed" and job["mode"] == "single"
        assert job["answer"] == "The answer." and "finalText" not in job["runs"][0]  # once
        # What a parent model reads first: the answer, then one line of status and the ids.
        assert list(job)[:2] == ["answer", "summary"]
        assert job["summary"].startswith("✓ completed · pi · ") and " tokens · $" in job["summary"]
        assert job["runIds"] == [job["runs"][0]["runId"]]
        assert "paths" not in job["runs"][0]  # compact: the full result is the job resource
        # The text says the same for a person: the answer, then the status line with the ids.
        answer, status = text_of(result).split("\n\n")
        assert answer == "The answer."
        assert status == f"{job['summary']} · job {job['jobId']} · run {job['runIds'][0]}"
        assert messages and messages[0].startswith(f"job {job['jobId']} started")
        assert any("$ ls" in m for m in messages), messages  # the shared formatter's tool line
        assert all(len(m) <= 200 for m in messages)
        # The connection is a session in the lifecycle log.
        logs = list((isolated_state / "sessions").glob("mcp-*.jsonl"))
        assert len(logs) == 1
        kinds = [json.loads(line)["eventType"] for line in logs[0].read_text().splitlines()]
        assert kinds == ["subagent:start", "subagent:complete"]

    run(main)


def test_parallel_answers_come_back_in_order(fake: Fake) -> None:
    env = script_launcher(
        fake, "echo-pi", "time.sleep(0.3 if task == 'alpha' else 0)\nanswer('echo: ' + task)\n"
    )
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def main() -> None:
        async with connect(env) as client:
            result = await client.call_tool(
                "subagent", {"tasks": ["alpha", {"task": "beta"}]}, progress_callback=on_progress
            )
        assert not result.is_error, text_of(result)
        job = result.structured_content
        assert job is not None and job["mode"] == "parallel" and job["status"] == "completed"
        assert job["answer"] == ["echo: alpha", "echo: beta"]  # in task order
        assert [r["status"] for r in job["runs"]] == ["completed", "completed"]
        text = text_of(result)
        assert text.index("echo: alpha") < text.index("echo: beta")
        # Every progress message speaks of both runs, whichever spoke last.
        both = [m for m in messages if m.startswith("[1] ") and " · [2] " in m]
        assert both and all(m in both for m in messages[1:]), messages
        assert any(re.match(r"\[1\] .* · \[2\] ✓ \d", m) for m in both), messages  # beta ended

    run(main)


def test_a_council_answers_side_by_side_with_its_verdict(fake: Fake) -> None:
    """The council's result text is ``show``'s table (present/council.py) and the verdict;
    the judge's merged answer leads. Fake pis: a member answers by its model, the judge (its task says
    "Judge their answers") returns a verdict as JSON."""
    verdict = {"best": "B", "agreement": "partial", "reasons": ["B is terse"], "merged": "beta"}
    env = script_launcher(
        fake,
        "council-pi",
        f"if 'Judge their answers' in task:\n    answer(json.dumps({verdict!r}))\n"
        "else:\n    answer('beta' if 'm2' in sys.argv else 'alpha')\n",
    )

    async def main() -> None:
        async with connect(env) as client:
            result = await client.call_tool(
                "subagent", {"task": "name it", "council": ["pi", "pi:m2"], "judge": "pi"}
            )
        assert not result.is_error, text_of(result)
        job = result.structured_content
        assert job is not None and job["mode"] == "council" and job["status"] == "completed"
        assert job["answer"] == "beta"  # the judge's merged answer
        assert job["council"]["verdict"] == verdict
        text = text_of(result)
        assert text.startswith("beta\n\n```\n")  # the merged answer, then the table
        rows = {line.split()[0]: line for line in text.splitlines() if line[:2] in ("A ", "B ")}
        assert set(rows) == {"A", "B"}
        assert "pi" in rows["A"] and "completed" in rows["A"] and "alpha" in rows["A"]
        assert "pi (m)" in rows["B"] and "beta" in rows["B"]  # the model the run reported
        assert "2 answered (quorum 1)" in text
        assert "verdict: best B, agreement partial" in text and "  - B is terse" in text
        assert text.rstrip().endswith(f"job {job['jobId']}")

    run(main)


def test_a_council_short_of_its_quorum_says_why_beside_the_answers(fake: Fake) -> None:
    steps: list[dict[str, Any]] = [*pi.start(), {"stderr": "model exploded\n"}, {"exit": 3}]

    async def main() -> None:
        async with connect(fake_env(fake, steps)) as client:
            result = await client.call_tool(
                "subagent",
                {"task": "name it", "council": ["pi", "pi"], "judge": "pi", "quorum": 1},
            )
        assert result.is_error
        text = text_of(result)
        first, why = text.split("\n\n")[:2]
        assert first.startswith("✗ failed")
        assert why == "0 of 2 members answered, fewer than the quorum of 1: the judge did not start"
        assert "0 answered (quorum 1)" in text and "verdict:" not in text
        rows = [line for line in text.splitlines() if line[:2] in ("A ", "B ")]
        assert len(rows) == 2 and all("failed" in r for r in rows)
        job = result.structured_content
        assert job is not None and job["council"]["answered"] == 0

    run(main)


def test_a_failed_run_is_an_error_result_with_diagnostics(fake: Fake) -> None:
    async def main() -> None:
        steps: list[dict[str, Any]] = [*pi.start(), {"stderr": "model exploded\n"}, {"exit": 3}]
        async with connect(fake_env(fake, steps)) as client:
            result = await client.call_tool("subagent", {"task": "x"})
        assert result.is_error
        assert (
            result.structured_content is not None
            and result.structured_content["status"] == "failed"
        )
        assert "model exploded" in text_of(result)

    run(main)


def test_background_job_then_result(fake: Fake) -> None:
    async def main() -> None:
        async with connect(fake_env(fake, pi.answer("Background answer."))) as client:
            started = await client.call_tool("subagent", {"task": "later", "background": True})
            assert not started.is_error, text_of(started)
            job_id = (started.structured_content or {})["jobId"]
            # How to follow the job, for the model (structured) and for a person (text).
            follow = (started.structured_content or {})["follow"]
            assert f'subagent_result(job_id="{job_id}", wait_seconds=' in follow
            assert f"Started job {job_id} in the background" in text_of(started)
            assert follow in text_of(started)
            result = await client.call_tool(
                "subagent_result", {"job_id": job_id, "wait_seconds": 30}
            )
            assert not result.is_error, text_of(result)
            assert text_of(result).startswith("Background answer.\n\n✓ completed")
            assert (result.structured_content or {})["status"] == "completed"
            status = await client.call_tool("subagent_status", {"job_id": job_id[:12]})
            assert (status.structured_content or {})["status"] == "completed"
            resource = await client.read_resource(f"subagent://jobs/{job_id}")
            state = json.loads(getattr(resource.contents[0], "text", ""))
            assert (
                state["jobId"] == job_id
                and state["status"] == "completed"
                and state["background"] is True
            )

    run(main)


def test_a_job_stopped_from_the_claude_session_is_not_announced_to_it(fake: Fake) -> None:
    env = {
        **script_launcher(fake, "slow-pi", "time.sleep(30)\nanswer('late')\n"),
        "CLAUDE_CODE_SESSION_ID": "6a0ecfc5-d5f9-4431-b6aa-bcd88b65e383",
    }

    async def main() -> None:
        # As Claude Code starts the plugin's server: the flag, then the hook, each a process.
        async with spawn(env, args=("--claude-session",)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            # Claude Code names a tool by its annotations' title (its permission dialog).
            assert tools["subagent"].annotations and tools["subagent"].annotations.title
            assert tools["subagent"].annotations.title == tools["subagent"].title
            started = await client.call_tool("subagent", {"task": "slow", "background": True})
            view = started.structured_content or {}
            assert "announced in this conversation" in view["told"], view
            cancelled = await client.call_tool("subagent_cancel", {"job_id": view["jobId"]})
            assert (cancelled.structured_content or {})["status"] == "aborted"
        hook = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "claude-code", "prompt-hook"],
            input=json.dumps({"session_id": env["CLAUDE_CODE_SESSION_ID"], "prompt": "news?"}),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert hook.returncode == 0 and hook.stdout == "", hook  # no news of a job stopped here

    run(main)


def test_result_says_still_running_when_the_wait_ends_first(fake: Fake) -> None:
    env = script_launcher(fake, "slow-pi", "time.sleep(30)\nanswer('late')\n")

    async def main() -> None:
        async with connect(env) as client:
            started = await client.call_tool("subagent", {"task": "slow", "background": True})
            job_id = (started.structured_content or {})["jobId"]
            result = await client.call_tool(
                "subagent_result", {"job_id": job_id, "wait_seconds": 0.5}
            )
            assert not result.is_error and "still running" in text_of(result)
            cancelled = await client.call_tool("subagent_cancel", {"job_id": job_id})
            assert (cancelled.structured_content or {})["status"] == "aborted", text_of(cancelled)

    run(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_job_end_notifies_resource_subscribers(fake: Fake, tmp_path: Path, mode: str) -> None:
    gate = tmp_path / "gate"
    env = script_launcher(
        fake,
        "gated-pi",
        f"deadline = time.time() + 30\nwhile not os.path.exists({str(gate)!r}) and time.time() < deadline:\n"
        "    time.sleep(0.05)\nanswer('done')\n",
    )
    updated: list[str] = []
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            updated.append(str(message.params.uri))
            got.set()

    async def main() -> None:
        # The 2025 wire tells a subscriber by a notification; the 2026 one on the listen
        # stream, and an in-process client hands that to the message handler too.
        told = {"message_handler": on_message} if mode == "legacy" else {}
        async with connect(env, mode=mode, **told) as client:
            started = await client.call_tool(
                "subagent", {"task": "wait for the gate", "background": True}
            )
            uri = f"subagent://jobs/{(started.structured_content or {})['jobId']}"
            if mode == "legacy":
                await client.subscribe_resource(uri)
                gate.write_text("go")
                await got.wait()
            else:
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    gate.write_text("go")
                    async for event in sub:
                        updated.append(str(getattr(event, "uri", "")))
                        break
            assert updated == [uri]

    run(main)


def test_cancelling_a_foreground_call_kills_the_child_and_aborts_the_job(
    fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A quiet run reports within an MCP client's usual 10 s; here every second, so the
    # test does not sit through the 8 s for its first heartbeat.
    assert mcp_progress.HEARTBEAT_SECONDS < 10
    monkeypatch.setattr(mcp_progress, "HEARTBEAT_SECONDS", 1.0)
    pidfile = tmp_path / "child.pid"
    steps: list[dict[str, Any]] = [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 60}]
    messages: list[str] = []
    heartbeat = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        if (message or "").startswith("still running"):
            heartbeat.set()

    async def main() -> None:
        async with connect(fake_env(fake, steps)) as client:
            scope = anyio.CancelScope()

            async def call() -> None:
                with scope:
                    await client.call_tool(
                        "subagent", {"task": "sleep"}, progress_callback=on_progress
                    )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await heartbeat.wait()  # a quiet run still reports
                while not pidfile.exists():  # (a heartbeat may come before the child is up)
                    await anyio.sleep(0.05)
                scope.cancel()
            pid = int(pidfile.read_text())
            job_id = re.match(r"job (\S+) started", messages[0]).group(1)  # type: ignore[union-attr]
            store = JobStore()
            deadline = time.monotonic() + 30
            while (
                pid_alive(pid) or store.load(job_id).get("status") != "aborted"
            ) and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert not pid_alive(pid), "the child outlived the cancelled call"
            assert store.load(job_id)["status"] == "aborted"
            status = await client.call_tool("subagent_status", {"job_id": job_id})
            assert (status.structured_content or {})["status"] == "aborted"

    run(main)


def test_subagent_cancel_stops_a_foreground_job_of_this_server(fake: Fake, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    steps: list[dict[str, Any]] = [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 60}]
    first: list[str] = []
    results: list[CallToolResult] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first.append(message or "")

    async def main() -> None:
        async with connect(fake_env(fake, steps)) as client:

            async def call() -> None:
                results.append(
                    await client.call_tool(
                        "subagent", {"task": "sleep"}, progress_callback=on_progress
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                while not (pidfile.exists() and first):
                    await anyio.sleep(0.05)
                job_id = first[0].split()[1]
                cancelled = await client.call_tool("subagent_cancel", {"job_id": job_id})
                assert (cancelled.structured_content or {})["status"] == "aborted", text_of(
                    cancelled
                )
            # The foreground call ended with the aborted job, and the server is still there.
            assert (
                results[0].is_error and (results[0].structured_content or {})["status"] == "aborted"
            )
            assert not pid_alive(int(pidfile.read_text()))
            assert not (await client.call_tool("list_agents", {})).is_error

    run(main)


def test_bad_arguments_are_tool_errors_naming_the_problem(fake: Fake) -> None:
    async def main() -> None:
        async with connect(fake_env(fake, pi.answer("x"))) as client:
            cases = [
                ({}, "no task given"),
                ({"task": "a", "tasks": ["b"]}, "only one of 'task', 'tasks' or 'chain'"),
                ({"task": "   "}, "task: the task is empty"),
                ({"task": "a", "agent": "nope"}, "agent: unknown agent 'nope'"),
                (
                    {"chain": ["a", {"task": "b", "agent": "nope"}]},
                    "chain.1.agent: unknown agent 'nope'",
                ),
                ({"task": "a", "cwd": "/nonexistent/dir"}, "does not exist"),
            ]
            for args, expected in cases:
                result = await client.call_tool("subagent", args)
                assert result.is_error, args
                assert expected in text_of(result), (args, text_of(result))
            for tool in ("subagent_status", "subagent_result", "subagent_cancel"):
                result = await client.call_tool(tool, {"job_id": "0zzzzzzz"})
                assert result.is_error and "no job or run with id" in text_of(result), text_of(
                    result
                )

    run(main)


def test_subagent_send_steers_a_background_job_and_budgets_are_checked(fake: Fake) -> None:
    """The parent's message reaches its background job's running child (a fake claude that
    echoes what it takes, as claude does): the receipt, then the run counts it; a message
    to nothing and a bad budget are tool errors naming the problem."""
    gate = fake.dir / "gate"
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    usage = {"input_tokens": 1, "output_tokens": 1}
    steps: list[dict[str, Any]] = [
        {"emit": {"type": "system", "subtype": "init", "session_id": "s1", "model": "m"}},
        {"emit": {"type": "assistant", "message": {"id": "a1", "model": "m", "content": [call], "usage": usage}}},
        {"wait_for": str(gate)},
        {"emit": {"type": "user", "isReplay": True, "message": {"role": "user", "content": "only b.py"}}},
        {"emit": {"type": "result", "subtype": "success", "result": "did b.py", "usage": usage}},
    ]  # fmt: skip
    env = {"SUBAGENTS_CLAUDE_BIN": str(fake.launcher), **fake.env(steps)}

    async def main() -> None:
        async with connect(env) as client:
            bad = await client.call_tool("subagent", {"task": "a", "max_turns": 0})
            assert bad.is_error and "max_turns" in text_of(bad), text_of(bad)
            started = await client.call_tool(
                "subagent",
                {"task": "fix", "backend": "claude", "background": True, "max_turns": 5},
            )
            assert not started.is_error, text_of(started)
            job_id = (started.structured_content or {})["jobId"]
            for _ in range(300):  # refused until its run is going (one line each time)
                sent = await client.call_tool("subagent_send", {"id": job_id, "text": "only b.py"})
                if not sent.is_error:
                    break
                assert "(completed)" not in text_of(sent), text_of(sent)
                await anyio.sleep(0.1)
            assert not sent.is_error, text_of(sent)
            receipt = sent.structured_content or {}
            assert (receipt["receipt"], receipt["mode"], receipt["id"]) == ("queued", "steer", "m1")
            assert text_of(sent).startswith(f"queued: steer m1 to run {receipt['runId']}")
            gate.touch()
            result = await client.call_tool(
                "subagent_result", {"job_id": job_id, "wait_seconds": 30}
            )
            assert not result.is_error and text_of(result).startswith("did b.py"), text_of(result)
            assert result.structured_content is not None
            run = (result.structured_content.get("runs") or [{}])[0]
            assert run.get("messages") == {"sent": 1, "delivered": 1}, run
            again = await client.call_tool("subagent_send", {"id": job_id, "text": "more"})
            assert again.is_error and "has no run going (completed)" in text_of(again), text_of(
                again
            )
            nothing = await client.call_tool("subagent_send", {"id": "0zzzzzzz", "text": "hi"})
            assert nothing.is_error and "0zzzzzzz" in text_of(nothing), text_of(nothing)

    run(main)


def test_isolated_run_then_continue_through_mcp(fake: Fake, tmp_path: Path) -> None:
    """The `isolate` parameter and the `continue` tool: the continued run forks the first
    run's session and goes on in its branch."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "m@e"], ["config", "user.name", "M"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True)
    steps = [{"session": True}, {"write": "b.txt", "text": "{task}\n"}, *pi.answer("ok")]

    async def main() -> None:
        async with connect(fake_env(fake, steps)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "continue" in tools
            first = await client.call_tool(
                "subagent", {"task": "one", "cwd": str(repo), "isolate": "worktree"}
            )
            assert not first.is_error, text_of(first)
            assert first.structured_content is not None
            r1 = first.structured_content["runs"][0]
            assert r1["worktree"]["filesChanged"] == 1
            second = await client.call_tool("continue", {"run_id": r1["runId"], "task": "two"})
            assert not second.is_error, text_of(second)
            assert second.structured_content is not None
            r2 = second.structured_content["runs"][0]
            assert r2["continuedFrom"] == r1["runId"]
            assert r2["worktree"]["branch"] == r1["worktree"]["branch"]
            bad = await client.call_tool("continue", {"run_id": "0000", "task": "x"})
            assert bad.is_error and "no job or run with id" in text_of(bad)
        shown = subprocess.run(
            ["git", "show", f"{r2['worktree']['branch']}:b.txt"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert shown == "two\n"

    run(main)


def test_status_without_a_job_id_totals_this_session(fake: Fake, tmp_path: Path) -> None:
    """Each fake run reports two model turns of 10 in + 5 out tokens and $0.001: two jobs of
    three runs here, one job in another connection's session."""

    async def main() -> None:
        async with connect(fake_env(fake, pi.answer("A."))) as other:
            assert not (await other.call_tool("subagent", {"task": "elsewhere"})).is_error
        async with connect(fake_env(fake, pi.answer("B."))) as client:
            empty = await client.call_tool("subagent_status", {})
            assert not empty.is_error and (empty.structured_content or {})["total"]["jobs"] == 0
            assert not (await client.call_tool("subagent", {"task": "one"})).is_error
            both = await client.call_tool("subagent", {"tasks": ["two", "three"]})
            assert not both.is_error, text_of(both)
            status = await client.call_tool("subagent_status", {})
        assert not status.is_error, text_of(status)
        out = status.structured_content or {}
        total = out["total"]
        assert (total["jobs"], total["input"], total["output"], total["totalTokens"]) == (
            2,
            60,
            30,
            90,
        )
        assert total["cost"] == pytest.approx(0.006)
        assert text_of(status) == (
            f"session {out['session']}: 2 jobs: 90 tokens (60 in, 30 out, cache 0/0), $0.006"
        )
        # The same numbers `subagents cost --session` prints: one aggregation.
        cli = subprocess.run(
            [sys.executable, "-m", "subagents.cli", "cost", "--session", out["session"], "--json"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        )
        exact = json.loads(cli.stdout)["total"]  # for programs: the cost as summed
        assert {**exact, "cost": total["cost"]} == total  # for a model: rounded as people read it
        assert total["cost"] == round(exact["cost"], 6)

    run(main)


def test_tool_timeout_bounds_one_tool_call(fake: Fake) -> None:
    steps: list[dict[str, Any]] = [*pi.start(), *pi.tool_use(), {"hang": True}]

    async def main() -> None:
        async with connect(fake_env(fake, steps)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "tool_timeout" in tools["subagent"].input_schema["properties"]
            result = await client.call_tool("subagent", {"task": "x", "tool_timeout": 0.5})
        assert result.is_error
        assert "tool timeout of 0.5 s" in text_of(result)
        run = (result.structured_content or {})["runs"][0]
        assert run["status"] == "failed"

    run(main)
