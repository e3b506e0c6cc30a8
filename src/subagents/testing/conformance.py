"""The backend conformance kit.

Given a backend and real captured streams with their expected results, it checks
the normalizer and the completion rules the way a run sees them: each stream is
replayed by the fake agent through a real supervisor, once as captured and once
with the child lingering after its last line (the run must still end, with the
same outcome, by forced cleanup). A new backend is done when every stream passes.

    from subagents.testing.conformance import Case, check_backend
    problems = check_backend("claude", [Case("claude.jsonl", status="completed", final_text="hi")], tmp_path)
    assert not problems
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.backends import Fed, Normalizer, get_backend
from subagents.core.childtext import parse_line
from subagents.testing.fakeagent import SCRIPT_ENV, Step, write_launcher, write_script

if TYPE_CHECKING:
    from subagents.types import Event, RunResult


@dataclass
class Case:
    stream: str | Path
    status: str
    final_text: str | None = None
    stop_reason: str | None = None
    tool_calls: int | None = None
    # A subset of result usage to match exactly (e.g. {"input": 10, "cost": None}).
    usage: dict[str, float | None] = field(default_factory=dict)
    model: str | None = None
    error_contains: str | None = None
    exit_code: int = 0
    # Event types that must appear in events.jsonl.
    event_types: tuple[str, ...] = ()


def normalize_stream(backend: str, stream: Path) -> tuple[Normalizer, list[Event]]:
    """Feed a captured stream straight into a normalizer; return it and its events. A
    ``feed`` that returns anything but a ``Fed`` is a TypeError."""
    norm = get_backend(backend).normalizer()
    out: list[Event] = []
    for line in stream.read_bytes().split(b"\n"):
        if not line.strip() or not norm.wants(line):
            continue
        try:
            obj = parse_line(line)  # as the supervisor parses it
        except ValueError:
            continue
        if isinstance(obj, dict):
            fed = norm.feed(obj)
            if not isinstance(fed, Fed):
                raise TypeError(
                    f"{type(norm).__name__}.feed returned a {type(fed).__name__}, not a Fed"
                )
            out.extend(fed)
    out.extend(norm.finish())
    return norm, out


def replay_run(
    backend: str,
    stream: Path,
    work: Path,
    *,
    exit_code: int = 0,
    linger: bool = False,
    timeout: float = 60.0,
) -> tuple[RunResult, list[Event]]:
    """Run a captured stream through a real supervisor; return result.json and the events."""
    from subagents.config import Settings
    from subagents.core.files import read_events
    from subagents.runs import RunRequest, start

    work.mkdir(parents=True, exist_ok=True)
    steps: list[Step] = [{"replay": str(stream.resolve())}]
    steps.append({"hang": True} if linger else {"exit": exit_code})
    script = write_script(work, steps, name=f"script-{'linger' if linger else 'exit'}.json")
    launcher = write_launcher(work)
    b = get_backend(backend)
    env = {b.binary_env_var(): str(launcher), SCRIPT_ENV: str(script), "PATH": "/usr/bin:/bin"}
    handle = start(
        RunRequest(
            task="conformance replay", backend=backend, cwd=str(work), env={SCRIPT_ENV: str(script)}
        ),
        Settings(default_backend=backend, grace=0.25, kill_grace=1.0, timeout=timeout),
        env=env,
        home=work / "home",
    )
    result = handle.wait(timeout=timeout + 10)
    if result is None:
        result = handle.stop()
    return result, read_events(handle.run_dir / "events.jsonl")


def _compare(case: Case, result: RunResult, events: list[Event], label: str) -> list[str]:
    problems: list[str] = []

    def expect(what: str, got: object, want: object) -> None:
        if got != want:
            problems.append(f"{label}: {what} is {got!r}, expected {want!r}")

    expect("status", result.get("status"), case.status)
    if case.final_text is not None:
        expect("finalText", result.get("finalText"), case.final_text)
    if case.stop_reason is not None:
        expect("stopReason", result.get("stopReason"), case.stop_reason)
    if case.tool_calls is not None:
        expect("toolCalls", result.get("toolCalls"), case.tool_calls)
    if case.model is not None:
        expect("model", result.get("model"), case.model)
    usage = result.get("usage")
    for key, want in case.usage.items():
        expect(f"usage.{key}", usage.get(key) if isinstance(usage, dict) else None, want)
    if case.error_contains is not None and case.error_contains not in (
        result.get("errorMessage") or ""
    ):
        problems.append(
            f"{label}: errorMessage {result.get('errorMessage')!r} lacks {case.error_contains!r}"
        )
    types = {e.get("type") for e in events}
    for t in case.event_types:
        if t not in types:
            problems.append(f"{label}: no {t!r} event")
    seqs = [e.get("seq") for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"{label}: event seq numbers are not 1..N")
    return problems


def check_backend(backend: str, cases: list[Case], work: Path) -> list[str]:
    """Every problem found, as one line each; empty when the backend conforms."""
    problems: list[str] = []
    for i, case in enumerate(cases):
        stream = Path(case.stream)
        try:
            normalize_stream(backend, stream)
        except TypeError as exc:
            problems.append(f"{stream.name}: {exc}")
            continue
        result, events = replay_run(backend, stream, work / f"case{i}", exit_code=case.exit_code)
        problems += _compare(case, result, events, f"{stream.name} (as captured)")
        if case.status == "completed":
            # The same stream with the child lingering: must end by forced cleanup, same outcome.
            lingered, levents = replay_run(backend, stream, work / f"case{i}-linger", linger=True)
            problems += _compare(case, lingered, levents, f"{stream.name} (lingering child)")
            if not lingered.get("forcedCleanup"):
                problems.append(f"{stream.name} (lingering child): forcedCleanup is not true")
    return problems
