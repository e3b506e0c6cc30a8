"""Maps on real repositories and real CLIs: one worktree branch per row that `apply`
merges, and rows run by the real pi against the loopback mock model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import invoke
from support.git import git, git_repo
from support.maps import jsonl

from subagents.demo.mockmodel import MockModelServer, Script, write_pi_config

pytestmark = pytest.mark.process


def test_a_worktree_map_gives_one_branch_per_row_that_apply_merges(
    tmp_path: Path, child: dict[str, str]
) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "words\n"})
    data = tmp_path / "words.txt"
    data.write_text("alpha\nbeta\ngamma\n")
    out = tmp_path / "r.jsonl"
    p = invoke(
        [
            "map",
            str(data),
            "--task",
            "write {line}",
            "--isolate",
            "worktree",
            "-j",
            "3",
            "--cwd",
            str(repo),
            "--out",
            str(out),
        ],
        {**child, "MAP_WRITE": "1"},
    )
    assert p.returncode == 0, p.stderr
    rows = jsonl(out)
    assert all(r["status"] == "completed" for r in rows)
    branches = {r["line"]: r["branch"] for r in rows}
    assert branches == {r["line"]: f"subagents/{r['runId']}" for r in rows}
    assert git(repo, "status", "--porcelain") == ""  # the user's tree untouched
    for r in rows:
        applied = invoke(["apply", r["runId"], "--cwd", str(repo)], child)
        assert applied.returncode == 0, applied.stderr
    assert sorted(p.name for p in repo.glob("*.txt")) == ["alpha.txt", "beta.txt", "gamma.txt"]
    assert (repo / "beta.txt").read_text() == "beta\n"


@pytest.mark.skipif(shutil.which("pi") is None, reason="the pi CLI is not installed")
def test_a_map_of_real_pi_children_against_the_mock_model(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": "r1", "what": "files"}\n{"id": "r2", "what": "names"}\n')
    out = tmp_path / "r.csv"
    with MockModelServer(Script(final_text="Listed: {tool_output}.")) as server:
        env = write_pi_config(tmp_path / "pi-agent", server.url)
        p = invoke(
            [
                "map",
                str(data),
                "--task",
                "List the {what} here.",
                "--key",
                "id",
                "--backend",
                "pi",
                "--model",
                "mock/mock-model",
                "--cwd",
                str(work),
                "--out",
                str(out),
                "--json",
                "--progress",
                "jsonl",
            ],
            env,
        )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["map"]["completed"] == 2
    lines = out.read_text().splitlines()
    assert lines[0] == "id,what,key,status,answer,error,cost,durationMs,runId,branch"
    assert all(",completed,Listed: a.txt.," in line for line in lines[1:])
    records = [json.loads(line) for line in p.stderr.splitlines()]
    # The map counted at its start (and again as rows start), each row's end, its answer.
    assert (records[0]["type"], records[0]["done"]) == ("map", 0)
    assert [r["type"] for r in records if r["type"] != "map"] == ["row", "row", "answer"]
    counted = [r for r in records if r["type"] == "map"]
    assert counted[-1]["done"] == counted[-1]["total"] == 2


def test_the_mcp_map_tool_runs_a_map_and_says_its_failures(
    tmp_path: Path, child: dict[str, str]
) -> None:
    from support.mcp_client import connect, run, text_of

    data = tmp_path / "items.txt"
    data.write_text("one\nFAIL two\nthree\n")
    out = tmp_path / "r.jsonl"

    async def main() -> None:
        async with connect(child) as client:
            done = await client.call_tool(
                "subagent_map",
                {"input": str(data), "task": "do {line}", "out": str(out), "background": False},
            )
            assert done.is_error  # a row failed
            assert "2/3 rows completed; 1 row: pi exited with code 3" in text_of(done)
            assert done.structured_content["map"]["failures"][0]["rows"] == 1
            started = await client.call_tool(
                "subagent_map",
                {"resume": done.structured_content["jobId"], "background": True},
            )
            assert not started.is_error, text_of(started)
            bad = await client.call_tool("subagent_map", {"input": str(data), "task": "x {nope}"})
            assert bad.is_error and "the input has no field 'nope'" in text_of(bad)
            job_id = started.structured_content["jobId"]
            waited = await client.call_tool(
                "subagent_result", {"job_id": job_id, "wait_seconds": 30}
            )
            assert "map" in text_of(waited)

    run(main)
    assert sorted(r["line"] for r in jsonl(out)) == ["FAIL two", "one", "three"]
