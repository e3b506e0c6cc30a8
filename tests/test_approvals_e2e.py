"""Approvals end to end with the real claude and codex CLIs (docs/approvals.md): with
--approvals ask a command waits in the inbox (claude's through our MCP permission server,
codex's app-server approval request), `subagents inbox` shows it, `subagents approve` lets
the command run and `subagents deny` gives the child the refusal; a timeout denies and records why; the stall watchdog does not fire while a person
is asked; rules let a request pass unasked; a child's question is answered; the parent is
bounded by the user's rules. Against the loopback mock model; no network."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.approvals import write_item
from support.checks import eventually
from support.cli import invoke, no_traceback
from support.liverun import Live
from support.mcp_client import connect, run, text_of

import subagents
from subagents.config import Settings
from subagents.core import inbox
from subagents.core.paths import runs_dir
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.errors import UsageError
from subagents.jobs import LiveJobs
from subagents.runs import RunRequest, start

pytestmark = pytest.mark.e2e


def needs(name: str) -> Any:
    return pytest.mark.skipif(shutil.which(name) is None, reason=f"the {name} CLI is not installed")


BOTH = [pytest.param(n, marks=needs(n)) for n in ("claude", "codex")]
claude_only = needs("claude")

COMMAND = "touch made.txt && echo made-it"


def cli_env(tmp_path: Path, backend: str, url: str) -> tuple[dict[str, str], str]:
    """The CLI's environment against the mock, and its model."""
    if backend == "codex":
        return mm.write_codex_config(tmp_path / "codex-config", url), mm.CODEX_MODEL
    env = mm.write_claude_config(tmp_path / "claude-config", url, max_retries=0)
    # The test config allows Bash outright; here claude must ask.
    (tmp_path / "claude-config" / ".claude" / "settings.json").write_text("{}")
    return env, mm.CLAUDE_MODEL


@contextlib.contextmanager
def agent_run(
    tmp_path: Path,
    backend: str = "claude",
    script: Script | None = None,
    task: str = "make the file",
    **options: Any,
) -> Iterator[Live]:
    """A child against the mock (by default one that runs COMMAND), started as a run."""
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    with MockModelServer(script or Script(command=COMMAND)) as srv:
        env, model = cli_env(tmp_path, backend, srv.url)
        req = RunRequest(task=task, backend=backend, cwd=str(work), env=env, model=model, **options)
        handle = start(req, Settings(default_backend=backend))
        try:
            yield Live(handle, srv)
        finally:
            if handle.result() is None:
                handle.stop()


def waiting_item(live: Live) -> dict[str, Any]:
    assert eventually(lambda: subagents.inbox(), timeout=90), live.events()
    (item,) = subagents.inbox()
    return dict(item)


def approvals(live: Live) -> list[dict[str, Any]]:
    return [e for e in live.events() if e["type"] == "approval"]


@pytest.mark.parametrize("backend", BOTH)
def test_ask_waits_in_the_inbox_and_approve_lets_the_command_run(
    tmp_path: Path, backend: str
) -> None:
    with agent_run(tmp_path, backend, approvals="ask") as live:
        item = waiting_item(live)
        assert item["tool"] == "Bash" and item["summary"] == f"Bash: {COMMAND}"
        assert item["runId"] == live.handle.run_id and item["backend"] == backend
        assert not (tmp_path / "work" / "made.txt").exists()  # it waits

        shown = invoke(["inbox"])
        no_traceback(shown)
        assert shown.returncode == 0 and item["id"] in shown.stdout and COMMAND in shown.stdout

        approved = invoke(["approve", item["id"][:12]])
        assert approved.returncode == 0, approved.stderr
        assert f"allowed: item {item['id']}" in approved.stdout
        result = live.result()
        # The same item again: decided already, one line, exit 2.
        again = invoke(["deny", item["id"]])
    assert result["status"] == "completed", result.get("diagnostics")
    assert "made-it" in result["finalText"]
    assert (tmp_path / "work" / "made.txt").exists()
    (record,) = result["approvals"]
    assert record["item"] == item["id"] and record["choice"] == "allow"
    assert record["by"] and record["by"] not in ("timeout", "rule", "policy")
    assert [e["state"] for e in approvals(live)] == ["requested", "decided"]
    transcript = Path(result["paths"]["transcript"]).read_text()
    assert f"waiting for approval (item {item['id']}): Bash: {COMMAND}" in transcript
    assert f"✓ allowed by {record['by']}: Bash: {COMMAND}" in transcript
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert f"item {item['id']} was decided already: allowed by" in again.stderr
    assert subagents.inbox() == []


