"""Tests for the progress formatter (live lines, activity, transcript)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import subagents
from subagents.core import events as ev
from subagents.present.humanize import KINDS, TOOL_KINDS, humanize_tool_call
from subagents.present.progress import LINE_LIMIT, ProgressFormatter, transcript_entry

# --------------------------------------------------------------------------- tool calls

# (tool name, args, expected humanized call) for every backend's tools and arg aliases.
CALLS: list[tuple[str, Any, str]] = [
    # pi
    ("read", {"path": "src/auth.ts"}, "Reading src/auth.ts"),
    ("grep", {"pattern": "auth"}, "Searching code for auth"),
    ("find", {"pattern": "*.test.ts"}, "Scanning for *.test.ts"),
    ("ls", {"path": "src/"}, "Listing src/"),
    ("edit", {"path": "src/tool.ts", "oldText": "a", "newText": "b"}, "Editing src/tool.ts"),
    ("write", {"path": "README.md", "content": "x"}, "Writing README.md"),
    ("bash", {"command": "npm test"}, "$ npm test"),
    # Claude Code
    ("Read", {"file_path": "/repo/src/auth.ts"}, "Reading /repo/src/auth.ts"),
    ("Bash", {"command": "echo hi", "description": "Print hi"}, "$ echo hi"),
    ("Edit", {"file_path": "/repo/a.py"}, "Editing /repo/a.py"),
    ("MultiEdit", {"file_path": "/repo/b.py", "edits": []}, "Editing /repo/b.py"),
    ("Write", {"file_path": "/repo/c.md"}, "Writing /repo/c.md"),
    ("Grep", {"pattern": "TODO", "path": "src"}, "Searching code for TODO"),
    ("Glob", {"pattern": "**/*.py"}, "Scanning for **/*.py"),
    ("LS", {"path": "/repo/src"}, "Listing /repo/src"),
    ("WebFetch", {"url": "https://example.com", "prompt": "sum"}, "Fetching https://example.com"),
    ("WebSearch", {"query": "python asyncio"}, "Searching the web for python asyncio"),
    ("Task", {"description": "Review auth", "prompt": "..."}, "Delegating: Review auth"),
    ("TodoWrite", {"todos": []}, "Updating the todo list"),
    # Codex items
    ("command_execution", {"command": "/bin/bash -lc 'echo hi'"}, "$ echo hi"),
    ("command_execution", {"command": ["bash", "-lc", "npm test"]}, "$ npm test"),
    ("command_execution", {"command": "ls -la"}, "$ ls -la"),
    ("file_change", {"changes": [{"path": "/r/a.py", "kind": "update"}]}, "Editing /r/a.py"),
    ("file_change", {"changes": [{"path": "/r/new.py", "kind": "add"}]}, "Writing /r/new.py"),
    ("file_change", {"changes": [{"path": "/r/old.py", "kind": "delete"}]}, "Deleting /r/old.py"),
    (
        "file_change",
        {"changes": [{"path": "/r/a.py", "kind": "update"}, {"path": "/r/b.py", "kind": "add"}]},
        "Editing 2 files: /r/a.py, /r/b.py",
    ),
    (
        "mcp_tool_call",
        {"server": "github", "tool": "search", "arguments": {}},
        "Calling github.search",
    ),
    ("web_search", {"query": "rust tokio"}, "Searching the web for rust tokio"),
    # Gemini CLI
    ("read_file", {"absolute_path": "/r/x.ts"}, "Reading /r/x.ts"),
    ("read_file", {"file_path": "/r/y.ts"}, "Reading /r/y.ts"),
    ("read_many_files", {"paths": ["a.py", "b.py"]}, "Reading a.py, b.py"),
    ("run_shell_command", {"command": "echo hi", "description": "d"}, "$ echo hi"),
    ("replace", {"file_path": "/r/z.ts", "old_string": "a"}, "Editing /r/z.ts"),
    ("write_file", {"file_path": "/r/w.ts", "content": ""}, "Writing /r/w.ts"),
    ("search_file_content", {"pattern": "foo"}, "Searching code for foo"),
    ("glob", {"pattern": "*.md"}, "Scanning for *.md"),
    ("list_directory", {"dir_path": "/r/src"}, "Listing /r/src"),
    ("list_directory", {"path": "/r/lib"}, "Listing /r/lib"),
    ("web_fetch", {"prompt": "summarize https://x.y"}, "Fetching summarize https://x.y"),
    ("google_web_search", {"query": "gemini"}, "Searching the web for gemini"),
    # OpenCode
    ("read", {"filePath": "/r/o.ts"}, "Reading /r/o.ts"),
    ("edit", {"filePath": "/r/o.ts"}, "Editing /r/o.ts"),
    ("write", {"filePath": "/r/n.ts"}, "Writing /r/n.ts"),
    ("list", {"path": "/r"}, "Listing /r"),
    ("webfetch", {"url": "https://a.b"}, "Fetching https://a.b"),
    ("todowrite", {"todos": []}, "Updating the todo list"),
    (
        "patch",
        {"patchText": "*** Begin Patch\n*** Update File: src/p.py\n@@\n-a\n+b\n*** End Patch"},
        "Editing src/p.py",
    ),
    # aliases: cmd, query, JSON-string args
    ("bash", {"cmd": "make"}, "$ make"),
    ("grep", {"query": "needle"}, "Searching code for needle"),
    ("read", '{"path": "from/json.txt"}', "Reading from/json.txt"),
]


@pytest.mark.parametrize(("tool", "args", "expected"), CALLS)
def test_humanize_every_backend(tool: str, args: Any, expected: str) -> None:
    assert humanize_tool_call(tool, args) == expected


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read", {}),
        ("read", {"path": ""}),
        ("read", {"path": "   "}),
        ("read", None),
        ("read", "not json"),
        ("bash", {"description": "no command here"}),
        ("Grep", {"path": "src"}),  # a path but no pattern: do not invent a search term
        ("ls", {}),
        ("file_change", {"changes": []}),
        ("mcp_tool_call", {"server": "github"}),
        ("patch", {"patchText": "garbage"}),
    ],
)
def test_missing_argument_falls_back_without_inventing(tool: str, args: Any) -> None:
    assert humanize_tool_call(tool, args) == f"Running {tool}"


def test_unknown_tool() -> None:
    assert humanize_tool_call("frobnicate", {"path": "x"}) == "Running frobnicate"


def test_every_table_entry_names_a_kind() -> None:
    assert set(TOOL_KINDS.values()) <= set(KINDS)


def test_lowercase_fallback_lookup() -> None:
    # A backend spelling a known tool in another case still maps (e.g. "BASH").
    assert humanize_tool_call("BASH", {"command": "ls"}) == "$ ls"


def test_sh_script_is_not_rewritten() -> None:
    # Three words starting with a shell but without -c: keep the command as it came.
    assert humanize_tool_call("bash", {"command": "sh  run.sh  arg"}) == "$ sh  run.sh  arg"


def test_humanize_keeps_full_path_and_command() -> None:
    long_path = "/very/" + "deep/" * 30 + "file.ts"
    assert humanize_tool_call("read", {"path": long_path}) == f"Reading {long_path}"
    long_cmd = "npm test -- " + "x" * 300
    assert humanize_tool_call("bash", {"command": long_cmd}) == f"$ {long_cmd}"


def test_multiline_command_is_one_line_in_humanize() -> None:
    text = humanize_tool_call("bash", {"command": "cd src\nmake"})
    assert "\n" not in text
    assert text.startswith("$ cd src") and text.endswith("make")


# --------------------------------------------------------------------------- line()


def test_tool_call_and_result_lines_with_context() -> None:
    f = ProgressFormatter()
    assert f.line(ev.tool_call("1", "read", {"path": "src/auth.ts"})) == "Reading src/auth.ts"
    assert f.line(ev.tool_result("1", "read", False, "...")) == "Finished reading src/auth.ts"
    assert f.line(ev.tool_call("2", "grep", {"pattern": "auth"})) == "Searching code for auth"
    assert f.line(ev.tool_result("2", "grep", False, "")) == "Search finished"
    assert f.line(ev.tool_call("3", "edit", {"path": "src/tool.ts"})) == "Editing src/tool.ts"
    assert f.line(ev.tool_result("3", "edit", True, "no match")) == "Edit failed: src/tool.ts"
    assert f.line(ev.tool_call("4", "bash", {"command": "npm test"})) == "$ npm test"
    assert f.line(ev.tool_result("4", "bash", False, "ok")) == "Command finished"
    assert f.line(ev.tool_call("5", "bash", {"command": "npm test"})) == "$ npm test"
    assert f.line(ev.tool_result("5", "bash", True, "1 failed")) == "Command failed: npm test"
    assert f.line(ev.tool_call("6", "write", {"path": "README.md"})) == "Writing README.md"
    assert f.line(ev.tool_result("6", "write", False, "")) == "Finished writing README.md"
    assert (
        f.line(ev.tool_call("7", "mcp_tool_call", {"server": "gh", "tool": "pr"}))
        == "Calling gh.pr"
    )
    assert f.line(ev.tool_result("7", "mcp_tool_call", True, "")) == "gh.pr failed"


def test_results_use_the_call_not_the_result_name() -> None:
    # Parallel calls: each result is matched by toolCallId.
    f = ProgressFormatter()
    f.line(ev.tool_call("a", "read", {"path": "one.py"}))
    f.line(ev.tool_call("b", "read", {"path": "two.py"}))
    assert f.line(ev.tool_result("b", "read", False, "")) == "Finished reading two.py"
    assert f.line(ev.tool_result("a", "read", True, "")) == "Read failed: one.py"


def test_results_without_context() -> None:
    f = ProgressFormatter()
    assert f.line(ev.tool_result("nope", "read", False, "")) == "read finished"
    assert f.line(ev.tool_result("nope", "grep", True, "")) == "grep failed"
    assert f.line({"type": "tool_result", "isError": False}) == "tool finished"


def test_result_of_call_without_subject_stays_generic() -> None:
    f = ProgressFormatter()
    assert f.line(ev.tool_call("1", "read", {})) == "Running read"
    assert f.line(ev.tool_result("1", "read", False, "")) == "read finished"


def test_same_event_twice_is_harmless() -> None:
    f = ProgressFormatter()
    call = ev.tool_call("1", "edit", {"path": "a.py"})
    result = ev.tool_result("1", "edit", True, "")
    f.line(call)
    assert f.line(result) == "Edit failed: a.py"
    assert transcript_entry(result, f) == "- ✗ Edit failed: a.py\n"


def test_assistant_text_lines() -> None:
    f = ProgressFormatter()
    assert (
        f.line(ev.assistant_text("Hello  there\n\nfriend ", "stop", "stop", "m"))
        == "Hello there friend"
    )
    assert f.line(ev.assistant_text("", "stop", "stop", "m")) is None
    assert f.line(ev.assistant_text(" \n\t ", "stop", "stop", "m")) is None


def test_thinking_line_is_short() -> None:
    f = ProgressFormatter()
    assert f.line(ev.thinking("Let me\nlook")) == "Thinking: Let me look"
    long = f.line(ev.thinking("word " * 100))
    assert long is not None and long.startswith("Thinking: word") and long.endswith("…")
    assert len(long) <= len("Thinking: ") + 80
    assert f.line(ev.thinking("   ")) is None


def test_max_len_caps_every_line() -> None:
    f = ProgressFormatter(max_len=20)
    text = f.line(ev.assistant_text("a" * 100, "stop", "stop", "m"))
    assert text == "a" * 19 + "…"
    call = f.line(ev.tool_call("1", "bash", {"command": "echo " + "b" * 50}))
    assert (
        call is not None and len(call) == 20 and call.startswith("$ echo b") and call.endswith("…")
    )
    assert f.line(ev.assistant_text("short", "stop", "stop", "m")) == "short"
    act = f.activity()
    assert act is not None and len(act) <= 20


def test_no_max_len_keeps_whole_text() -> None:
    f = ProgressFormatter(max_len=None)
    assert f.line(ev.assistant_text("x" * 500, "stop", "stop", "m")) == "x" * 500


def test_a_progress_line_is_one_short_line_by_default() -> None:
    # Off a terminal too: a 15 kB answer over many lines is never one 15 kB "progress line".
    answer = "\n".join(f"line {i} " + "y" * 100 for i in range(150))
    line = ProgressFormatter().line(ev.assistant_text(answer, "stop", "stop", "m"))
    assert line is not None and "\n" not in line
    assert line.startswith("line 0 y") and len(line) <= LINE_LIMIT


def test_line_shortens_long_paths_keeping_the_tail() -> None:
    f = ProgressFormatter()
    path = "/a/" + "very-long-directory-name/" * 5 + "target.ts"
    text = f.line(ev.tool_call("1", "read", {"path": path}))
    assert text is not None and text.startswith("Reading …") and text.endswith("/target.ts")
    assert len(text) <= len("Reading ") + 60
    # humanize (and therefore diagnostics) keeps the full path.
    assert humanize_tool_call("read", {"path": path}) == f"Reading {path}"


def test_line_shortens_long_commands_keeping_the_head() -> None:
    f = ProgressFormatter()
    cmd = "pytest -x tests/test_something.py " + "--flag " * 40
    text = f.line(ev.tool_call("1", "bash", {"command": cmd}))
    assert (
        text is not None
        and text.startswith("$ pytest -x tests/test_something.py")
        and text.endswith("…")
    )
    assert len(text) <= len("$ ") + 80
    multi = f.line(ev.tool_call("2", "bash", {"command": "cd src\nmake all"}))
    assert multi == "$ cd src …"


def test_line_shows_paths_relative_to_run_cwd() -> None:
    f = ProgressFormatter()
    f.line(ev.run_started("pi", None, "m", "/home/u/proj", 1))
    assert (
        f.line(ev.tool_call("1", "Read", {"file_path": "/home/u/proj/src/auth.ts"}))
        == "Reading src/auth.ts"
    )
    assert (
        f.line(ev.tool_call("2", "Read", {"file_path": "/home/u/projX/a.ts"}))
        == "Reading /home/u/projX/a.ts"
    )


def test_other_events() -> None:
    f = ProgressFormatter()
    assert (
        f.line(ev.run_started("pi", "worker", "mock-model", "/tmp", 1)) == "Started pi (mock-model)"
    )
    assert f.line(ev.run_started("codex", None, None, "/tmp", 1)) == "Started codex"
    assert f.line(ev.usage(ev.empty_usage())) is None
    assert f.line(ev.notice("warn", "retrying in 2s")) == "⚠ retrying in 2s"
    assert f.line(ev.notice("error", "rate limited")) == "⚠ rate limited"
    assert f.line(ev.notice("info", "auto retry")) == "auto retry"
    assert f.line(ev.error("HTTP 400", True)) == "Error: HTTP 400"
    assert f.line(ev.run_finished("completed", 0, None, 3210)) == "Finished: completed in 3.2s"
    assert f.line(ev.run_finished("failed", 1, None, 125_000)) == "Finished: failed in 2m 5s"
    assert f.line({"type": "something_new"}) is None


# --------------------------------------------------------------------------- activity()


def test_messages_and_limits_in_words() -> None:
    """A message sent to the child (you → child), what became of it, and a budget's limit:
    the same words in the live line, the transcript (logs -f), top's activity, MCP progress."""
    fmt = ProgressFormatter()
    sent = ev.user_message("m1", "steer", "stop and\nsay banana", "queued")
    assert fmt.line(sent) == "you → child (steer): stop and say banana"
    assert fmt.activity() == "you → child (steer): stop and say banana"
    held = ev.user_message(
        "m2", "follow-up", "and cherry", "queued", "held until the current turn ends"
    )
    assert fmt.line(held) == "you → child (follow-up): and cherry"
    late = ev.user_message("m1", "steer", "x", "queued", "claude takes it after its answer")
    assert fmt.line(late) == "(your steer) claude takes it after its answer"
    assert (
        fmt.line(ev.user_message("m1", "steer", "x", "delivered")) == "✓ the child took your steer"
    )
    refused = ev.user_message("m3", "steer", "x", "refused", "gemini takes no messages")
    assert fmt.line(refused) == "✗ steer not taken: gemini takes no messages"
    wrap = ev.user_message("w1", "wrap-up", "stop here", "queued")
    assert fmt.line(wrap) == "subagents → child (wrap-up): stop here"
    assert fmt.line(ev.limit("turns", 3, 3, "wrap-up", "run")) == (
        "⚠ turn limit reached (3 of 3): asking the child to wrap up"
    )
    assert fmt.line(ev.limit("cost", 1.0, 1.2, "abort", "job")) == (
        "⚠ job's cost limit reached ($1.20 of $1.00): stopping the child"
    )
    t = ProgressFormatter()
    assert transcript_entry(sent, t) == "\n> you → child (steer): stop and\n> say banana\n\n"
    assert transcript_entry(ev.user_message("m1", "steer", "x", "delivered"), t) == (
        "- ✓ the child took your steer\n"
    )
    assert transcript_entry(ev.limit("tokens", 100, 90, "wrap-up", "run"), t) == (
        "\n> ⚠ token limit reached (90 of 100): asking the child to wrap up\n\n"
    )


