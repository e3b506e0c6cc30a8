"""The client side of the Agent Client Protocol, as a headless parent serves it: an ACP
agent asks its client to read and write text files (``fs/read_text_file``,
``fs/write_text_file``) and for permission to act (``session/request_permission``).

Files are served inside the run's working directory only (symlinks resolved first, so a
link inside the tree that points out of it is outside): any other path is refused with an
error the agent sees, and the run gets a warning. A permission request is answered by the
run's policy (``--permissions``): ``allow`` (the default) allows an action whose locations
are all inside the tree and denies one that names a path outside it; ``deny`` denies
every one; ``ask`` (or ``--approvals``) hands it to the run's approvals (acpask.py). Each decision is recorded as a notice. ``terminal/*`` is not served and not
advertised: an agent then runs commands with its own shell tool, in its own process, which
is already in the run's process group (stopped with it) and whose output the agent
reports in its ``tool_call_update``: serving terminals would only add a second way to run a
command, with nothing more to show for it.

Standard library only: the supervisor imports this module for every ACP run.
"""

from __future__ import annotations

import os

from subagents.errors import ClientRefusal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue

# The policies answered here; ``ask`` (``--approvals``) waits for the run's decision instead
# (acpask.py).
POLICIES = ("allow", "deny")
DEFAULT_POLICY = "allow"
# The largest file served to an agent, and the largest it may write through us.
MAX_FILE_BYTES = 10 * 1024 * 1024
# JSON-RPC error codes: invalid params (a bad or refused path), internal error (I/O).
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# ACP's own code for a file that is not there (agents tell "does not exist yet" by it).
RESOURCE_NOT_FOUND = -32002


def Refused(message: str, code: int = INVALID_PARAMS) -> ClientRefusal:
    """A request the client will not serve (invalid params unless said otherwise)."""
    return ClientRefusal(message, code)


def inside(root: str, path: str) -> bool:
    """Whether ``path`` (absolute) resolves inside ``root`` (resolved already)."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


class Client:
    """What one run serves its ACP agent: its tree (``cwd``) and its permission policy."""

    def __init__(self, cwd: str, policy: str | None) -> None:
        self.root = os.path.realpath(cwd)
        self.policy = policy or DEFAULT_POLICY

    def _path(self, params: JsonObject, action: str) -> str:
        path = params.get("path")
        if not isinstance(path, str) or not path:
            raise Refused(f"{action}: no path given")
        if not os.path.isabs(path):
            raise Refused(f"{action}: the path must be absolute: {path}")
        if not inside(self.root, path):
            raise Refused(f"{action} refused: {path} is outside the run's working directory")
        return os.path.realpath(path)

    def read_text_file(self, params: JsonObject) -> JsonObject:
        path = self._path(params, "read")
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raise Refused(f"read refused: {path} is {size} bytes (limit {MAX_FILE_BYTES})")
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            raise Refused(f"Resource not found: {path}", RESOURCE_NOT_FOUND) from None
        except OSError as exc:
            raise Refused(f"read failed: {path}: {exc.strerror or exc}", INTERNAL_ERROR) from None
        line, limit = _positive(params.get("line")), _positive(params.get("limit"))
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(lines[start : None if limit is None else start + limit])
        return {"content": text}

    def write_text_file(self, params: JsonObject) -> None:
        path = self._path(params, "write")
        content = params.get("content")
        if not isinstance(content, str):
            raise Refused(f"write: no text content given for {path}")
        data = content.encode("utf-8", "replace")
        if len(data) > MAX_FILE_BYTES:
            raise Refused(f"write refused: {len(data)} bytes (limit {MAX_FILE_BYTES})")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise Refused(f"write failed: {path}: {exc.strerror or exc}", INTERNAL_ERROR) from None

    def permission(self, params: JsonObject) -> tuple[JsonObject, bool, str]:
        """The answer to a ``session/request_permission``: ``(result, allowed, what)``, where
        ``what`` names the action for the run's record."""
        call = params.get("toolCall")
        call = call if isinstance(call, dict) else {}
        what = describe(call)
        outside = [p for p in locations(call) if not inside(self.root, p)]
        if self.policy == "deny":
            allowed, why = False, "policy deny"
        elif outside:
            allowed, why = False, f"outside the working directory: {outside[0]}"
        else:
            allowed, why = True, f"policy {self.policy}"
        option_id = option(params.get("options"), _ALLOW if allowed else _REJECT)
        if option_id is None:  # no option of the kind wanted: the agent is told no
            return {"outcome": {"outcome": "cancelled"}}, False, f"{what} ({why}; no option)"
        result: JsonObject = {"outcome": {"outcome": "selected", "optionId": option_id}}
        return result, allowed, f"{what} ({why})"


def _positive(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def locations(call: JsonObject) -> list[str]:
    listed = call.get("locations")
    paths = [
        str(loc["path"])
        for loc in (listed if isinstance(listed, list) else [])
        if isinstance(loc, dict) and isinstance(loc.get("path"), str)
    ]
    # An absolute path may also be named in the call's input only (a file tool's argument).
    raw = call.get("rawInput")
    if isinstance(raw, dict):
        for key in ("path", "file_path", "filePath", "absolute_path"):
            value = raw.get(key)
            if isinstance(value, str) and os.path.isabs(value):
                paths.append(value)
    return paths


def describe(call: JsonObject) -> str:
    kind = call.get("kind")
    title = call.get("title")
    parts = [str(kind) if isinstance(kind, str) else "tool"]
    if isinstance(title, str) and title:
        parts.append(title[:200])
    return " ".join(parts)


# The option kinds that allow (once first: a headless run grants no standing permission)
# and that deny.
_ALLOW = ("allow_once", "allow_always")
_REJECT = ("reject_once", "reject_always")


def option(options: JsonValue, kinds: tuple[str, ...]) -> str | None:
    """The id of the first option offered of these kinds, in their order (None: none)."""
    if not isinstance(options, list):
        return None
    by_kind: dict[str, str] = {}
    for opt in options:
        if isinstance(opt, dict) and isinstance(opt.get("optionId"), str):
            by_kind.setdefault(str(opt.get("kind")), str(opt["optionId"]))
    for kind in kinds:
        if kind in by_kind:
            return by_kind[kind]
    return None
