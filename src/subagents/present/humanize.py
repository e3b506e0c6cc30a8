"""Tool calls in words: every backend's tool names map onto a few *kinds* through one table
(:data:`TOOL_KINDS`), and a call is described from the arguments actually present, never
invented. A new backend only adds entries there (and, if its CLI spells an argument
differently, an alias in the kind's ``keys``). Standard library only: the supervisor uses it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable

# typing and dataclasses are not imported at run time: the supervisor imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from subagents.types import JsonObject, JsonValue


__all__ = ["KINDS", "TOOL_KINDS", "Call", "humanize_tool_call", "one_line"]

ELLIPSIS: Final = "…"
NEWLINE_MARK: Final = " ↵ "

# Limits for the shortened (line/activity) form.
PATH_LIMIT: Final = 60
COMMAND_LIMIT: Final = 80
TEXT_LIMIT: Final = 60
THINKING_LIMIT: Final = 80
# How many tool calls a formatter remembers for their results.
MEMORY_LIMIT: Final = 2000


# --------------------------------------------------------------------------- kinds


class _Subject:
    """What a tool call is about: its text and how to shorten it."""

    __slots__ = ("style", "text", "verb")

    def __init__(self, text: str, style: str, verb: str | None = None) -> None:
        self.text = text
        self.style = style  # "path" | "command" | "text"
        self.verb = verb  # overrides the kind's wording (e.g. a file_change that deletes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Subject) and (self.text, self.style, self.verb) == (
            other.text,
            other.style,
            other.verb,
        )

    def __hash__(self) -> int:
        return hash((self.text, self.style, self.verb))


class Kind:
    """How one kind of tool activity is worded.

    ``call``/``done``/``failed`` are format strings taking the subject as ``{}``;
    ``keys`` are the argument names that may hold the subject (first present wins);
    ``style`` says how the subject is shortened for a progress line; ``extract``
    replaces the key lookup for tools whose subject is structured.
    """

    __slots__ = ("call", "done", "extract", "failed", "keys", "style")

    def __init__(
        self,
        call: str,
        done: str,
        failed: str,
        keys: tuple[str, ...] = (),
        style: str = "text",
        extract: Callable[[JsonObject], _Subject | None] | None = None,
    ) -> None:
        self.call = call
        self.done = done
        self.failed = failed
        self.keys = keys
        self.style = style
        self.extract = extract


def _file_change_subject(args: JsonObject) -> _Subject | None:
    """Codex ``file_change``: ``{"changes": [{"path": ..., "kind": "add|update|delete"}]}``."""
    changes = args.get("changes")
    if not isinstance(changes, list):
        return None
    paths: list[str] = []
    kinds: set[str] = set()
    for change in changes:
        if not isinstance(change, dict):
            continue
        path = change.get("path")
        if isinstance(path, str) and path:
            paths.append(path)
            kinds.add(str(change.get("kind") or "update"))
    return _paths_subject(paths, kinds)


_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", re.MULTILINE)


def _patch_subject(args: JsonObject) -> _Subject | None:
    """OpenCode ``patch``: file names read from the ``*** Update File: x`` lines of the patch."""
    for key in ("patchText", "patch", "input"):
        value = args.get(key)
        if isinstance(value, str):
            found = _PATCH_FILE.findall(value)
            if found:
                return _paths_subject([path for _, path in found], {op.lower() for op, _ in found})
    return None


_CHANGE_VERBS: Final = {"add": "write", "update": "edit", "delete": "delete"}


def _paths_subject(paths: list[str], kinds: set[str]) -> _Subject | None:
    if not paths:
        return None
    verb = _CHANGE_VERBS.get(next(iter(kinds)), "edit") if len(kinds) == 1 else "edit"
    if len(paths) == 1:
        return _Subject(paths[0], "path", verb)
    return _Subject(f"{len(paths)} files: " + ", ".join(paths), "text", verb)


def _mcp_subject(args: JsonObject) -> _Subject | None:
    """Codex ``mcp_tool_call``: ``{"server", "tool", "arguments"}``."""
    server, tool = args.get("server"), args.get("tool")
    if isinstance(tool, str) and tool:
        name = f"{server}.{tool}" if isinstance(server, str) and server else tool
        return _Subject(name, "text")
    return None


_PATH_KEYS: Final = ("path", "file_path", "filePath", "absolute_path", "filename", "file")

KINDS: Final[dict[str, Kind]] = {
    "read": Kind(
        "Reading {}",
        "Finished reading {}",
        "Read failed: {}",
        keys=(*_PATH_KEYS, "paths", "include"),
        style="path",
    ),
    "search": Kind(
        "Searching code for {}",
        "Search finished",
        "Search failed: {}",
        keys=("pattern", "query", "regex"),
    ),
    "find": Kind(
        "Scanning for {}",
        "Scan finished",
        "Scan failed: {}",
        keys=("pattern", "glob", "query"),
    ),
    "list": Kind(
        "Listing {}",
        "Finished listing {}",
        "Listing failed: {}",
        keys=("path", "dir_path", "dirPath", "directory", "absolute_path"),
        style="path",
    ),
    "edit": Kind(
        "Editing {}", "Finished editing {}", "Edit failed: {}", keys=_PATH_KEYS, style="path"
    ),
    "write": Kind(
        "Writing {}", "Finished writing {}", "Write failed: {}", keys=_PATH_KEYS, style="path"
    ),
    "delete": Kind(
        "Deleting {}", "Finished deleting {}", "Delete failed: {}", keys=_PATH_KEYS, style="path"
    ),
    "shell": Kind(
        "$ {}", "Command finished", "Command failed: {}", keys=("command", "cmd"), style="command"
    ),
    "fetch": Kind("Fetching {}", "Fetch finished", "Fetch failed: {}", keys=("url", "prompt")),
    "web_search": Kind(
        "Searching the web for {}", "Web search finished", "Web search failed: {}", keys=("query",)
    ),
    "task": Kind(
        "Delegating: {}",
        "Delegation finished",
        "Delegation failed: {}",
        keys=("description", "prompt"),
    ),
    "todo": Kind("Updating the todo list", "Todo list updated", "Todo list update failed"),
    "mcp": Kind("Calling {}", "{} finished", "{} failed", extract=_mcp_subject),
    "file_change": Kind(
        "Editing {}", "Finished editing {}", "Edit failed: {}", extract=_file_change_subject
    ),
    "patch": Kind("Editing {}", "Finished editing {}", "Edit failed: {}", extract=_patch_subject),
}

# Tool name (as each backend's normalizer emits it) -> kind. Looked up exactly, then lower-cased.
TOOL_KINDS: Final[dict[str, str]] = {
    # pi
    "read": "read",
    "bash": "shell",
    "edit": "edit",
    "write": "write",
    "grep": "search",
    "find": "find",
    "ls": "list",
    # Claude Code
    "Read": "read",
    "Bash": "shell",
    "Edit": "edit",
    "MultiEdit": "edit",
    "Write": "write",
    "Grep": "search",
    "Glob": "find",
    "LS": "list",
    "WebFetch": "fetch",
    "WebSearch": "web_search",
    "Task": "task",
    "TodoWrite": "todo",
    "NotebookEdit": "edit",
    # Codex (item types)
    "command_execution": "shell",
    "file_change": "file_change",
    "mcp_tool_call": "mcp",
    "web_search": "web_search",
    # Gemini CLI
    "read_file": "read",
    "read_many_files": "read",
    "run_shell_command": "shell",
    "replace": "edit",
    "write_file": "write",
    "search_file_content": "search",
    "glob": "find",
    "list_directory": "list",
    "web_fetch": "fetch",
    "google_web_search": "web_search",
    # OpenCode (read/bash/edit/write/grep/glob above)
    "list": "list",
    "patch": "patch",
    "webfetch": "fetch",
    "todowrite": "todo",
}


def _kind_of(tool_name: str) -> Kind | None:
    key = TOOL_KINDS.get(tool_name) or TOOL_KINDS.get(tool_name.lower())
    return KINDS.get(key) if key else None


# --------------------------------------------------------------------------- arguments


def _as_object(args: JsonValue) -> JsonObject:
    if isinstance(args, dict):
        return args
    if isinstance(args, str):  # some CLIs hand arguments over as a JSON string
        try:
            decoded: JsonValue = json.loads(args)
        except ValueError:
            return {}
        if isinstance(decoded, dict):
            return decoded
    return {}


_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})
_SHELL_FLAGS: Final = ("-c", "-lc", "-ic", "-lic")

# A light, exact stand-in for ``shlex.split`` / ``shlex.join`` (POSIX mode, no comments),
# which cost tens of microseconds a call and ran several times for every tool event.
# shlex's whitespace is exactly these four characters.
_SHELL_SPACE = re.compile(r"[ \t\r\n]+")
_SHELL_QUOTING = re.compile(r"['\"\\]")
# One word: runs of plain characters, backslash escapes, '...' and "..." pieces.
_SHELL_WORD = re.compile(r"""(?:[^ \t\r\n'"\\]+|\\[\s\S]|'[^']*'|"(?:[^"\\]|\\[\s\S])*")+""")
_SHELL_PIECE = re.compile(r"""([^'"\\]+)|\\([\s\S])|'([^']*)'|"((?:[^"\\]|\\[\s\S])*)\"""")
# Inside double quotes a backslash escapes only a double quote or a backslash.
_DQUOTE_ESCAPE = re.compile(r'\\(["\\])')
_SHELL_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)
# The first word when it is plain (no quoting in it): what shlex would make of it too.
_FIRST_WORD = re.compile(r"[ \t\r\n]*([^ \t\r\n'\"\\]+)(?:[ \t\r\n]|$)")


