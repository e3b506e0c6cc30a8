"""What a child's request to act is, in words the rules and a person read, and whether a rule
lets it pass unasked (``--approve``, ``--approve-edits-in-tree``; docs/approvals.md).

A request is a tool's name and its input, in claude's names (``Bash``, ``Edit``, ``Write``,
``Read``…); the backends that ask in other words (codex's command and patch approvals, an
ACP agent's tool kinds) say them so. A rule is a tool's name, or a name and a pattern in
parentheses (``Bash(git status*)``, ``Edit(src/*)``): the pattern (``fnmatch``'s, whole
value) is matched against the request's command, else its path (relative to the working
tree when inside it). Rules are given comma-separated; a comma inside parentheses is part of
the pattern. Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import fnmatch
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonValue

# The tools that edit a file (claude's names; the other backends' edits are named Edit).
EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
# Where a request's input names its path, by the key each CLI uses.
PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "absolute_path")
# The longest summary an item and its events keep.
SUMMARY_LIMIT = 500
# A decision's choice, as every surface words it.
CHOICE_WORDS = {
    "allow": "allowed",
    "always": "allowed for the rest of the run",
    "deny": "denied",
    "answer": "answered",
}


# The approval policies, loosest first: a project's config may only move right of the user's.
STRICTNESS = ("auto", "parent", "ask", "deny")


def project_loosens(policy: object, rules: object, users: str) -> tuple[str, str] | None:
    """What a project config's ``approvals``/``approve`` would loosen of the user's policy
    ``users``: ``(the setting, why)``; None when nothing."""
    if policy in STRICTNESS and STRICTNESS.index(str(policy)) < STRICTNESS.index(users):
        order = " < ".join(STRICTNESS)
        return (
            "approvals",
            f"{policy!r} is looser than {users!r}; a project may only make it stricter ({order})",
        )
    if rules is not None and users != "auto":
        return (
            "approve",
            f"a project's rules would let through what the {users!r} policy asks about",
        )
    return None


def decided_words(choice: str, item: str) -> str:
    """``allowed: item 01m8…``: what a decider is told of the decision taken."""
    return f"{CHOICE_WORDS.get(choice, choice)}: item {item}"


def split_rules(text: str) -> list[str]:
    """``text``'s rules: split on the commas outside parentheses, each stripped."""
    rules: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            rules.append(text[start:i].strip())
            start = i + 1
    rules.append(text[start:].strip())
    return [r for r in rules if r]


def _parse(rule: str) -> tuple[str, str | None]:
    name, paren, rest = rule.partition("(")
    if not paren:
        return rule, None
    return name.strip(), rest[:-1] if rest.endswith(")") else rest


def rules_problem(text: str) -> str | None:
    """What is wrong with ``text`` as rules (a phrase after the option's name), or None."""
    rules = split_rules(text)
    if not rules:
        return "names no rule (e.g. 'Bash(git status*)')"
    for rule in rules:
        name, pattern = _parse(rule)
        if not name or not (name.replace("_", "").replace("-", "").isalnum()):
            return f"has a rule without a tool's name: {rule!r} (e.g. 'Bash(git status*)')"
        if pattern is not None and not rule.endswith(")"):
            return f"has a rule whose parenthesis is not closed: {rule!r}"
        if pattern is not None and not pattern:
            return f"has an empty pattern: {rule!r} (leave out the parentheses for any)"
    return None


def command_of(tool_input: JsonValue) -> str | None:
    if not isinstance(tool_input, dict):
        return None
    command = tool_input.get("command")
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        return " ".join(str(w) for w in command)
    return command if isinstance(command, str) else None


def path_of(tool_input: JsonValue) -> str | None:
    if not isinstance(tool_input, dict):
        return None
    for key in PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def inside(root: str, path: str) -> bool:
    """Whether ``path`` (relative to ``root``, or absolute) resolves inside ``root``."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, path))
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _subject(tool_input: JsonValue, cwd: str) -> str | None:
    """What a rule's pattern is matched against: the command, else the path (relative to
    the tree when inside it)."""
    command = command_of(tool_input)
    if command is not None:
        return command
    path = path_of(tool_input)
    if path is None:
        return None
    if inside(cwd, path):
        return os.path.relpath(os.path.realpath(os.path.join(cwd, path)), os.path.realpath(cwd))
    return path


def passes(
    rules: list[str], edits_in_tree: bool, tool: str, tool_input: JsonValue, cwd: str
) -> str | None:
    """The rule that lets this request pass unasked (its text), or None."""
    if edits_in_tree and tool in EDIT_TOOLS:
        path = path_of(tool_input)
        if path is not None and inside(cwd, path):
            return "edits in the tree"
    subject = _subject(tool_input, cwd)
    for rule in rules:
        name, pattern = _parse(rule)
        if name != tool:
            continue
        if pattern is None or (subject is not None and fnmatch.fnmatchcase(subject, pattern)):
            return rule
    return None


def summary(tool: str, tool_input: JsonValue) -> str:
    """The request in one line, as the inbox shows it (the command, the path; else the
    input's JSON), bounded."""
    what = command_of(tool_input) or path_of(tool_input)
    if what is None:
        import json

        what = json.dumps(tool_input, ensure_ascii=False, sort_keys=True)
    from subagents.core.childtext import one_line

    line = one_line(f"{tool}: {what}")
    return line if len(line) <= SUMMARY_LIMIT else line[: SUMMARY_LIMIT - 1] + "…"
