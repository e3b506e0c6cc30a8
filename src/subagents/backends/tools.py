"""Tool names across agent CLIs.

Agent files name tools in the spelling of the CLI they were written for (pi's
``read, grep, find, ls``; Claude Code's ``Read, Grep, Glob``). A backend asks for the
allow-list in its own spelling; names it does not know pass through unchanged (they may
be extension or MCP tools).
"""

from __future__ import annotations

# One row a tool: its name in each CLI that has it (pi, claude). Claude Code 2.1 has
# no LS tool: listing a directory is Glob there.
_ROWS: tuple[dict[str, str], ...] = (
    {"pi": "read", "claude": "Read"},
    {"pi": "grep", "claude": "Grep"},
    {"pi": "find", "claude": "Glob"},
    {"pi": "ls", "claude": "Glob"},
    {"pi": "bash", "claude": "Bash"},
    {"pi": "edit", "claude": "Edit"},
    {"pi": "write", "claude": "Write"},
)
# Other spellings that mean a row's tool.
_ALIASES = {"LS": "ls", "MultiEdit": "edit"}

_BY_NAME: dict[str, dict[str, str]] = {}
for _row in _ROWS:
    for _name in _row.values():
        _BY_NAME.setdefault(_name, _row)
for _alias, _pi_name in _ALIASES.items():
    _BY_NAME[_alias] = next(r for r in _ROWS if r["pi"] == _pi_name)


def tools_for(backend: str, tools: list[str]) -> list[str]:
    """``tools`` in ``backend``'s spelling, in order, without duplicates."""
    out: list[str] = []
    for name in tools:
        row = _BY_NAME.get(name)
        spelled = row.get(backend, name) if row else name
        if spelled not in out:
            out.append(spelled)
    return out
