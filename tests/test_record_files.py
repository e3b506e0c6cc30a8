"""Issue 27, records: written strict (no NaN or Infinity in any JSON), read tolerantly (a
damaged record is one line naming its file, for every reader, and `rm` removes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.cli import invoke, no_traceback
from support.fake import Fake, fake_env

pytestmark = pytest.mark.process


def _refuse(constant: str) -> Any:
    raise AssertionError(f"{constant} is not JSON")


def strict(text: str) -> Any:
    """JSON as JSON.parse reads it: NaN and Infinity are refused."""
    return json.loads(text, parse_constant=_refuse)


def strict_lines(path: Path) -> list[Any]:
    return [strict(line) for line in path.read_text().splitlines() if line.strip()]


# ---- item 8: Infinity and NaN ------------------------------------------------------------


def huge_cost_answer(text: str) -> list[dict[str, Any]]:
    """A child that reports a large, valid cost twice: its sum is past what a float holds."""
    usage = pi.usage(cost=1e308)
    turn = {"emit": {"type": "message_end", "message": pi.assistant([], "toolUse", usage=usage)}}
    end = pi.text_end(text)
    end["emit"]["message"]["usage"] = usage
    return [*pi.start(), turn, end, *pi.end()]


def test_a_cost_sum_past_a_float_is_unpriced_and_every_record_stays_json(
    fake: Fake, isolated_state: Path
) -> None:
    env = fake_env(fake, huge_cost_answer("Expensive."))
    one = invoke(["run", "--json", "x"], env)
    assert one.returncode == 0, one.stderr
    assert strict(one.stdout)["usage"]["cost"] is None
    both = invoke(["run", "--json", "--parallel", "a", "b"], env)
    assert both.returncode == 0, both.stderr
    job = strict(both.stdout)
    assert job["usage"]["cost"] is None and job["runs"][0]["usage"]["cost"] is None
    cost = invoke(["cost", "--json"], env)
    assert cost.returncode == 0, cost.stderr
    report = strict(cost.stdout)
    assert report["total"]["cost"] is None
    for log in (isolated_state / "sessions").glob("*.jsonl"):
        for entry in strict_lines(log):
            assert (entry.get("usage") or {}).get("cost") is None
    for run in (isolated_state / "runs").iterdir():
        strict_lines(run / "events.jsonl")
        strict((run / "result.json").read_text())
    for args in (["ps", "--json"], ["history", "--json"]):
        p = invoke(args, env)
        assert p.returncode == 0, (args, p.stderr)
        for line in p.stdout.splitlines():
            strict(line)
    top = invoke(["top", "--json"], env)
    assert top.returncode == 0, top.stderr
    assert all(job["cost"] is None for job in strict(top.stdout)["jobs"])


def test_progress_records_carry_usage_not_the_events_stamps(fake: Fake) -> None:
    p = invoke(["run", "--progress", "jsonl", "x"], fake_env(fake, pi.answer("ok")))
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in p.stderr.splitlines() if line.startswith("{")]
    usages = [r["usage"] for r in records if r.get("type") == "progress" and r.get("usage")]
    assert usages, p.stderr
    for usage in usages:
        assert set(usage) == {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}


# ---- item 7: a damaged job.json ----------------------------------------------------------


@pytest.fixture
def damaged(fake: Fake, isolated_state: Path) -> dict[str, str]:
    """Three jobs: one whole, one whose status is an object, one truncated."""
    env = fake_env(fake, pi.answer("ok"))
    made = {}
    for name in ("whole", "object", "truncated"):
        p = invoke(["run", "--json", name], env)
        assert p.returncode == 0, p.stderr
        made[name] = json.loads(p.stdout)["jobId"]
    jobs = isolated_state / "jobs"
    state = json.loads((jobs / made["object"] / "job.json").read_text())
    state["status"] = {"not": "a status"}
    (jobs / made["object"] / "job.json").write_text(json.dumps(state))
    text = (jobs / made["truncated"] / "job.json").read_text()
    (jobs / made["truncated"] / "job.json").write_text(text[: len(text) // 2])
    (isolated_state / "index.sqlite").unlink()  # the index is rebuilt from the files
    return made


def test_every_reader_names_a_damaged_job_file_in_one_line(
    damaged: dict[str, str], isolated_state: Path
) -> None:
    for name in ("object", "truncated"):
        job_id = damaged[name]
        path = isolated_state / "jobs" / job_id / "job.json"
        for args in (["show", job_id], ["wait", job_id], ["stop", job_id], ["logs", job_id]):
            p = invoke(args)
            no_traceback(p)
            assert p.returncode == 1, (args, p.stdout, p.stderr)
            (line,) = p.stderr.strip().splitlines()
            assert line.startswith(f"subagents: {path} is damaged ("), line
            assert line.endswith(f"remove the job with: subagents rm {job_id}"), line
    for args in (["ps"], ["ps", "--json"], ["top"], ["top", "--json"]):
        p = invoke(args)
        no_traceback(p)
        assert p.returncode == 0, (args, p.stderr)
        assert damaged["whole"] in p.stdout
        for name in ("object", "truncated"):
            path = isolated_state / "jobs" / damaged[name] / "job.json"
            assert f"{path} is damaged" in p.stderr, (args, p.stderr)


def test_rm_removes_a_damaged_job_with_its_runs(
    damaged: dict[str, str], isolated_state: Path
) -> None:
    runs_before = len(list((isolated_state / "runs").iterdir()))
    p = invoke(["rm", damaged["object"], damaged["truncated"]])
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "removed 2 jobs (2 run(s))"
    assert sorted(x.name for x in (isolated_state / "jobs").iterdir()) == [damaged["whole"]]
    assert len(list((isolated_state / "runs").iterdir())) == runs_before - 2
    ps = invoke(["ps"])
    assert ps.returncode == 0 and ps.stderr == ""
