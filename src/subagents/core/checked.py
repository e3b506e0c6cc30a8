"""What a file's check made of it, kept (in the state dir) for the file's exact bytes and
the checking code: a config or agent file checked once is not checked by pydantic again
(its import and schema, 100-200 ms, were most of a delegation's start). What is kept is what
the file holds (a token too), in a private file of the private state dir; a keep that
cannot be read or written is only a miss.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from subagents.core import paths
from subagents.core.files import make_private_dir, read_json, write_json_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from subagents.types import JsonObject

try:  # CPython's own SHA-256: hashlib's import loads OpenSSL first (~4 ms of a run's start)
    from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]  # 3.12 on
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ImportError:  # pragma: no cover - another Python
        from hashlib import sha256  # type: ignore[assignment,unused-ignore]

FILE = Path("cache") / "checked-files.json"  # beside the CLIs' versions (runs/versions.py)
FILES_KEPT = 16


class CheckedFiles:
    """The kept checks of files, in ``store`` (a file of the state dir), by the code in
    ``checker`` (a module's file: a new version checks again). Read once and written once
    (:meth:`save`) however many files are looked up: an agent discovery reads every agent
    file there is. At most ``kept`` files are kept, the newest checked last."""

    def __init__(
        self, store: Path, checker: str, env: Mapping[str, str] | None, kept: int = FILES_KEPT
    ) -> None:
        self.store = paths.state_home(env) / store
        code = os.stat(checker)
        self.code = f"{code.st_size} {code.st_mtime_ns}"
        self.kept = kept
        self._entries: JsonObject | None = None
        self._new: dict[str, JsonObject] = {}

    def _stamp(self, data: bytes) -> str:
        return f"{sha256(data).hexdigest()} {self.code}"

    def _read(self) -> JsonObject:
        if self._entries is None:
            self._entries = {}
            with contextlib.suppress(OSError, ValueError):
                kept = read_json(self.store)
                if isinstance(kept, dict):
                    self._entries = kept
        return self._entries

    def get(self, name: str, data: bytes) -> JsonObject | None:
        """What the check of ``name`` made of these bytes, as :meth:`keep` was given it;
        None if unkept."""
        entry = self._read().get(name)
        if isinstance(entry, dict) and entry.get("stamp") == self._stamp(data):
            value = entry.get("value")
            if isinstance(value, dict):
                return value
        return None

    def keep(self, name: str, data: bytes, value: JsonObject) -> None:
        """Keep the check of ``name`` (these bytes) at the next :meth:`save`."""
        self._new[name] = {"stamp": self._stamp(data), "value": value}

    def save(self) -> None:
        """Write what was kept since the last save (nothing to write: no write)."""
        if not self._new:
            return
        entries = {k: v for k, v in self._read().items() if k not in self._new}
        entries.update(self._new)  # the newest last
        kept = dict(list(entries.items())[-self.kept :])
        self._entries, self._new = kept, {}
        with contextlib.suppress(OSError):
            make_private_dir(self.store.parent)
            # A cache: a power loss that loses it costs one more check.
            write_json_atomic(self.store, kept, durable="none")


class CheckedFile:
    """The kept check of ``path`` (its ``data``) as ``kind`` (a user or a project config)
    by the code in ``checker`` (a module's file: a new version checks again)."""

    def __init__(
        self, path: Path, data: bytes, kind: str, checker: str, env: Mapping[str, str] | None
    ) -> None:
        self.files = CheckedFiles(FILE, checker, env)
        self.name = f"{kind} {path.resolve()}"
        self.data = data

    def get(self) -> JsonObject | None:
        """What the check made of these bytes, as :meth:`keep` was given it; None if unkept."""
        return self.files.get(self.name, self.data)

    def keep(self, value: JsonObject) -> None:
        self.files.keep(self.name, self.data, value)
        self.files.save()