@pytest.mark.parametrize("backend", BOTH)
def test_deny_gives_the_child_the_refusal(tmp_path: Path, backend: str) -> None:
    with agent_run(tmp_path, backend, approvals="ask") as live:
        item = waiting_item(live)
        denied = invoke(["deny", item["id"], "--reason", "not in this repo"])
        assert denied.returncode == 0, denied.stderr
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    assert not (tmp_path / "work" / "made.txt").exists()
    # The child got the refusal as its tool's result, and answered with it (codex's
    # protocol carries no reason: its child is told it was rejected).
    told = "not in this repo" if backend == "claude" else "rejected by user"
    assert told in result["finalText"]
    (record,) = result["approvals"]
    assert record["choice"] == "deny" and record["reason"] == "not in this repo"
    # A decision for a run that ended: one line, exit 2, nothing changed.
    late = invoke(["approve", item["id"]])
    assert late.returncode == 2 and "decided already: denied by" in late.stderr


@claude_only
def test_a_timeout_denies_and_records_why_and_the_watchdog_waits(tmp_path: Path) -> None:
    # The tool call waits 4 s for a person: its 2 s tool timeout would stop the run, and a
    # 1 s stall watchdog says "stalled" at every silence (claude's start may be one), but
    # neither counts the wait.
    options = {"approvals": "ask", "approval_timeout": 4, "tool_timeout": 2, "stall_timeout": 1}
    with agent_run(tmp_path, **options) as live:
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    (record,) = result["approvals"]
    assert record["choice"] == "deny" and record["by"] == "timeout"
    assert record["reason"] == "no decision within 4 s"
    assert "no decision within 4 s" in result["finalText"]
    events = live.events()
    asked, decided = (i for i, e in enumerate(events) if e["type"] == "approval")
    assert not any(e.get("stalled") for e in events[asked:decided])
    assert events[decided]["ts"] - events[asked]["ts"] >= 4
    assert not (tmp_path / "work" / "made.txt").exists()


@pytest.mark.parametrize("backend", BOTH)
def test_a_rule_lets_a_request_pass_unasked(tmp_path: Path, backend: str) -> None:
    with agent_run(tmp_path, backend, approvals="ask", approve="Read,Bash(touch *)") as live:
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    assert (tmp_path / "work" / "made.txt").exists()
    (record,) = result["approvals"]
    assert record["by"] == "rule" and record["reason"] == "Bash(touch *)"


@claude_only
def test_deny_policy_refuses_what_no_rule_allows(tmp_path: Path) -> None:
    with agent_run(tmp_path, approvals="deny", approve="Bash(git status*)") as live:
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    assert not (tmp_path / "work" / "made.txt").exists()
    (record,) = result["approvals"]
    assert record["choice"] == "deny" and record["by"] == "policy"
    meta = json.loads((live.handle.run_dir / "meta.json").read_text())
    assert meta["approvals"]["rules"] == ["Bash(git status*)"]
    with pytest.raises(UsageError, match="no inbox item"):
        subagents.decide("01zzzzzzzz", "allow")