def _shell_words(text: str) -> list[str] | None:
    """``shlex.split(text)``, or None where shlex raises (an open quote, a lone final
    backslash)."""
    if _SHELL_QUOTING.search(text) is None:
        return [w for w in _SHELL_SPACE.split(text) if w]
    words: list[str] = []
    pos, end = 0, len(text)
    space = _SHELL_SPACE.match(text)
    if space is not None:
        pos = space.end()
    while pos < end:
        m = _SHELL_WORD.match(text, pos)
        if m is None or (m.end() < end and text[m.end()] not in " \t\r\n"):
            return None
        word = []
        for plain, escaped, single, double in _SHELL_PIECE.findall(m.group()):
            if double:
                word.append(_DQUOTE_ESCAPE.sub(r"\1", double))
            else:
                word.append(plain or escaped or single)
        words.append("".join(word))
        space = _SHELL_SPACE.match(text, m.end())
        pos = space.end() if space is not None else m.end()
    return words


def _shell_quote(word: str) -> str:
    """``shlex.quote``."""
    if not word:
        return "''"
    if _SHELL_UNSAFE.search(word) is None:
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _is_shell_wrapper(argv: list[str]) -> bool:
    return len(argv) == 3 and os.path.basename(argv[0]) in _SHELLS and argv[1] in _SHELL_FLAGS


