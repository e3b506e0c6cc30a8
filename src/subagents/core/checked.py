"""What a file's check made of it, kept (in the state dir) for the file's exact bytes and
the checking code: a config file checked once is not checked by pydantic again (its
import and schema, 100-200 ms, were most of a delegation's start). What is kept is what
the file holds (a token too), in a private file of the private state dir; a keep that
cannot be read or written is only a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from subagents.core import paths
from subagents.core.files import make_private_dir, read_json, write_json_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from subagents.types import JsonObject

FILE = Path("cache") / "checked-files.json"  # beside the CLIs' versions (runs/versions.py)
FILES_KEPT = 16


class CheckedFile:
    """The kept check of ``path`` (its ``data``) as ``kind`` (a user or a project config)
    by the code in ``checker`` (a module's file: a new version checks again)."""

    def __init__(
        self, path: Path, data: bytes, kind: str, checker: str, env: Mapping[str, str] | None
    ) -> None:
        self.store = paths.state_home(env) / FILE
        self.name = f"{kind} {path.resolve()}"
        code = os.stat(checker)
        self.stamp = f"{hashlib.sha256(data).hexdigest()} {code.st_size} {code.st_mtime_ns}"

    def _read(self) -> JsonObject:
        with contextlib.suppress(OSError, ValueError):
            kept = read_json(self.store)
            if isinstance(kept, dict):
                return kept
        return {}

    def get(self) -> JsonObject | None:
        """What the check made of these bytes, as :meth:`keep` was given it; None if unkept."""
        entry = self._read().get(self.name)
        if isinstance(entry, dict) and entry.get("stamp") == self.stamp:
            value = entry.get("value")
            if isinstance(value, dict):
                return value
        return None

    def keep(self, value: JsonObject) -> None:
        kept = {k: v for k, v in self._read().items() if k != self.name}
        kept = dict(list(kept.items())[-(FILES_KEPT - 1) :])
        kept[self.name] = {"stamp": self.stamp, "value": value}
        with contextlib.suppress(OSError):
            make_private_dir(self.store.parent)
            # A cache: a power loss that loses it costs one more check.
            write_json_atomic(self.store, kept, durable="none")