@claude_only
def test_the_parent_decides_through_mcp(tmp_path: Path) -> None:
    """--approvals parent: a run started through the MCP tool waits for the parent, which
    finds the item with subagent_inbox and allows it with subagent_decide."""
    work = tmp_path / "work"
    work.mkdir()

    async def main(env: dict[str, str]) -> None:
        async with connect(env) as client:
            task = {"task": "make the file", "backend": "claude", "model": mm.CLAUDE_MODEL}
            started = await client.call_tool(
                "subagent", {**task, "cwd": str(work), "approvals": "parent", "background": True}
            )
            assert not started.is_error, text_of(started)
            job_id = (started.structured_content or {})["jobId"]
            listed = None
            for _ in range(300):
                listed = await client.call_tool("subagent_inbox", {})
                if (listed.structured_content or {}).get("items"):
                    break
                await anyio.sleep(0.2)
            assert listed is not None
            (item,) = (listed.structured_content or {})["items"]
            assert f"{item['id']} (run {item['runId']}, claude, decided by you)" in text_of(listed)
            # ps and top (the fleet's rows too) mark the run as waiting.
            ps = invoke(["ps"])
            assert ps.returncode == 0 and job_id in ps.stdout and "waiting" in ps.stdout
            ((_, rows),) = LiveJobs().jobs()
            assert [r.status for r in rows] == ["waiting"]
            decided = await client.call_tool(
                "subagent_decide", {"item": item["id"], "choice": "allow"}
            )
            assert text_of(decided) == f"allowed: item {item['id']}"
            again = await client.call_tool(
                "subagent_decide", {"item": item["id"], "choice": "deny"}
            )
            assert again.is_error and "was decided already: allowed by parent" in text_of(again)
            done = await client.call_tool("subagent_result", {"job_id": job_id, "wait_seconds": 60})
            assert "made-it" in text_of(done), text_of(done)

    with MockModelServer(Script(command=COMMAND)) as srv:
        env = mm.write_claude_config(tmp_path / "claude-config", srv.url, max_retries=0)
        (tmp_path / "claude-config" / ".claude" / "settings.json").write_text("{}")
        run(lambda: main(env))
    assert (work / "made.txt").exists()


QUESTION = {
    "questions": [
        {
            "question": "Which colour should the button be?",
            "header": "Colour",
            "multiSelect": False,
            "options": [
                {"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cool"},
            ],
        }
    ]
}


# codex's question tool asks the same, with an id a question (its answers are keyed so).
CODEX_QUESTION = {"questions": [{**QUESTION["questions"][0], "id": "colour"}]}


def asking_run(tmp_path: Path, backend: str = "claude", **options: Any) -> Any:
    """A child that asks the user a question (claude's AskUserQuestion, codex's
    request_user_input) and answers with the tool's result."""
    if backend == "codex":
        script = Script(tool_name="request_user_input", tool_args=CODEX_QUESTION)
    else:
        script = Script(tool_name="AskUserQuestion", tool_args=QUESTION)
    script.final_text = "Got: {tool_output}"
    return agent_run(tmp_path, backend, script, "pick a colour", **options)