def _unwrap_shell(argv: list[str]) -> str:
    """``/bin/bash -lc 'npm test'`` -> ``npm test`` (Codex wraps every command so)."""
    if _is_shell_wrapper(argv):
        return argv[2]
    return " ".join(_shell_quote(a) for a in argv)


def _command_text(value: JsonValue) -> str | None:
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return None
        # The words of a shell wrapper; any other command is shown as it was written
        # (a wrapper's command can never equal the wrapper re-joined).
        first = _FIRST_WORD.match(value)
        # (rpartition: os.path.basename's result, without its function call)
        if first is not None and first.group(1).rpartition("/")[2] not in _SHELLS:
            return stripped  # a plain first word that names no shell: no wrapper
        argv = _shell_words(value)
        return argv[2] if argv is not None and _is_shell_wrapper(argv) else stripped
    if isinstance(value, list) and value:
        argv = [v for v in value if isinstance(v, str)]
        if len(argv) == len(value):
            return _unwrap_shell(argv)
    return None


def _value_text(value: JsonValue) -> str | None:
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        items = [str(v) for v in value if isinstance(v, str | int | float) and str(v).strip()]
        return ", ".join(items) if items else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def _subject(kind: Kind, args: JsonObject) -> _Subject | None:
    if kind.extract is not None:
        return kind.extract(args)
    if not kind.keys:  # the wording needs no argument (e.g. the todo list)
        return _Subject("", "text")
    style = kind.style
    for key in kind.keys:
        if key not in args:
            continue
        value = args[key]
        if style == "command":
            text = _command_text(value)
        else:
            text = _value_text(value)
            if text is not None and isinstance(value, list):
                return _Subject(text, "text")
        if text is not None:
            return _Subject(text, style)
    return None


