"""`copilot_agent_initiator`: a pi child on the github-copilot provider sends
`X-Initiator: agent` (the extension src/subagents/backends/pi_copilot.ts, given with `-e`),
and retries once without it when the endpoint answers 400 about the initiator.

Offline: a pi provider named `github-copilot` points at the mock model, which records each
request's headers. pi itself sends `X-Initiator: user` on a turn that follows the user's
message (its own inference for Copilot), so "without the option" means "not `agent` there".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from subagents.backends import CommandRequest, get_backend
from subagents.config import load_settings
from subagents.demo.mockmodel import MODEL_ID, MockModelServer, Script, write_pi_config
from subagents.runs import RunRequest, start

COPILOT = "github-copilot"
EXTENSION = Path(__file__).resolve().parent.parent / "src/subagents/backends/pi_copilot.ts"
# pi 0.87 (scripts/setup --test): `before_provider_headers` arrived after 0.73.
needs_pi = pytest.mark.skipif(shutil.which("pi") is None, reason="pi not on PATH")


def _run(
    tmp_path: Path, script: Script, *, option: bool, retry: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """One real pi child through the config file -> settings -> argv path."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text(f"copilot_agent_initiator = {str(option).lower()}\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    with MockModelServer(script) as srv:
        env = write_pi_config(tmp_path / "agent", srv.url, provider=COPILOT, retry=retry)
        req = RunRequest(
            task="list files", backend="pi", cwd=str(work), env=env, model=f"{COPILOT}/{MODEL_ID}"
        )
        result = start(req, load_settings(work)).wait(timeout=120)
        headers = srv.request_headers
    assert result is not None, "the pi run did not finish"
    return result, headers


@pytest.mark.e2e
@needs_pi
def test_option_marks_every_child_request_agent(tmp_path: Path) -> None:
    result, headers = _run(tmp_path, Script(final_text="Listed: {tool_output}."), option=True)
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["finalText"] == "Listed: a.txt."
    # Two model requests (the tool call, then the answer), the first one included.
    assert [h.get("x-initiator") for h in headers] == ["agent", "agent"]


@pytest.mark.e2e
@needs_pi
def test_without_the_option_the_first_request_is_not_agent(tmp_path: Path) -> None:
    result, headers = _run(tmp_path, Script(final_text="Listed: {tool_output}."), option=False)
    assert result["status"] == "completed", result.get("diagnostics")
    assert len(headers) == 2 and headers[0].get("x-initiator") != "agent"
    meta = json.loads(Path(result["paths"]["events"]).with_name("meta.json").read_text())
    assert str(EXTENSION) not in meta["argv"]


@pytest.mark.e2e
@needs_pi
def test_a_400_about_the_initiator_is_retried_once_without_it(tmp_path: Path) -> None:
    script = Script(
        use_tool=False,
        final_text="DONE",
        error_status=400,
        error_times=1,
        error_message="X-Initiator header is not allowed for this model",
    )
    retry = {"enabled": True, "maxRetries": 3, "baseDelayMs": 1, "provider": {"maxRetries": 0}}
    result, headers = _run(tmp_path, script, option=True, retry=retry)
    assert result["status"] == "completed", result.get("diagnostics")
    assert result["finalText"] == "DONE"
    assert [h.get("x-initiator") for h in headers] == ["agent", "user"]
    events = Path(result["paths"]["events"]).read_text()
    assert "X-Initiator: agent refused; retrying once without it" in events


@pytest.mark.e2e
@needs_pi
def test_a_second_initiator_400_is_not_retried_again(tmp_path: Path) -> None:
    script = Script(
        use_tool=False,
        error_status=400,
        error_times=-1,
        error_message="X-Initiator header is not allowed for this model",
    )
    retry = {"enabled": True, "maxRetries": 3, "baseDelayMs": 1, "provider": {"maxRetries": 0}}
    result, headers = _run(tmp_path, script, option=True, retry=retry)
    assert result["status"] == "failed"
    assert len(headers) == 2  # the request with the header, one retry, no more
    assert (
        "github-copilot refused X-Initiator: agent; retrying once without it"
        in (result["diagnostics"])
    )


def test_argv_carries_the_extension_only_when_asked_and_copilot_is_possible() -> None:
    pi = get_backend("pi")

    def argv(model: str | None, option: bool) -> list[str]:
        return pi.build_argv("pi", CommandRequest("t", "/", model, copilot_agent_initiator=option))

    assert argv(f"{COPILOT}/gpt-4o", True)[-3:] == ["-e", str(EXTENSION), "t"]
    assert "-e" in argv(None, True)  # pi's default provider may be Copilot
    assert "-e" not in argv("anthropic/claude-sonnet-4-5", True)
    assert "-e" not in argv(f"{COPILOT}/gpt-4o", False)
    assert EXTENSION.is_file()
