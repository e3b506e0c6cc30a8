"""An ACP agent's ``session/request_permission`` under ``--approvals`` (docs/approvals.md):
the tool call it asks about, as a request to act in the words the rules and the inbox read
(``Bash`` with its command, ``Edit``/``Read`` with the path, else the call's kind), with the
options the agent offers kept in its input; and a decision as the option to select (allow
once or always, reject), or ``cancelled`` when the agent offered no option of that kind.
Standard library only."""

from __future__ import annotations

from subagents.backends.acpclient import describe, locations, option

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import ApprovalChoice, JsonObject, JsonValue

# An ACP tool kind, as the tool the rules name.
TOOLS = {"execute": "Bash", "edit": "Edit", "delete": "Edit", "move": "Edit", "read": "Read"}
TOOLS |= {"fetch": "WebFetch", "search": "Grep"}
# The option kinds each choice selects, the first the agent offers.
KINDS: dict[ApprovalChoice, tuple[str, ...]] = {
    "allow": ("allow_once", "allow_always"),
    "always": ("allow_always", "allow_once"),
    "deny": ("reject_once", "reject_always"),
}


def request(params: JsonObject) -> tuple[str, JsonObject]:
    """The tool and input of a permission request."""
    call = params.get("toolCall")
    call = call if isinstance(call, dict) else {}
    kind = call.get("kind")
    tool = TOOLS.get(kind, kind) if isinstance(kind, str) and kind else "tool"
    raw = call.get("rawInput")
    tool_input: JsonObject = {"title": describe(call)}
    command = raw.get("command") if isinstance(raw, dict) else None
    if isinstance(command, str | list):
        tool_input["command"] = command
    paths: list[JsonValue] = list(locations(call))
    if paths:
        tool_input["file_path"] = paths[0]
    offered = params.get("options")
    if isinstance(offered, list):
        tool_input["options"] = [
            {"optionId": o.get("optionId"), "name": o.get("name"), "kind": o.get("kind")}
            for o in offered
            if isinstance(o, dict)
        ]
    return str(tool), tool_input


def outcome(options: JsonValue, choice: ApprovalChoice) -> JsonObject:
    """The answer to the request: the option the choice selects, or cancelled."""
    chosen = option(options, KINDS[choice])
    if chosen is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": chosen}}
