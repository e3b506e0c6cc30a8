"""Acceptance gates (``--verify``) end to end through the real CLI with a fake pi
(tests/mapchild.py): a gate that fails once and passes after the repair turn, one that
never passes, a map whose rows verify their own files, and bad gates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.cli import invoke
from support.maps import jsonl

pytestmark = pytest.mark.process


CHECK = "import sys, pathlib\nw = sys.argv[1]\nok = pathlib.Path(w + '.ok').exists()\nprint('checked', w)\nprint('ok' if ok else f'missing {w}.ok')\nsys.exit(0 if ok else 1)\n"


def checker(tmp_path: Path) -> str:
    (tmp_path / "check.py").write_text(CHECK)
    return f"{sys.executable} check.py"


def result_file(result: dict[str, object]) -> dict[str, object]:
    paths = result["paths"]
    assert isinstance(paths, dict)
    return json.loads((Path(paths["events"]).parent / "result.json").read_text())


def test_a_gate_that_fails_once_passes_after_the_repair_turn(
    tmp_path: Path, child: dict[str, str]
) -> None:
    command = checker(tmp_path) + " alpha"
    p = invoke(["run", "--json", "--cwd", str(tmp_path), "--verify", command, "write alpha"], child)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "completed"
    verification = result["verification"]
    assert verification["command"] == command and verification["passed"] is True
    assert [a["exitCode"] for a in verification["attempts"]] == [1, 0]
    assert verification["attempts"][0]["outputTail"] == "checked alpha\nmissing alpha.ok"
    # The repair turn continued the first run's session; its result.json says so too.
    assert result["continuedFrom"]
    assert result_file(result)["verification"] == verification
    runs = Path(result["paths"]["events"]).parent.parent
    first = runs / result["continuedFrom"]
    assert (first / "verify-1.log").read_text() == "checked alpha\nmissing alpha.ok\n"
    assert (tmp_path / "alpha.ok").read_text() == "fixed\n"


def test_a_gate_that_never_passes_fails_the_run_and_keeps_its_output(
    tmp_path: Path, child: dict[str, str]
) -> None:
    command = f"{sys.executable} -c \"print('nope'); raise SystemExit(3)\""
    p = invoke(
        [
            "run",
            "--json",
            "--cwd",
            str(tmp_path),
            "--verify",
            command,
            "--verify-attempts",
            "2",
            "write beta",
        ],
        child,
    )
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "failed"
    assert result["errorMessage"] == (
        f"the acceptance gate `{command}` failed: it exited 3 after 2 attempts;"
        " its output ends: nope"
    )
    assert [a["exitCode"] for a in result["verification"]["attempts"]] == [3, 3]
    assert result["verification"]["passed"] is False
    assert result_file(result)["status"] == "failed"
    run_dir = Path(result["paths"]["events"]).parent
    assert (run_dir / "verify-2.log").read_text() == "nope\n"


def test_a_map_whose_rows_verify_their_own_files(tmp_path: Path, child: dict[str, str]) -> None:
    data = tmp_path / "words.txt"
    data.write_text("alpha\nbeta\ngamma\n")
    out = tmp_path / "r.jsonl"
    p = invoke(
        [
            "map",
            str(data),
            "--task",
            "write {line}",
            "--cwd",
            str(tmp_path),
            "--verify",
            checker(tmp_path) + " {line}",
            "--out",
            str(out),
            "-j",
            "3",
        ],
        {**child, "MAP_OK": "1", "MAP_BAD": "beta"},
    )
    assert p.returncode == 0, p.stderr
    rows = {r["line"]: r for r in jsonl(out)}
    assert {r["status"] for r in rows.values()} == {"completed"}
    # Only beta needed its repair turn.
    assert (tmp_path / "beta.ok").read_text() == "fixed\n"
    assert (tmp_path / "alpha.ok").read_text() == "ok\n"


def test_bad_gates_are_one_line_and_exit_2(tmp_path: Path, child: dict[str, str]) -> None:
    for args, message in [
        (["--verify", "  "], "verify: the command is empty"),
        (["--verify", "echo 'x"], "cannot split the command"),
        (
            ["--verify-attempts", "2"],
            "a gate's timeout and attempts need its command or its reviewer",
        ),
        (["--verify", "true", "--verify-attempts", "0"], "--verify-attempts: must be 1 or more"),
    ]:
        p = invoke(["run", "--cwd", str(tmp_path), *args, "hello"], child)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    assert not Path(child["MAP_LOG"]).exists()


def test_a_reviewer_that_rejects_then_approves(tmp_path: Path, child: dict[str, str]) -> None:
    p = invoke(["run", "--json", "--cwd", str(tmp_path), "--review", "pi", "write alpha"], child)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "completed" and result["continuedFrom"]
    verification = result["verification"]
    assert verification["command"] is None and verification["passed"] is True
    reviews = [a["review"] for a in verification["attempts"]]
    assert [(r["approve"], r["issues"]) for r in reviews] == [(False, ["say please"]), (True, [])]
    assert verification["review"] == reviews[-1] and reviews[-1]["reviewer"] == "pi"
    # The reviewer is a run of its own, whose task held the child's answer.
    runs = Path(result["paths"]["events"]).parent.parent
    first_review = json.loads((runs / reviews[0]["runId"] / "result.json").read_text())
    assert "done: write alpha" in first_review["task"]
    assert first_review["structured"] == {"approve": False, "issues": ["say please"]}


def test_a_reviewer_that_never_approves_fails_the_run(
    tmp_path: Path, child: dict[str, str]
) -> None:
    p = invoke(
        [
            "run",
            "--json",
            "--cwd",
            str(tmp_path),
            "--review",
            "pi",
            "--verify",
            "true",
            "write alpha",
        ],
        {**child, "MAP_REVIEW": "reject"},
    )
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    assert result["errorMessage"] == "the reviewer pi did not approve after 2 attempts: say please"
    attempts = result["verification"]["attempts"]
    assert [a["exitCode"] for a in attempts] == [0, 0]  # the command passed; the review did not
    assert [a["review"]["approve"] for a in attempts] == [False, False]


def test_an_agents_frontmatter_gives_its_runs_a_gate(tmp_path: Path, child: dict[str, str]) -> None:
    import os

    agents = Path(os.environ["SUBAGENTS_CONFIG_DIR"]) / "agents"
    agents.mkdir(parents=True)
    command = checker(tmp_path) + " alpha"
    (agents / "checked.md").write_text(
        f"---\nname: checked\ndescription: a worker whose work is checked\nbackend: pi\n"
        f"verify: {command}\n---\nYou work.\n"
    )
    p = invoke(
        ["run", "--json", "--agent", "checked", "--cwd", str(tmp_path), "write alpha"], child
    )
    assert p.returncode == 0, p.stderr
    verification = json.loads(p.stdout)["verification"]
    assert verification["command"] == command and verification["passed"] is True


def test_the_user_configs_gate_checks_a_run_that_names_none(
    tmp_path: Path, child: dict[str, str]
) -> None:
    import os

    command = checker(tmp_path) + " alpha"
    config = Path(os.environ["SUBAGENTS_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(f"verify = {json.dumps(command)}\nverify_attempts = 3\n")
    p = invoke(["run", "--json", "--cwd", str(tmp_path), "write alpha"], child)
    assert p.returncode == 0, p.stderr
    verification = json.loads(p.stdout)["verification"]
    assert verification["command"] == command and verification["passed"] is True
    assert [a["exitCode"] for a in verification["attempts"]] == [1, 0]
    # A step's attempts alone tune the config's gate: one check, no repair turn.
    (tmp_path / "alpha.ok").unlink()
    p = invoke(["run", "--json", "--cwd", str(tmp_path), "--verify-attempts", "1", "x"], child)
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    assert [a["exitCode"] for a in result["verification"]["attempts"]] == [1]
