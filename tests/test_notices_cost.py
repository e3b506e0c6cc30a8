"""``subagents notices`` (the Claude Code hook's logic: each background job's end told once)
and ``subagents cost`` (totals from the session logs), through the command line: as
processes where that is the point (racing hooks, the monitor, runs), else in this process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.fake import Fake
from support.sessionlog import (
    CLAUDE_ID,
    SUBAGENTS,
    claude_monitor,
    end_entry,
    hook,
    job_result,
    sub,
)

from subagents.jobs import JobStore
from subagents.lifecycle import cost as costs
from subagents.lifecycle import notices, sessionlog
from subagents.present.figures import money


def ended(
    store: JobStore, log: Path, job_id: str, answer: str, cost: float | None = 0.0125
) -> None:
    """A job's end as its driver records it: the job result, and its end entry."""
    store.finish(job_id, job_result(job_id, answer, cost))
    sessionlog.append(log, end_entry(job_id, answer, cost))


@pytest.mark.process
def test_the_hook_tells_each_background_end_once_and_skips_foreground_jobs(
    isolated_state: Path,
) -> None:
    store = JobStore(isolated_state)
    plan = {"mode": "single", "session": f"claude-{CLAUDE_ID}"}
    bg = store.create(plan, agents=["scout"], background=True)
    fg = store.create(plan, agents=["scout"], background=False)
    log = sessionlog.session_path(isolated_state, f"claude-{CLAUDE_ID}")

    assert hook(isolated_state, here=True).stdout == ""  # nothing ended yet: no output at all
    ended(store, log, fg, "foreground answer")
    ended(store, log, bg, "Found 3 retries.\nDetails follow")
    first = hook(isolated_state, here=True)
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    context = out["additionalContext"]
    # Worded as the command line ends a job; the cost as people read it.
    assert f'✓ job {bg} · scout · 3.4s · 30 tokens · $0.013 · "Found 3 retries."' in context
    # ...with the whole answer (one line: a JSON string), so the model need not fetch it.
    assert 'answer: "Found 3 retries.\\nDetails follow"' in context, context
    assert fg not in context and "foreground answer" not in context
    assert hook(isolated_state, here=True).stdout == ""  # told once

    later = store.create(plan, agents=["scout"], background=True)
    ended(store, log, later, "second", cost=None)
    context = json.loads(hook(isolated_state, here=True).stdout)["hookSpecificOutput"][
        "additionalContext"
    ]
    assert f'✓ job {later} · scout · 3.4s · 30 tokens · "second"' in context
    assert bg not in context


@pytest.mark.process
def test_an_end_whose_job_is_gone_is_told_from_its_entry(isolated_state: Path) -> None:
    log = sessionlog.session_path(isolated_state, f"claude-{CLAUDE_ID}")
    sessionlog.append(
        log, end_entry("01m84t0m9p-8m6spb63", "the answer", cost=0.000039999999999999996)
    )
    context = json.loads(hook(isolated_state, here=True).stdout)["hookSpecificOutput"][
        "additionalContext"
    ]
    assert (
        '✓ job 01m84t0m9p-8m6spb63 · scout · 3.4s · 30 tokens · $0.00004 · "the answer"' in context
    )


