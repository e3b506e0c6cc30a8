"""MCP tasks (the io.modelcontextprotocol/tasks extension) through the SDK's client with a
tasks extension: a delegation becomes a task handle at once, is polled to its end and
answers what the synchronous call answers; a cancelled task stops its job; a client that
does not declare tasks keeps the tools' own answers."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support import pistream as pi
from support.checks import pid_alive
from support.fake import Fake, fake_env
from support.mcp_client import connect, run, text_of
from support.mcp_tasks import TasksClient, cancel_task, get_task, until_ended

pytestmark = pytest.mark.process


def test_a_delegation_is_a_task_polled_to_the_calls_own_answer(fake: Fake) -> None:
    tasks = TasksClient()

    async def main() -> None:
        env = fake_env(fake, pi.answer("The answer."))
        async with connect(env, extensions=[tasks]) as client:
            result = await client.call_tool("subagent", {"task": "do the thing"})
        assert not result.is_error, text_of(result)
        job = result.structured_content
        assert job is not None and job["status"] == "completed" and job["answer"] == "The answer."
        # The call was answered with a handle (the job's id), then polled to the end.
        [created] = tasks.created
        assert created.task_id == job["jobId"] and created.status == "working"
        assert created.poll_interval_ms == 1000 and created.created_at.endswith("Z")
        assert tasks.statuses[-1] == "completed"
        assert text_of(result).split("\n\n")[0] == "The answer."

    run(main)


def test_a_failed_job_is_a_completed_task_whose_result_is_an_error(fake: Fake) -> None:
    tasks = TasksClient()

    async def main() -> None:
        steps = [*pi.start(), pi.text_end("", stop="error", errorMessage="500 model exploded")]
        env = fake_env(fake, [*steps, *pi.end()])
        async with connect(env, extensions=[tasks]) as client:
            result = await client.call_tool("subagent", {"task": "fail"})
        assert result.is_error and "model exploded" in text_of(result)
        assert tasks.statuses[-1] == "completed"  # a tool error is a result, not a task failure

    run(main)


def test_cancelling_a_task_stops_its_job(fake: Fake, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    steps = [*pi.start(), {"pidfile": str(pidfile)}, {"sleep": 60}]

    async def main() -> None:
        async with connect(fake_env(fake, steps), extensions=[TasksClient()]) as client:
            created = await client.session.call_tool(
                "subagent", {"task": "sleep"}, allow_claimed=True
            )
            task_id = getattr(created, "task_id", None)
            assert task_id is not None, created  # a handle, not the job's answer
            with anyio.fail_after(30):
                while not pidfile.exists():
                    await anyio.sleep(0.05)
            assert (await get_task(client.session, task_id))["status"] == "working"
            ack = await cancel_task(client.session, task_id)
            assert {k: v for k, v in ack.items() if k != "_meta"} == {"resultType": "complete"}
            seen: list[str] = []
            task = await until_ended(client.session, task_id, seen)
        assert task["status"] == "cancelled", task
        assert not pid_alive(int(pidfile.read_text()))

    run(main)


def test_an_unknown_task_and_a_prefix_are_refused(fake: Fake) -> None:
    from mcp.shared.exceptions import MCPError

    async def main() -> None:
        env = fake_env(fake, pi.answer("ok"))
        async with connect(env, extensions=[TasksClient()]) as client:
            result = await client.call_tool("subagent", {"task": "t"})
            job_id = (result.structured_content or {})["jobId"]
            for bad in ("nope", job_id[:6]):
                with pytest.raises(MCPError, match="no task"):
                    await get_task(client.session, bad)

    run(main)


def test_a_client_without_tasks_gets_the_answer_itself(fake: Fake) -> None:
    async def main() -> None:
        async with connect(fake_env(fake, pi.answer("Direct."))) as client:
            result = await client.call_tool("subagent", {"task": "do it"})
        assert (result.structured_content or {})["answer"] == "Direct."

    run(main)


def test_a_map_is_a_task_whose_result_is_the_maps(tmp_path: Path, child: dict[str, str]) -> None:
    """subagent_map as a task (the `child` fixture: a fake pi that fails rows saying FAIL);
    a bad template is the tool's own error, no task made."""
    tasks = TasksClient()
    data = tmp_path / "items.txt"
    data.write_text("one\nFAIL two\n")

    async def main() -> None:
        async with connect(child, extensions=[tasks]) as client:
            done = await client.call_tool("subagent_map", {"input": str(data), "task": "do {line}"})
            bad = await client.call_tool("subagent_map", {"input": str(data), "task": "x {nope}"})
        assert done.is_error and "1/2 rows completed" in text_of(done), text_of(done)
        assert (done.structured_content or {})["map"]["total"] == 2
        assert [c.task_id for c in tasks.created] == [(done.structured_content or {})["jobId"]]
        assert bad.is_error and "the input has no field 'nope'" in text_of(bad)

    run(main)
