"""pi backend: real captured streams of pi 0.73.1 and 0.87.1 replayed through a real
supervisor (the conformance kit), plus the 0.87 traps with hand-written lines."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.pi_parent import pi_version_of

from subagents.backends import get_backend
from subagents.config import Settings
from subagents.demo.mockmodel import MockModelServer, Script, write_pi_config
from subagents.runs import RunRequest, start
from subagents.supervisor.lines import Lines
from subagents.testing.conformance import Case, check_backend

STREAMS = Path(__file__).parent / "fixtures" / "streams"
U15 = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15, "cost": 0}
U30 = {"input": 20, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 30, "cost": 0}
RUN = ("assistant_text", "tool_call", "tool_result", "usage")

CASES = {
    "pi": Case(STREAMS / "pi.jsonl", "completed", "All done.", "stop", 1, {"totalTokens": 264}),
    "pi.ls": Case(STREAMS / "pi.ls.jsonl", "completed", "DONE", "stop", 1, U30, event_types=RUN),
    "pi.text-only": Case(STREAMS / "pi.text-only.jsonl", "completed", "DONE", "stop", 0, U15),
    "pi087.text-only": Case(
        STREAMS / "pi087.text-only.jsonl", "completed", "DONE", "stop", 0, U15, "mock-model"
    ),
    "pi087.ls": Case(
        STREAMS / "pi087.ls.jsonl",
        "completed",
        "Found: a.txt, b.py",
        "stop",
        1,
        U30,
        "mock-model",
        event_types=RUN,
    ),
    "pi087.error500": Case(
        STREAMS / "pi087.error500.jsonl",
        "failed",
        stop_reason="error",
        tool_calls=0,
        error_contains="500 mock server error",
        event_types=("notice", "error"),
    ),
    "pi087.error500-noretry": Case(
        STREAMS / "pi087.error500-noretry.jsonl",
        "failed",
        stop_reason="error",
        error_contains="500 mock server error",
    ),
    "pi087.error500-recovers": Case(
        STREAMS / "pi087.error500-recovers.jsonl",
        "completed",
        "DONE",
        "stop",
        0,
        U15,
        event_types=("notice", "assistant_text"),
    ),
}


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(CASES))
def test_pi_streams_conform(name: str, tmp_path: Path) -> None:
    assert check_backend("pi", [CASES[name]], tmp_path) == []


def _error_end() -> dict[str, Any]:
    body = '500: {"message":"mock server error","type":"server_error","code":null}'
    return {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "content": [],
            "stopReason": "error",
            "errorMessage": body,
        },
    }


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "streams"


def _through_lines(norm: Any, stream: bytes, read: int) -> None:
    """``stream`` into ``norm`` as the supervisor reads it: cut into reads of ``read``
    bytes, skipped lines unparsed (only their end seen)."""
    reader = Lines(norm.wants, lambda line: norm.feed(json.loads(bytes(line))), norm.skipped)
    buffer = bytearray(read)
    for i in range(0, len(stream), read):
        part = stream[i : i + read]
        buffer[: len(part)] = part
        reader.feed(buffer, len(part))
    reader.end()


def _agent_ends(name: str) -> tuple[list[bytes], list[int]]:
    lines = (FIXTURES / name).read_bytes().splitlines(keepends=True)
    return lines, [i for i, line in enumerate(lines) if line.startswith(b'{"type":"agent_end"')]


@pytest.mark.parametrize("read", [7, 4096, 1 << 20])
def test_pi087_agent_end_will_retry_disarms_the_error(read: int) -> None:
    # agent_end is skipped unparsed (every message of the run): willRetry, its last key,
    # is read from the line's end, whatever the reads' sizes.
    lines, (first, _last) = _agent_ends("pi087.error500.jsonl")
    assert lines[first].rstrip().endswith(b'"willRetry":true}')
    norm = get_backend("pi").normalizer()
    _through_lines(norm, b"".join(lines[:first]), read)
    assert norm.terminal and norm.failed
    assert norm.error_message == "500 mock server error"
    _through_lines(norm, lines[first], read)
    assert not norm.terminal  # a retry follows: not the end, even before auto_retry_start
    _through_lines(norm, b"".join(lines[first + 1 :]), read)
    assert norm.terminal and norm.failed  # the retries ran out: that was the end


def test_pi087_agent_end_without_retry_keeps_the_error_terminal() -> None:
    lines, (_end,) = _agent_ends("pi087.error500-noretry.jsonl")  # one, willRetry false
    norm = get_backend("pi").normalizer()
    _through_lines(norm, b"".join(lines), 4096)
    assert norm.terminal and norm.failed


def test_pi087_system_message_and_entries_are_ignored() -> None:
    norm = get_backend("pi").normalizer()
    assert norm.feed({"type": "message_end", "message": {"role": "system", "content": ""}}) == []
    assert norm.feed({"type": "entry_appended", "entry": {"type": "custom"}}) == []


# --------------------------------------------------------------------------- both real versions

REPO = Path(__file__).resolve().parent.parent
PI_087 = REPO / ".tools" / "pi087" / "node_modules" / ".bin" / "pi"
PI_073 = REPO / ".tools" / "pi073" / "node_modules" / ".bin" / "pi"


# The versions by id; each test asks for its binary (checked once a process, when first
# needed: not at collection, which every xdist worker does, and each check starts Node).
PI_VERSIONS = [pytest.param(want, id=f"pi{want}") for want in ("1.6", "0.87", "0.73")]
_PI_BINARIES = {"0.87": PI_087, "0.73": PI_073}


@functools.cache
def _pi_found(want: str) -> tuple[str | None, str]:
    """The pi ``want`` names (1.6: the pinned one on PATH, from scripts/setup's .tools, run by
    Node 22; 0.87.1: .tools/pi087, the same Node; 0.73.1: .tools/pi073) and its version, read
    from its npm package as the engine reads it (no pi started for it); "" when it is not
    there or the Node on PATH cannot run it."""
    binary = shutil.which("pi") if want == "1.6" else str(_PI_BINARIES[want])
    return binary, pi_version_of(binary) if binary else ""


def pi_binary(want: str) -> str:
    """The pi of version ``want``, or the test is skipped saying what was found."""
    binary, version = _pi_found(want)
    if binary is None or not version.startswith(want + "."):
        pytest.skip(f"pi {want} not installed (./scripts/setup --test); found {version or 'none'}")
    return binary


def _run(tmp_path: Path, binary: str, script: Script, **config: Any) -> dict[str, Any]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    with MockModelServer(script) as srv:
        env = write_pi_config(tmp_path / "agent", srv.url, **config)
        req = RunRequest(
            task="list files", backend="pi", cwd=str(work), env=env, model="mock/mock-model"
        )
        # (the binary from the settings: the request's env is the child's, not the caller's)
        result = start(req, Settings(bins={"pi": binary})).wait(timeout=120)
    assert result is not None, "the pi run did not finish"
    return result


@pytest.mark.e2e
@pytest.mark.parametrize("want", PI_VERSIONS)
def test_real_pi_runs_to_completion(tmp_path: Path, want: str) -> None:
    binary = pi_binary(want)
    result = _run(tmp_path, binary, Script(final_text="Listed: {tool_output}."))
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["finalText"] == "Listed: a.txt."
    assert result["toolCalls"] == 1 and result["stopReason"] == "stop"
    assert result["usage"]["totalTokens"] == 30 and result["model"] == "mock-model"
    assert not result.get("forcedCleanup")


@pytest.mark.e2e
@pytest.mark.parametrize("want", PI_VERSIONS)
def test_real_pi_error_after_retry_fails_with_the_message(tmp_path: Path, want: str) -> None:
    binary = pi_binary(want)
    retry = {"enabled": True, "maxRetries": 1, "baseDelayMs": 50, "provider": {"maxRetries": 0}}
    result = _run(tmp_path, binary, Script(error_status=500, error_times=-1), retry=retry)
    assert result["status"] == "failed"
    assert result["errorMessage"] == "500 mock server error"  # both versions, same words
    assert "## Error" in result["diagnostics"]


@pytest.mark.e2e
@pytest.mark.parametrize("want", PI_VERSIONS)
def test_real_pi_recovers_after_one_error(tmp_path: Path, want: str) -> None:
    binary = pi_binary(want)
    retry = {"enabled": True, "maxRetries": 2, "baseDelayMs": 50, "provider": {"maxRetries": 0}}
    script = Script(error_status=500, error_times=1, use_tool=False, final_text="DONE")
    result = _run(tmp_path, binary, script, retry=retry)
    assert result["status"] == "completed" and result["finalText"] == "DONE"
    assert result["errorMessage"] is None
