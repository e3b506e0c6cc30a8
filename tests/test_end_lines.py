"""Issue 39, item 7: every progress or end line a person sees is one a terminal holds. A 20 kB
answer is quoted by its first line, cut (as activity lines are), never as one 20 kB line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake

from subagents.lifecycle.notices import describe_end
from subagents.lifecycle.sessionlog import entry_for_job
from subagents.present import outcome

ANSWER = "word " * 4000  # 20 kB, one line


def run_cli(fake: Fake, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "SUBAGENTS_PI_BIN": str(fake.launcher),
        **fake.env([*pi.start(), pi.text_end(answer), *pi.end()]),
    }
    return invoke(["run", "--backend", "pi", *args], env, cwd=fake.dir)


@pytest.mark.process
def test_a_20_kb_answer_is_quoted_by_its_first_line_cut(fake: Fake) -> None:
    done = run_cli(fake, ANSWER, "do it")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER.strip()  # the answer itself is whole on stdout
    lines = done.stderr.splitlines()
    assert all(len(line) <= outcome.END_LINE_LIMIT for line in lines), max(map(len, lines))
    end = [line for line in lines if line.startswith("✓ job ")]
    assert len(end) == 1
    quoted = end[0].split(" · ")[-1]
    assert quoted.startswith('"word word') and quoted.endswith('…"')
    assert len(quoted) <= outcome.QUOTE_LIMIT + 2


def test_a_parallel_job_s_end_line_is_bounded_however_many_runs_failed(tmp_path: Path) -> None:
    runs = [
        {"status": "failed", "agent": f"agent{i}", "errorMessage": "x" * 5000} for i in range(50)
    ]
    job = {"jobId": "j1", "mode": "parallel", "status": "failed", "runs": runs}
    line = outcome.job_line(job)  # type: ignore[arg-type]
    assert "\n" not in line and len(line) <= outcome.END_LINE_LIMIT
    assert line.startswith("✗ job j1 failed · parallel") and line.endswith("…")


def test_a_notice_of_a_job_with_a_20_kb_answer_is_one_bounded_line() -> None:
    run = {"status": "completed", "agent": "pi", "finalText": ANSWER + "\nsecond line"}
    job = {"jobId": "j2", "mode": "single", "status": "completed", "runs": [run]}
    entry = entry_for_job(job)  # type: ignore[arg-type]
    for line in (describe_end(entry, job), describe_end(entry)):  # type: ignore[arg-type]
        assert "\n" not in line and len(line) <= outcome.END_LINE_LIMIT, len(line)
        assert "second line" not in line