def test_activity_follows_the_stream() -> None:
    f = ProgressFormatter()
    assert f.activity() is None
    f.line(ev.thinking("hmm"))
    assert f.activity() == "Thinking"
    f.line(ev.tool_call("1", "read", {"path": "a.py"}))
    assert f.activity() == "Reading a.py"
    f.line(ev.tool_call("2", "bash", {"command": "make"}))
    assert f.activity() == "$ make"
    f.line(ev.tool_result("2", "bash", False, ""))
    assert f.activity() == "Reading a.py"  # still running: the truthful activity
    f.line(ev.tool_result("1", "read", False, ""))
    assert f.activity() == "Finished reading a.py"
    f.line(ev.usage(ev.empty_usage()))
    assert f.activity() == "Finished reading a.py"
    f.line(ev.assistant_text("Done.", "stop", "stop", "m"))
    assert f.activity() == "Writing answer"
    f.line(ev.assistant_text("  ", "stop", "stop", "m"))
    assert f.activity() == "Writing answer"


def test_activity_never_invents() -> None:
    f = ProgressFormatter()
    f.line(ev.tool_call("1", "read", {}))
    assert f.activity() == "Running read"


# --------------------------------------------------------------------------- transcript


def test_transcript_entries() -> None:
    f = ProgressFormatter(max_len=30)  # transcript ignores max_len and shortening
    long_path = "/repo/" + "dir/" * 20 + "file.py"
    assert (
        transcript_entry(ev.run_started("pi", None, "m1", "/elsewhere", 1), f)
        == "\n## Started pi (m1)\n\n"
    )
    assert (
        transcript_entry(ev.tool_call("1", "read", {"path": long_path}), f)
        == f"- Reading {long_path}\n"
    )
    assert (
        transcript_entry(ev.tool_result("1", "read", False, "x"), f)
        == f"- Finished reading {long_path}\n\n  ```\n  x\n  ```\n\n"
    )
    assert transcript_entry(ev.tool_result("1", "read", False, " \n"), f) == (
        f"- Finished reading {long_path}\n"  # no output: the line alone
    )
    # A success's output as a failure's: under its line, bounded, its own fences kept apart.
    result = ev.tool_result("2", "bash", False, "ok ```\n" + "y" * 3000)
    long = transcript_entry(result, f)
    assert long is not None and long.startswith("- bash finished\n\n  ````\n  ok ```\n  yyy")
    more = len(str(result["text"])) - 800
    assert long.endswith(f"y\n  … [{more} more characters]\n  ````\n\n"), long[-80:]
    assert len(long) < 900
    failed = transcript_entry(ev.tool_result("9", "bash", True, "boom ```` here"), f)
    assert failed is not None and failed.startswith("- ✗ bash failed\n")
    assert "`````" in failed and "boom ```` here" in failed
    assert (
        transcript_entry(ev.assistant_text("Line one\nLine two", "stop", "stop", "m"), f)
        == "\nLine one\nLine two\n\n"
    )
    assert transcript_entry(ev.assistant_text("   ", "stop", "stop", "m"), f) is None
    assert transcript_entry(ev.usage(ev.empty_usage()), f) is None
    assert transcript_entry(ev.notice("warn", "careful"), f) == "\n> ⚠ careful\n\n"
    assert transcript_entry(ev.error("bad thing", True), f) == "\n> **Error:** bad thing\n\n"
    assert transcript_entry(ev.thinking("a\nb"), f) == "\n> Thinking: a\n> b\n\n"
    assert (
        transcript_entry(ev.run_finished("failed", 1, None, 1500), f)
        == "\n## Finished: failed in 1.5s\n\n"
    )


def test_transcript_and_line_share_wording() -> None:
    events = [
        ev.tool_call("1", "Edit", {"file_path": "src/tool.ts"}),
        ev.tool_result("1", "Edit", True, "nope"),
        ev.tool_call("2", "command_execution", {"command": "/bin/bash -lc 'npm test'"}),
        ev.tool_result("2", "command_execution", True, ""),
    ]
    f_line, f_md = ProgressFormatter(), ProgressFormatter()
    for event in events:
        line = f_line.line(event)
        chunk = transcript_entry(event, f_md)
        assert line is not None and chunk is not None and line in chunk


@pytest.mark.process
def test_module_imports_only_stdlib() -> None:
    code = (
        "import sys; import subagents.present.progress, subagents.present.diagnostics; "
        "bad = [m for m in ('rich', 'pydantic', 'click', 'yaml', 'psutil') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    src = str(Path(subagents.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == ""
