"""--output-schema end to end (issue 24): through our own run path (``runs.start`` ->
supervisor -> the real agent CLI) against the mock model. No network. Each test is skipped,
with its reason, when its CLI is not installed (``./scripts/setup --test``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke

from subagents.config import Settings
from subagents.demo import mockmodel as mm
from subagents.demo.mockmodel import MockModelServer, Script
from subagents.runs import RunRequest, start
from subagents.structured import schema_hash
from subagents.types import CouncilMember, CouncilRecord

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["ok", "fixed"]},
        "note": {"type": "string"},
    },
    "required": ["verdict"],
}
VALID = '{"verdict": "ok"}'

CLIS: dict[str, tuple[str, Callable[[Path, str], dict[str, str]]]] = {
    "pi": ("mock/mock-model", lambda d, url: mm.write_pi_config(d, url)),
    "claude": (mm.CLAUDE_MODEL, lambda d, url: mm.write_claude_config(d, url, max_retries=0)),
    "codex": (mm.CODEX_MODEL, lambda d, url: mm.write_codex_config(d, url)),
    "gemini": (mm.GEMINI_MODEL, lambda d, url: mm.write_gemini_config(d, url, max_attempts=1)),
}


def cli(*names: str) -> list[Any]:
    return [
        pytest.param(
            n, marks=pytest.mark.skipif(shutil.which(n) is None, reason=f"{n} is not installed")
        )
        for n in names
    ]


def run(
    tmp_path: Path, backend: str, script: Script, schema: dict[str, Any] = SCHEMA
) -> tuple[dict[str, Any], MockModelServer]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    model, writer = CLIS[backend]
    with MockModelServer(script) as srv:
        env = writer(tmp_path / f"{backend}-config", srv.url)
        req = RunRequest(
            task="review it",
            backend=backend,
            cwd=str(work),
            env=env,
            model=model,
            output_schema=schema,
        )
        handle = start(req, Settings(default_backend=backend))
        result = handle.wait(timeout=120)
        assert result is not None, "the run did not finish"
    return dict(result), srv


def events(result: dict[str, Any]) -> list[dict[str, Any]]:
    text = Path(result["paths"]["events"]).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.e2e
@pytest.mark.parametrize("backend", cli("pi"))
def test_pi_returns_a_valid_object_from_the_instruction_in_its_task(
    tmp_path: Path, backend: str
) -> None:
    result, srv = run(
        tmp_path, backend, Script(use_tool=False, final_text=f"```json\n{VALID}\n```")
    )
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["structured"] == {"verdict": "ok"}
    assert result["schemaHash"] == schema_hash(SCHEMA)
    assert result["task"] == "review it"  # the user's task; the child's carried the schema
    assert "enum" in json.dumps(srv.requests[0]) and len(srv.requests) == 1


# pi takes the repair as its next turn; gemini, taking no input, in a new process that
# continues its conversation (opencode's continuation is the same path: test_live).
@pytest.mark.e2e
@pytest.mark.parametrize("backend", cli("pi", "gemini"))
def test_an_invalid_answer_is_repaired_in_one_turn_quoting_the_error(
    tmp_path: Path, backend: str
) -> None:
    script = Script(
        loop=True,
        loop_limit=0,
        final_text='{"verdict": "maybe"}',
        reply_text='{"verdict": "fixed"}',
    )
    result, srv = run(tmp_path, backend, script)
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["structured"] == {"verdict": "fixed"}
    last = json.dumps(srv.requests[-1])
    assert "does not satisfy the required JSON Schema" in last and "$.verdict" in last
    assert "maybe" in last  # the error quotes what was wrong
    repairs = [e for e in events(result) if e["type"] == "user_message"]
    assert [e["mode"] for e in repairs] == ["repair", "repair"]  # queued, delivered
    assert repairs[-1]["receipt"] == "delivered"


@pytest.mark.e2e
@pytest.mark.parametrize("backend", cli("pi"))
def test_a_never_valid_answer_fails_with_the_error_and_the_raw_answer_kept(
    tmp_path: Path, backend: str
) -> None:
    script = Script(
        loop=True, loop_limit=0, final_text="looks fine to me", reply_text="still prose"
    )
    result, srv = run(tmp_path, backend, script)
    assert result["status"] == "failed"
    assert result["errorMessage"].startswith("the answer does not satisfy the output schema")
    assert "not JSON" in result["errorMessage"]
    assert result["finalText"] == "still prose"  # the raw answer, kept
    assert result["structured"] is None and result["schemaHash"] == schema_hash(SCHEMA)
    assert "does not satisfy the output schema" in (result["diagnostics"] or "")
    assert len(srv.requests) == 2  # the answer, one repair: no more


@pytest.mark.e2e
@pytest.mark.parametrize("backend", cli("claude"))
def test_claude_gets_its_own_json_schema_flag_and_its_structured_output_is_read(
    tmp_path: Path, backend: str
) -> None:
    script = Script(tool_name="StructuredOutput", tool_args={"verdict": "ok"}, final_text="done")
    result, srv = run(tmp_path, backend, script)
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["structured"] == {"verdict": "ok"}
    tools = {t["name"]: t for t in srv.requests[0]["tools"]}
    assert tools["StructuredOutput"]["input_schema"]["properties"]["verdict"]["enum"] == [
        "ok",
        "fixed",
    ]
    meta = json.loads((Path(result["paths"]["events"]).parent / "meta.json").read_text())
    assert any(a.startswith("--json-schema=") for a in meta["argv"])
    assert "Answer with a single JSON value" not in json.dumps(srv.requests[0])


@pytest.mark.e2e
@pytest.mark.parametrize("backend", cli("codex"))
def test_codex_gets_its_own_output_schema_in_strict_form(tmp_path: Path, backend: str) -> None:
    script = Script(use_tool=False, final_text='{"verdict": "ok", "note": null}')
    result, srv = run(tmp_path, backend, script)
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["structured"] == {"verdict": "ok", "note": None}
    fmt = srv.requests[0]["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["strict"] is True
    assert fmt["schema"]["required"] == ["verdict", "note"]  # the optional key made nullable
    assert fmt["schema"]["properties"]["note"]["type"] == ["string", "null"]
    assert fmt["schema"]["additionalProperties"] is False


@pytest.mark.parametrize("backend", cli("codex"))
def test_a_schema_codex_strict_mode_refuses_is_one_line_before_anything_starts(
    tmp_path: Path, backend: str
) -> None:
    from subagents.errors import UsageError

    loose = {"type": "object", "additionalProperties": True}
    with pytest.raises(UsageError, match="additionalProperties"):
        run(tmp_path, backend, Script(), schema=loose)
    assert (
        not list((tmp_path / "home" / "runs").glob("*")) if (tmp_path / "home").exists() else True
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ('{"type": 3}', "not a valid JSON Schema"),
        ("{bad", "is not JSON"),
        ("missing.json", "cannot read it"),
        ("big.json", "over the limit of 256 KiB"),
        ('["a"]', "must be a JSON object"),
    ],
)
def test_a_bad_schema_is_one_line_exit_2_before_anything_starts(
    tmp_path: Path, given: str, says: str
) -> None:
    (tmp_path / "big.json").write_text('{"description": "' + "x" * 300_000 + '"}')
    home = tmp_path / "home"
    proc = invoke(["run", "--output-schema", given, "hi"], {"SUBAGENTS_HOME": str(home)}, tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("subagents: --output-schema: ")
    assert says in lines[0] and proc.stdout == ""
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


@pytest.mark.e2e
@pytest.mark.parametrize("backend", cli("pi"))
def test_a_chain_passes_the_json_text_on_and_an_agent_file_carries_its_schema(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subagents

    agents = tmp_path / "cc" / "agents"
    agents.mkdir(parents=True)
    (agents / "schema.json").write_text(json.dumps(SCHEMA))
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: reviews\nbackend: pi\noutputSchema: schema.json\n---\n"
        "Review.\n"
    )
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    script = Script(use_tool=False, final_text=f"Here it is:\n```json\n{VALID}\n```\n")
    with MockModelServer(script) as srv:
        env = mm.write_pi_config(tmp_path / "pi-config", srv.url)
        spec = {
            "mode": "chain",
            "steps": [
                {"task": "review", "agent": "reviewer", "model": "mock/mock-model"},
                {"task": "got: {previous}", "backend": "pi", "model": "mock/mock-model"},
            ],
        }
        result = subagents.run(spec, env=env, cwd=tmp_path)
        assert result["status"] == "completed"
        assert result["runs"][0]["structured"] == {"verdict": "ok"}  # type: ignore[typeddict-item]
        assert "structured" not in result["runs"][1]
        second = json.dumps(srv.requests[-1])
        assert 'got: {\\"verdict\\": \\"ok\\"}' in second  # the JSON text, not the prose


VERDICT = {"best": "B", "agreement": "partial", "reasons": ["B fixed it"], "merged": "fixed"}


@pytest.mark.e2e
def test_a_council_of_three_clis_with_a_judge_answers_side_by_side_with_a_verdict(
    tmp_path: Path,
) -> None:
    for name in ("pi", "claude", "codex", "gemini"):
        if shutil.which(name) is None:
            pytest.skip(f"{name} is not installed")
    script = Script(
        per_api={
            mm.CHAT: Script(use_tool=False, final_text=VALID),
            mm.ANTHROPIC: Script(
                tool_name="StructuredOutput", tool_args={"verdict": "fixed"}, final_text="done"
            ),
            mm.RESPONSES: Script(use_tool=False, final_text='{"verdict": "ok", "note": null}'),
            mm.GEMINI: Script(use_tool=False, final_text=json.dumps(VERDICT)),
        }
    )
    clis = tmp_path / "clis"
    with MockModelServer(script) as srv:
        env = {
            **mm.write_pi_config(clis / "pi", srv.url),
            **mm.write_claude_config(clis, srv.url, max_retries=0),
            **mm.write_codex_config(clis / "codex", srv.url),
            **mm.write_gemini_config(clis, srv.url, max_attempts=1),
        }
        members = f"pi:mock/mock-model,claude:{mm.CLAUDE_MODEL},codex:{mm.CODEX_MODEL}"
        # (a foreground run in-process: its runs' processes are what is looked at)
        proc = invoke(
            ["run", "--json", "-q",
             "--council", members, "--judge", f"gemini:{mm.GEMINI_MODEL}",
             "--output-schema", json.dumps(SCHEMA), "--cwd", str(tmp_path), "review it"],
            env, bound=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        job = json.loads(proc.stdout)
        judged = [r for r in srv.requests if "contents" in r]
    assert job["mode"] == "council" and job["status"] == "completed"
    council = job["council"]
    members_ = council["members"]
    assert [m["backend"] for m in members_] == ["pi", "claude", "codex"]
    assert [m["label"] for m in members_] == ["A", "B", "C"]
    assert [m["structured"] for m in members_] == [
        {"verdict": "ok"},
        {"verdict": "fixed"},
        {"verdict": "ok", "note": None},
    ]
    for m in members_:
        assert m["status"] == "completed" and m["durationMs"] > 0 and m["tokens"] > 0
    assert council["answered"] == 3 and council["quorum"] == 1
    fits(council, CouncilRecord)  # job.json's record has the keys its type says, no others
    for m in members_:
        fits(m, CouncilMember)
    assert council["agreement"]["differ"]["/verdict"] == {"A": "ok", "B": "fixed", "C": "ok"}
    assert council["verdict"] == VERDICT and job["finalText"] == "fixed"
    assert len(job["runs"]) == 4 and job["runs"][3]["backend"] == "gemini"
    # the judge got every answer, labelled
    judge_request = json.dumps(judged[0])
    for text in ("Answer A (pi)", "Answer B (claude)", "Answer C (codex)", "fixed"):
        assert text in judge_request
    # show: the answers side by side, a row a member
    shown = invoke(["show", job["jobId"]], {"COLUMNS": "160"}).stdout
    rows = {line.split()[0]: line for line in shown.splitlines() if line[:2] in ("A ", "B ", "C ")}
    assert set(rows) == {"A", "B", "C"}
    assert "pi (mock-model)" in rows["A"] and "completed" in rows["A"]
    assert '{"verdict": "fixed"}' in rows["B"] and "$" in rows["B"]  # claude prices its turns
    assert "differ: /verdict" in shown and "verdict: best B, agreement partial" in shown


def test_the_mcp_tool_builds_a_council_with_a_schema_judge_and_quorum() -> None:
    from subagents.jobs import parse_job
    from subagents.mcp.args import build_spec

    mode, spec = build_spec(
        task="review it",
        tasks=None,
        chain=None,
        council=["pi", "claude:sonnet", "reviewer"],
        judge="codex",
        quorum=2,
        output_schema=SCHEMA,
    )
    assert mode == "council" and spec["judge"] == "codex" and spec["quorum"] == 2
    assert [(s.get("backend"), s.get("model"), s.get("agent")) for s in spec["steps"]] == [
        ("pi", None, None),
        ("claude", "sonnet", None),
        (None, None, "reviewer"),
    ]
    assert all(s["output_schema"] == SCHEMA and s["task"] == "review it" for s in spec["steps"])
    parsed = parse_job(spec)
    assert parsed.mode == "council" and parsed.quorum == 2
    with pytest.raises(Exception, match="quorum: 4 is more than the council's 3 members"):
        parse_job({**spec, "quorum": 4})


def fits(record: dict[str, Any], shape: Any) -> None:
    """``record`` has every key ``shape`` requires, and none it does not declare."""
    required, optional = set(shape.__required_keys__), set(shape.__optional_keys__)
    assert not required - set(record), f"{shape.__name__} lacks {sorted(required - set(record))}"
    assert not set(record) - required - optional, sorted(set(record) - required - optional)