# --------------------------------------------------------------------------- shortening


def one_line(text: str) -> str:
    """Lines joined with a visible mark, so a multi-line value stays one line."""
    if text.isprintable():  # then it holds no line break (all of them are unprintable)
        return text.strip()
    return NEWLINE_MARK.join(part.strip() for part in text.strip().splitlines())


def collapse(text: str) -> str:
    return " ".join(text.split())


def head(text: str, limit: int) -> str:
    """Keep the head of ``text``: at most ``limit`` characters including the ellipsis."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def _tail_path(path: str, limit: int) -> str:
    """Keep the tail of a long path, cut at a separator when one is close."""
    if len(path) <= limit:
        return path
    tail = path[-(limit - 1) :]
    slash = tail.find("/")
    if 0 <= slash < len(tail) - 1 and len(tail) - slash >= limit // 2:
        tail = tail[slash:]
    return ELLIPSIS + tail


def _render_subject(subject: _Subject, shorten: bool, cwd: str | None) -> str:
    text = subject.text
    if not shorten:
        return one_line(text)
    if subject.style == "path":
        if cwd and text.startswith(cwd.rstrip("/") + "/") and len(text) > len(cwd) + 1:
            text = text[len(cwd.rstrip("/")) + 1 :]
        return _tail_path(one_line(text), PATH_LIMIT)
    if subject.style == "command":
        lines = text.strip().splitlines()
        first = lines[0].strip() if lines else ""
        if len(lines) > 1:
            first += " " + ELLIPSIS
        return head(first, COMMAND_LIMIT)
    return head(collapse(text), TEXT_LIMIT)


class Call:
    """A tool call read once: its name, kind and subject (the costly part: parsing a command),
    kept so its call, result and status line are worded without reading the arguments again."""

    __slots__ = ("kind", "name", "subject")

    def __init__(self, tool_name: str, args: JsonValue) -> None:
        self.name = tool_name or "tool"
        kind = _kind_of(self.name)
        subject = _subject(kind, _as_object(args)) if kind is not None else None
        if subject is not None and subject.verb is not None:
            # a file change that adds or deletes words itself so
            kind = KINDS.get(subject.verb, kind)
        self.kind = kind
        self.subject = subject

    def words(self, outcome: str | None, *, shorten: bool, cwd: str | None = None) -> str:
        """The call (``outcome`` None) or its result (``"done"``/``"failed"``) in words."""
        kind, subject = self.kind, self.subject
        if kind is None or subject is None:
            if outcome is None:
                return f"Running {self.name}"
            return f"{self.name} {'failed' if outcome == 'failed' else 'finished'}"
        template = kind.call if outcome is None else kind.done if outcome == "done" else kind.failed
        if "{}" not in template:
            return template
        return template.replace("{}", _render_subject(subject, shorten, cwd))


def describe(
    tool_name: str, args: JsonValue, outcome: str | None, *, shorten: bool, cwd: str | None = None
) -> str:
    """Word a tool call (``outcome`` None) or its result (``"done"``/``"failed"``)."""
    return Call(tool_name, args).words(outcome, shorten=shorten, cwd=cwd)


def humanize_tool_call(tool_name: str, args: JsonValue) -> str:
    """One line saying what a tool call does, with full paths and commands.

    ``humanize_tool_call("read", {"path": "src/auth.ts"})`` -> ``"Reading src/auth.ts"``;
    an unknown tool, or a known one missing the argument it needs, -> ``"Running <tool>"``.
    """
    return describe(tool_name, args, None, shorten=False)


# --------------------------------------------------------------------------- formatter


def duration(ms: object) -> str | None:
    if not isinstance(ms, int | float) or isinstance(ms, bool) or ms < 0:
        return None
    seconds = ms / 1000.0
    if seconds < 60:
        return f"{seconds:.1f}s"
    total = int(seconds)
    if total < 3600:
        return f"{total // 60}m {total % 60}s"
    return f"{total // 3600}h {total % 3600 // 60}m"


WARN_LEVELS: Final = frozenset({"warn", "warning", "error", "fatal", "critical"})