@pytest.mark.parametrize("backend", BOTH)
def test_a_question_waits_in_the_inbox_and_its_answer_is_the_tools_result(
    tmp_path: Path, backend: str
) -> None:
    with asking_run(tmp_path, backend, approvals="ask") as live:
        item = waiting_item(live)
        assert item["kind"] == "question" and item["choices"] == ["answer", "deny"]
        assert item["summary"] == "Which colour should the button be? (Red | Blue)"
        (asked,) = item["questions"]
        assert [o["label"] for o in asked["options"]] == ["Red", "Blue"]

        shown = invoke(["inbox"])
        assert shown.returncode == 0, shown.stderr
        assert "Which colour should the button be?" in shown.stdout
        assert "1. Red — warm" in shown.stdout and "2. Blue — cool" in shown.stdout
        # A question is answered, not approved; an option that is not there: one line, exit 2.
        for argv, says in (
            (["approve", item["id"]], "is a question: answer it"),
            (["answer", item["id"], "--choice", "3"], "no option '3': choose 1 to 2"),
            (["answer", item["id"]], "give the answer as TEXT or as --choice N"),
            (["answer", item["id"], "Red", "Blue"], "give one answer for each"),
        ):
            refused = invoke(argv)  # bad input: in this process, as the command gives it
            no_traceback(refused)
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, argv
            assert says in refused.stderr, (argv, refused.stderr)
        assert [i["id"] for i in subagents.inbox()] == [item["id"]]  # nothing changed

        answered = invoke(["answer", item["id"], "--choice", "2"])
        assert answered.returncode == 0, answered.stderr
        assert f"answered: item {item['id']}" in answered.stdout
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    # The CLI handed the model the answer as the user's: its tool result says it.
    if backend == "claude":
        assert '"Which colour should the button be?"="Blue"' in result["finalText"]
    else:
        assert '"colour":{"answers":["Blue"]}' in result["finalText"]
    (record,) = result["approvals"]
    assert record["kind"] == "question" and record["choice"] == "answer"
    assert record["answers"] == ["Blue"]
    transcript = Path(result["paths"]["transcript"]).read_text()
    assert f"waiting for an answer (item {item['id']}): Which colour" in transcript
    assert "✓ answered by" in transcript and "→ Blue" in transcript


@claude_only
def test_a_question_denied_or_under_the_deny_policy_is_not_answered(tmp_path: Path) -> None:
    with asking_run(tmp_path / "ask", approvals="ask") as live:
        item = waiting_item(live)
        denied = invoke(["deny", item["id"], "--reason", "decide it yourself"])
        assert denied.returncode == 0, denied.stderr
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    assert "decide it yourself" in result["finalText"]
    assert result["approvals"][0]["choice"] == "deny"
    # Under deny no one is asked: the child is told at once, and no rule passes a question.
    with asking_run(tmp_path / "deny", approvals="deny", approve="AskUserQuestion") as live:
        result = live.result()
    assert result["status"] == "completed", result.get("diagnostics")
    (record,) = result["approvals"]
    assert record["by"] == "policy" and "answers no questions" in result["finalText"]


def test_the_parent_through_mcp_is_bounded_by_the_users_rules(
    tmp_path: Path, isolated_state: Path
) -> None:
    """Two items of a parent's run (written as its supervisor writes them): the one outside
    the user's parent_may_approve waits for a person, and subagent_decide refuses to allow
    it; the one inside it the parent allows."""
    run_dir = runs_dir(isolated_state) / "01m8aaaaaa-aaaaaaaa"
    run_dir.mkdir(parents=True)
    for item_id, command, policy in (
        ("01m8bbbbbb-bbbbbbbb", "git push", "parent"),
        ("01m8cccccc-cccccccc", "rm -rf build", "ask"),
    ):
        write_item(
            run_dir,
            item_id,
            summary=f"Bash: {command}",
            input={"command": command},
            policy=policy,
            expiresAt=1e12,
            parentMay=["Bash(git *)"],
            cwd=str(tmp_path),
        )

    async def main() -> None:
        async with connect({}) as client:
            listed = text_of(await client.call_tool("subagent_inbox", {}))
            assert "01m8bbbbbb-bbbbbbbb (run 01m8aaaaaa-aaaaaaaa, claude, decided by you)" in listed
            assert "decided by a person (outside what you may allow)): Bash: rm" in listed
            refused = await client.call_tool(
                "subagent_decide", {"item": "01m8cccccc-cccccccc", "choice": "allow"}
            )
            assert refused.is_error and "outside what the parent may allow" in text_of(refused)
            allowed = await client.call_tool(
                "subagent_decide", {"item": "01m8bbbbbb-bbbbbbbb", "choice": "allow"}
            )
            assert text_of(allowed) == "allowed: item 01m8bbbbbb-bbbbbbbb", text_of(allowed)

    run(main)
    assert inbox.read_decision(run_dir, "01m8cccccc-cccccccc") is None
    decided = inbox.read_decision(run_dir, "01m8bbbbbb-bbbbbbbb")
    assert decided is not None and decided["by"] == "parent"
