"""Codex's approval requests under ``--approvals`` (docs/approvals.md): what codex's
app-server asks its client (run a command, apply a patch), as a request to act in the words
the rules and the inbox read (``Bash`` with its command, ``Edit`` with the patch's files and
size), and a decision as codex's answer. Its question tool (``request_user_input``, asked as
``item/tool/requestUserInput``; off by default outside codex's Plan mode, so turned on for a
run that asks) is a question in claude's words (``AskUserQuestion``), its answers codex's
``{answers: {QUESTION_ID: {answers: [TEXT]}}}``. Standard library only."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import ApprovalChoice, JsonObject, JsonValue

COMMAND_V2 = "item/commandExecution/requestApproval"
PATCH_V2 = "item/fileChange/requestApproval"
COMMAND_V1 = "execCommandApproval"
PATCH_V1 = "applyPatchApproval"
QUESTION = "item/tool/requestUserInput"
ASKS = (COMMAND_V2, PATCH_V2, COMMAND_V1, PATCH_V1, QUESTION)
# The feature that offers codex's question tool in its default mode, as app-server options.
QUESTION_FEATURE = ["-c", "features.default_mode_request_user_input=true"]
# The thread's approval policy when a run asks: codex asks before any command it does not
# know to be safe (reads) and before any patch.
ASKING_POLICY = "untrusted"

_V2 = {"allow": "accept", "always": "acceptForSession", "deny": "decline"}
_V1 = {"allow": "approved", "always": "approved_for_session", "deny": "denied"}


def request(method: str, params: JsonObject, changes: JsonValue) -> tuple[str, JsonObject]:
    """The tool and input of codex's request ``method`` (``changes``: the file change
    item's, which a v2 patch request names only by its item id)."""
    if method == QUESTION:
        return "AskUserQuestion", {"questions": _questions(params)}
    reason = params.get("reason")
    extra: JsonObject = {"reason": reason} if isinstance(reason, str) and reason else {}
    if method in (COMMAND_V2, COMMAND_V1):
        command = params.get("command")
        # v2 also says the command as the model gave it, outside codex's `bash -c` wrapper:
        # what a rule's pattern and a person read.
        actions = params.get("commandActions")
        if isinstance(actions, list) and len(actions) == 1 and isinstance(actions[0], dict):
            command = actions[0].get("command") or command
        if isinstance(command, list):
            command = " ".join(str(w) for w in command)
        return "Bash", {"command": str(command or ""), "cwd": params.get("cwd"), **extra}
    if method == PATCH_V1:
        changes = params.get("fileChanges")
    files: list[JsonValue] = []
    size = 0
    if isinstance(changes, dict):  # v1: path -> change
        files = list(changes)
        size = sum(len(str(c)) for c in changes.values())
    elif isinstance(changes, list):  # v2: [{path, kind, diff}]
        for change in changes:
            if isinstance(change, dict):
                files.append(change.get("path"))
                size += len(str(change.get("diff") or ""))
    first = files[0] if files else ""
    return "Edit", {"file_path": first, "files": files, "size": size, **extra}


def _questions(params: JsonObject) -> list[JsonValue]:
    """codex's questions in claude's shape (``question``, ``header``, ``options``)."""
    asked = params.get("questions")
    out: list[JsonValue] = []
    for q in asked if isinstance(asked, list) else []:
        if isinstance(q, dict):
            options = q.get("options")
            out.append(
                {
                    "question": q.get("question"),
                    "header": q.get("header") or "",
                    "options": options if isinstance(options, list) else [],
                    "multiSelect": False,
                }
            )
    return out


def question_ids(params: JsonObject) -> list[str]:
    """The ids of a question request's questions, in order (its answers are keyed so)."""
    asked = params.get("questions")
    return [
        str(q.get("id")) for q in (asked if isinstance(asked, list) else []) if isinstance(q, dict)
    ]


def answer(
    method: str,
    choice: ApprovalChoice,
    ids: list[str] | None = None,
    answers: list[str] | None = None,
) -> JsonObject:
    """codex's answer to ``method`` for ``choice`` (a question's: its ``answers`` keyed by
    the questions' ``ids``; none when it was not answered)."""
    if method == QUESTION:
        given = answers if choice == "answer" and answers is not None else []
        keyed: JsonObject = {i: {"answers": [a]} for i, a in zip(ids or [], given, strict=False)}
        return {"answers": keyed}
    words = _V1 if method in (COMMAND_V1, PATCH_V1) else _V2
    return {"decision": words[choice if choice != "answer" else "deny"]}
