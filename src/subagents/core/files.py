"""Writing run artifacts: private modes, atomic JSON, and the write-once result."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


DIR_MODE = 0o700
FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask; make sure of it.
    os.chmod(path, DIR_MODE)


def open_private(
    path: Path, mode: str = "wb", buffering: int = -1, encoding: str | None = None
) -> Any:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    return os.fdopen(fd, mode, buffering=buffering, encoding=encoding)


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8 (not ASCII-escaped)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


_orjson: Any = None
# 20 digits: the shortest integer that may not fit in 64 bits (orjson makes it a float).
# (Found as 20 zeros once every digit is a zero: translate and `in` run at memory speed,
# a regular expression for a run of digits took 50 us on a 2.5 kB line.)
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 20


def orjson_module() -> Any:
    """orjson, imported on first use: its import (~15 ms: dataclasses, inspect) costs more
    than a short run's JSON does, so the supervisor switches to it only on a long stream."""
    global _orjson
    if _orjson is None:
        import orjson

        _orjson = orjson
    return _orjson


def dumps_fast(obj: Any) -> bytes:
    """:func:`dumps` through orjson (a tenth of json's cost; bench/bench_peers.py), json
    for what orjson refuses (integers over 64 bits, keys that are not strings). One
    difference: a NaN or infinite float is written as null (json wrote NaN, which is not
    JSON)."""
    try:
        return orjson_module().dumps(obj)  # type: ignore[no-any-return]
    except TypeError:
        return dumps(obj)


def loads_exact(data: bytes) -> Any:
    """Parse JSON through orjson; ``ValueError`` where orjson refuses it (NaN, invalid
    UTF-8, a lone surrogate) or would lose a value (an integer over 64 bits: a float)."""
    if _LONG_DIGITS in data.translate(_DIGITS_AS_ZERO):
        raise ValueError("a number orjson may not read exactly")
    return orjson_module().loads(data)


def loads(data: bytes) -> Any:
    """Parse JSON written by :func:`dumps` or :func:`dumps_fast`: orjson, json where it
    cannot read the data exactly."""
    try:
        return loads_exact(data)
    except ValueError:
        return json.loads(data)


def _write_temp(path: Path, data: bytes) -> Path:
    # Unique per writer: two threads of one process may race to publish the same file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    with open_private(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Replace ``path`` with ``obj`` as JSON: temp file in the same dir, fsync, rename."""
    tmp = _write_temp(path, json.dumps(obj, ensure_ascii=False, indent=2).encode() + b"\n")
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def publish_once(path: Path, obj: Any) -> bool:
    """Write ``obj`` to ``path`` atomically unless ``path`` already exists.

    Uses a hard link, which fails when the name is taken, so two writers racing
    (the supervisor and a monitor that found it dead) never replace each other's
    result. Returns True when this call wrote it.
    """
    tmp = _write_temp(path, json.dumps(obj, ensure_ascii=False, indent=2).encode() + b"\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True


def read_json(path: Path) -> Any:
    with open(path, "rb") as f:
        return json.loads(f.read())


def read_tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of a file as text ('' when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of an events file; a torn or bad line is skipped."""
    out: list[dict[str, Any]] = []
    with contextlib.suppress(OSError), open(path, "rb") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
    return out