@pytest.mark.process
def test_racing_hooks_tell_an_end_exactly_once(isolated_state: Path) -> None:
    log = sessionlog.session_path(isolated_state, f"claude-{CLAUDE_ID}")
    sessionlog.append(log, end_entry("01m84t0m9p-8m6spb63", "the answer"))
    payload = json.dumps({"session_id": CLAUDE_ID})
    procs = [
        subprocess.Popen(
            [SUBAGENTS, "notices", "--claude-hook"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outputs = [p.communicate(payload, timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6
    told = [o for o in outputs if o.strip()]
    assert len(told) == 1 and "01m84t0m9p-8m6spb63" in told[0], outputs


@pytest.mark.process
def test_a_job_stopped_in_the_session_is_not_news(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    session = f"claude-{CLAUDE_ID}"
    stopped = store.create({"mode": "single", "session": session}, agents=["pi"], background=True)
    notices.mark_told(isolated_state, session, stopped, notices.CLAUDE_READER)
    log = sessionlog.session_path(isolated_state, session)
    ended(store, log, stopped, "cut short")
    assert hook(isolated_state, here=True).stdout == ""


@pytest.mark.process
def test_the_jobs_command_is_done_by_the_hook_without_a_model_turn(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    session = f"claude-{CLAUDE_ID}"
    plan = {
        "mode": "single",
        "session": session,
        "requests": [{"task": "look  around\nthe repo", "backend": "pi"}],
    }
    job = store.create(plan, agents=["pi"], background=False)
    store.finish(job, job_result(job, "Looked.", cost=0.000039999999999999996))
    other = store.create(
        {**plan, "session": "claude-someone-else"}, agents=["pi"], background=False
    )

    said = json.loads(hook(isolated_state, "/subagents:jobs", here=True).stdout)
    # Shown to the user as the reason the prompt is blocked: it goes no further.
    assert said["decision"] == "block" and said["hookSpecificOutput"]["suppressOriginalPrompt"]
    listed = said["reason"]
    assert listed.startswith("Subagents jobs of this session:\n")
    (row,) = [line for line in listed.splitlines() if job in line]
    assert "completed" in row and "pi" in row and "look around the repo" in row, listed
    assert "$0.00004" in row and " 30 " in row, row
    assert other not in listed

    shown = json.loads(hook(isolated_state, f"/subagents:jobs show {job[:12]}", here=True).stdout)
    assert shown["reason"].startswith(f"job {job} · single · completed"), shown
    assert "$0.00004" in shown["reason"] and "Looked." in shown["reason"]
    cost = json.loads(hook(isolated_state, "/subagents:jobs cost", here=True).stdout)["reason"]
    assert cost.startswith("Subagents cost of this session: "), cost
    stop = json.loads(hook(isolated_state, f"/subagents:jobs stop {job}", here=True).stdout)[
        "reason"
    ]
    assert stop.startswith(f"Job {job} had already ended: ✓ job {job} · scout · "), stop
    wrong = json.loads(hook(isolated_state, "/subagents:jobs frobnicate", here=True).stdout)[
        "reason"
    ]
    assert wrong.startswith("usage: /subagents:jobs [show JOB | stop JOB | cost | inbox")
    for prompt in ("/subagents:jobsx", "list my /subagents:jobs"):  # not the command
        assert hook(isolated_state, prompt, here=True).stdout == "", prompt


@pytest.mark.process
def test_session_start_says_why_the_server_cannot_serve(tmp_path: Path) -> None:
    payload = json.dumps({"session_id": CLAUDE_ID, "hook_event_name": "SessionStart"})
    fine = sub("claude-code", "session-start", stdin=payload, here=True)
    assert fine.returncode == 0 and fine.stdout == "", fine  # all is well: nothing said
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text('timeout = "never\n')
    bad = sub(
        "claude-code",
        "session-start",
        stdin=payload,
        env={"SUBAGENTS_CONFIG_DIR": str(config)},
        here=True,
    )
    assert bad.returncode == 0, bad.stderr
    out = json.loads(bad.stdout)
    assert out["systemMessage"].startswith("subagents plugin: its MCP server cannot serve: ")
    assert "config.toml: invalid TOML" in out["systemMessage"]
    assert "not available" in out["hookSpecificOutput"]["additionalContext"]


def test_session_start_makes_the_server_once_per_installation(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making the server costs ~1.5 s of CPU (the MCP SDK's types) at every Claude session's
    start: a check that passed is trusted until what it depends on changes."""
    import subagents.mcp
    from subagents.cli.claudecode import SERVER_CHECKED

    payload = json.dumps({"session_id": CLAUDE_ID, "hook_event_name": "SessionStart"})
    made = subagents.mcp.SubagentsMCP

    def broken(**_: object) -> None:
        raise RuntimeError("the SDK is broken")

    def said() -> str:
        done = sub("claude-code", "session-start", stdin=payload, here=True)
        assert done.returncode == 0, done.stderr
        return done.stdout and json.loads(done.stdout)["systemMessage"]

    stamp = isolated_state / SERVER_CHECKED
    monkeypatch.setattr(subagents.mcp, "SubagentsMCP", broken)
    assert said().endswith("cannot serve: the SDK is broken")
    assert not stamp.exists()  # a failed check is made again next time
    monkeypatch.setattr(subagents.mcp, "SubagentsMCP", made)
    assert said() == "" and stamp.exists()
    monkeypatch.setattr(subagents.mcp, "SubagentsMCP", broken)
    assert said() == ""  # trusted: not made again
    stamp.write_text('["another interpreter"]')  # what it depends on changed
    assert said().endswith("cannot serve: the SDK is broken")


@pytest.mark.process
def test_the_stop_hook_shows_each_foreground_call_s_outcome_once(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    session = f"claude-{CLAUDE_ID}"
    log = sessionlog.session_path(isolated_state, session)
    plan = {"mode": "single", "session": session}
    fg = store.create(plan, agents=["scout"], background=False)
    bg = store.create(plan, agents=["scout"], background=True)
    ended(store, log, fg, "foreground")
    ended(store, log, bg, "background")  # its notice says it: not this hook
    payload = json.dumps({"session_id": CLAUDE_ID, "hook_event_name": "Stop"})

    said = json.loads(sub("claude-code", "stop-hook", stdin=payload, here=True).stdout)
    assert said == {
        "systemMessage": f"subagents: ✓ completed · scout · 3.4s · 30 tokens · $0.013 · job {fg}"
    }
    assert sub("claude-code", "stop-hook", stdin=payload, here=True).stdout == ""  # shown once
    assert json.loads(
        hook(isolated_state, here=True).stdout
    )  # the notices' own record is untouched


@pytest.mark.process
def test_the_monitor_prints_each_background_end_once_until_claude_is_gone(
    isolated_state: Path,
) -> None:
    store = JobStore(isolated_state)
    session = f"claude-{CLAUDE_ID}"
    log = sessionlog.session_path(isolated_state, session)
    plan = {"mode": "single", "session": session}
    early = store.create(plan, agents=["scout"], background=True)
    ended(store, log, early, "before the monitor started")
    claude = subprocess.Popen(["sleep", "300"])  # stands in for Claude Code ($CLAUDE_PID)
    monitor = claude_monitor(claude.pid)
    try:
        assert monitor.stdout is not None
        first = monitor.stdout.readline()  # an end not told yet is told at start
        assert first.startswith(f"✓ job {early} · scout · ") and "before the monitor" in first
        fg = store.create(plan, agents=["scout"], background=False)
        bg = store.create(plan, agents=["scout"], background=True)
        ended(store, log, fg, "foreground")
        ended(store, log, bg, "Found it.")
        line = monitor.stdout.readline()  # the foreground job is skipped
        end = f'✓ job {bg} · scout · 3.4s · 30 tokens · $0.013 · "Found it."'
        assert line == f'{end} · answer: "Found it."\n', line
        assert (
            hook(isolated_state, here=True).stdout == ""
        )  # told by the monitor: not again by the hook
    finally:
        claude.kill()
        claude.wait()
    assert monitor.wait(timeout=30) == 0  # Claude Code is gone: so is the monitor
    assert monitor.stdout.read() == ""


@pytest.mark.process
def test_a_monitor_turned_off_says_what_is_lost(isolated_state: Path) -> None:
    store = JobStore(isolated_state)
    session = f"claude-{CLAUDE_ID}"
    job = store.create({"mode": "single", "session": session}, agents=["scout"], background=True)
    ended(store, sessionlog.session_path(isolated_state, session), job, "done")
    claude = subprocess.Popen(["sleep", "300"])  # stands in for Claude Code ($CLAUDE_PID)
    try:
        monitor = claude_monitor(claude.pid)
        # Up and following the log once it told an end: then Claude Code's "x to stop".
        assert monitor.stdout is not None
        assert monitor.stdout.readline().startswith(f"✓ job {job} · scout · ")
        monitor.terminate()
        out, _ = monitor.communicate(timeout=30)
    finally:
        claude.kill()
        claude.wait()
    assert monitor.returncode == 0
    assert out.startswith("subagents: job-end notices are off for this session: "), out
    assert "told with the next prompt" in out


@pytest.mark.process
def test_a_bad_hook_input_never_blocks_the_prompt() -> None:
    for stdin in ("not json", "{}", json.dumps({"session_id": "../etc"})):
        proc = sub("notices", "--claude-hook", stdin=stdin, here=True)
        assert proc.returncode == 1, (stdin, proc)  # 2 would make Claude Code block the prompt
        assert proc.stdout == "" and proc.stderr.startswith("subagents claude-code: ")


@pytest.mark.process
def test_cost_totals_match_the_runs(fake: Fake, isolated_state: Path) -> None:
    env = {"SUBAGENTS_PI_BIN": str(fake.launcher)}
    job_ids = []
    for session, answer in (("alpha", "one"), ("alpha", "two"), ("beta", "three")):
        proc = sub(
            "run",
            "--json",
            "--session",
            session,
            "x",
            env={**env, **fake.env(pi.answer(answer))},
            here=True,
        )
        assert proc.returncode == 0, proc.stderr
        job_ids.append(json.loads(proc.stdout)["jobId"])
    runs = [JobStore(isolated_state).load(j)["runs"][0] for j in job_ids]
    usage = [r["usage"] for r in runs]
    assert all(u["cost"] > 0 and u["totalTokens"] > 0 for u in usage)

    def report(*args: str) -> dict[str, Any]:
        proc = sub("cost", "--json", *args, here=True)
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(proc.stdout)
        return out

    every = report()["total"]
    assert every["jobs"] == 3 and every["unpriced"] == 0
    assert every["totalTokens"] == sum(u["totalTokens"] for u in usage)
    assert every["input"] == sum(u["input"] for u in usage)
    assert abs(every["cost"] - sum(u["cost"] for u in usage)) < 1e-9

    alpha = report("--session", "alpha")["total"]
    assert alpha["jobs"] == 2
    assert alpha["totalTokens"] == usage[0]["totalTokens"] + usage[1]["totalTokens"]

    (by_backend,) = report("--by", "backend")["rows"]
    assert by_backend["key"] == "pi" and by_backend["runs"] == 3
    assert by_backend["totalTokens"] == every["totalTokens"]
    (by_day,) = report("--by", "day")["rows"]
    assert by_day["jobs"] == 3
    assert report("--since", "2000-01-01")["total"]["jobs"] == 3
    assert report("--since", "2999-01-01")["total"]["jobs"] == 0

    table = sub("cost", "--by", "model", here=True).stdout
    assert "MODEL" in table and "total" in table and money(every["cost"]) in table

    bad = sub("cost", "--since", "yesterday-ish", here=True)
    assert bad.returncode == 2 and bad.stderr.startswith("subagents: invalid time")


def test_totals_by_run_keep_unpriced_runs_apart() -> None:
    entries = [
        {**end_entry("j1", "a", cost=0.5), "usage": {"totalTokens": 30, "cost": 0.5}},
        {**end_entry("j2", "b", cost=None), "usage": {"totalTokens": 7, "cost": None}},
        {**end_entry("gone", "c", cost=0.25), "agentName": "reviewer", "model": "m2"},
    ]
    runs = {
        "j1": [
            {"agent": "scout", "usage": {"totalTokens": 10, "cost": 0.2}},
            {"agent": "worker", "usage": {"totalTokens": 20, "cost": 0.3}},
        ],
        "j2": [{"agent": "scout", "usage": {"totalTokens": 7, "cost": None}}],
    }
    report = costs.totals(entries, by="agent", runs_of=runs.get)
    rows = {r["key"]: r for r in report["rows"]}
    assert rows["scout"]["jobs"] == 2 and rows["scout"]["runs"] == 2
    assert rows["scout"]["cost"] == 0.2 and rows["scout"]["unpriced"] == 1
    assert rows["worker"]["cost"] == 0.3
    assert rows["reviewer"]["runs"] == 1  # its job directory is gone: the entry stands in
    assert report["total"]["jobs"] == 3 and report["total"]["unpriced"] == 1
    assert abs(report["total"]["cost"] - 0.75) < 1e-9  # the jobs' own sums: 0.5 + 0.25
