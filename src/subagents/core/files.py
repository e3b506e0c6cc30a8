"""Writing run artifacts: private modes, atomic JSON, and the write-once result."""

from __future__ import annotations

import contextlib
import errno
import json
import os
from itertools import islice
from pathlib import Path

# typing itself is not imported at run time: it slows the supervisor's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Literal

    from subagents.types import Event, JsonValue


DIR_MODE = 0o700
FILE_MODE = 0o600
# Space set aside in each run and job directory when it is made, given back when its last
# record (result.json, the job result) is written: a full disk still gets a true record.
RESERVE_NAME = ".reserve"
RESERVE_BYTES = 256 * 1024
_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _FULL


def describe_os_error(exc: OSError) -> str:
    """One line for a failed file operation: what failed and where, never a traceback."""
    what = (exc.strerror or str(exc)).lower() if exc.strerror else str(exc)
    return f"{what}: {exc.filename}" if exc.filename else what


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (a directory, or a lock file made 0600 if
    missing) for the ``with`` block: one holder at a time, across processes; a holder that
    dies lets go. A directory's lock needs no space of its own (a full disk still locks)."""
    import fcntl

    if path.is_dir():
        fd = os.open(path, os.O_RDONLY)
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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


def dumps(obj: object) -> bytes:
    """Compact JSON, UTF-8 (not ASCII-escaped); strict: NaN and Infinity are no JSON (a
    ValueError: a record's numbers are made finite before, see core.events.cost_of)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


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


def dumps_fast(obj: object) -> bytes:
    """:func:`dumps` through orjson (a tenth of json's cost; bench/bench_peers.py), json
    for what orjson refuses (integers over 64 bits, keys that are not strings). One
    difference: a NaN or infinite float is written as null (json wrote NaN, which is not
    JSON)."""
    try:
        return (_orjson or orjson_module()).dumps(obj)  # type: ignore[no-any-return]
    except TypeError:
        return dumps(obj)


def loads_exact(data: bytes | bytearray) -> JsonValue:
    """Parse JSON through orjson; ``ValueError`` where orjson refuses it (NaN, invalid
    UTF-8, a lone surrogate) or would lose a value (an integer over 64 bits: a float)."""
    if _LONG_DIGITS in data.translate(_DIGITS_AS_ZERO):
        raise ValueError("a number orjson may not read exactly")
    value: JsonValue = (_orjson or orjson_module()).loads(data)
    return value


def loads(data: bytes) -> JsonValue:
    """Parse JSON written by :func:`dumps` or :func:`dumps_fast`: orjson, json where it
    cannot read the data exactly."""
    try:
        return loads_exact(data)
    except ValueError:
        value: JsonValue = json.loads(data)
        return value


def reserve_space(directory: Path, size: int = RESERVE_BYTES) -> None:
    """Set ``size`` bytes aside in ``directory`` (see RESERVE_NAME). Raises OSError (a full
    disk) and leaves nothing behind."""
    path = directory / RESERVE_NAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        else:  # pragma: no cover - not Linux
            os.write(fd, bytes(size))
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise OSError(exc.errno, exc.strerror, str(directory)) from None
    os.close(fd)


def release_space(directory: Path) -> bool:
    """Give back what reserve_space set aside; True when there was something to give."""
    try:
        os.unlink(directory / RESERVE_NAME)
    except OSError:
        return False
    return True


# The longest piece json_pieces yields: a big string is written (and encoded) in slices.
JSON_PIECE = 1 << 20


def _encoder() -> json.JSONEncoder:
    return json.JSONEncoder(ensure_ascii=False, indent=2, allow_nan=False)


def json_pieces(obj: object) -> Iterator[str]:
    """``json.dumps(obj, ensure_ascii=False, indent=2)`` in pieces of at most ``JSON_PIECE``
    characters, to be written one at a time: a big string (an answer) is held once more, as
    JSON, while it is written (json.dumps, its ``encode`` and the newline added to it held
    three more copies)."""
    for piece in _encoder().iterencode(obj):
        if len(piece) <= JSON_PIECE:
            yield piece
        else:
            for start in range(0, len(piece), JSON_PIECE):
                yield piece[start : start + JSON_PIECE]


# How many of the encoder's pieces (a job's record is ~500) are gathered into one write.
_GATHER = 4096


def _dump_json(obj: object, f: Any) -> None:
    """``obj`` as :func:`json_pieces` gives it, and a newline, to the binary file ``f``: the
    encoder's small pieces joined, encoded and written a few thousand at a time (a record
    is one write); pieces that together are longer than a piece, one (or a slice) at a
    time, as json_pieces would. Through orjson once :func:`orjson_module` has imported it (a
    warm server does: its workers and the supervisors they fork write the same bytes at a
    fiftieth of the cost, ~1 ms of a delegation's records), but for a float it writes as
    1e-5 where json writes 1e-05, and a NaN as null (records' numbers are made finite
    before). Never through ``sys.modules``' orjson: another thread may be importing it."""
    fast = _orjson  # (imported for this alone, it costs more than it saves)
    if fast is not None and _text_below(obj, JSON_PIECE):  # (a big answer: in pieces)
        try:
            data = fast.dumps(obj, option=fast.OPT_INDENT_2)
        except TypeError:  # an integer past 64 bits, a key that is not a string: json's
            pass
        else:
            f.write(data)
            f.write(b"\n")
            return
    pieces = _encoder().iterencode(obj)
    while batch := list(islice(pieces, _GATHER)):
        if sum(map(len, batch)) <= JSON_PIECE:
            f.write("".join(batch).encode())
            continue
        for piece in batch:
            for start in range(0, len(piece), JSON_PIECE):
                f.write(piece[start : start + JSON_PIECE].encode())
    f.write(b"\n")


def _text_below(obj: object, limit: int) -> bool:
    """Whether the strings in ``obj`` (a record: dicts, lists, scalars) come to fewer than
    ``limit`` characters in all."""
    todo = [obj]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            limit -= len(item)
            if limit <= 0:
                return False
        elif isinstance(item, dict):
            todo.extend(item)
            todo.extend(item.values())
        elif isinstance(item, list | tuple):
            todo.extend(item)
    return True


def _write_temp(path: Path, obj: object, sync: bool = True) -> Path:
    # Unique per writer: two threads of one process may race to publish the same file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open_private(tmp, "wb") as f:
            _dump_json(obj, f)
            f.flush()
            if sync:
                os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # a failed write (a full disk) leaves no temp file behind
        raise
    return tmp


def _write_temp_or_reserve(path: Path, obj: object, use_reserve: bool, sync: bool = True) -> Path:
    """``obj`` as JSON in a temp file next to ``path`` (``sync``: on disk before it returns)."""
    try:
        return _write_temp(path, obj, sync)
    except OSError as exc:
        if use_reserve and disk_full(exc) and release_space(path.parent):
            return _write_temp(path, obj, sync)
        raise


def fsync_dir(path: Path) -> None:
    """The directory's entries on disk (a rename in it made durable); best-effort."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# What a record's write promises after a power loss. Before one, whatever the level, a
# reader or a killed writer finds the old or the new whole file: the rename is atomic.
#   "this":  this version (the file fsynced, renamed, the directory fsynced).
#   "whole": a whole version, this one or the one it replaced (the file fsynced, not the
#            rename): an update the record's readers recover from losing, e.g. a job's
#            'running' (a job whose driver died before writing it is recovered the same way).
#   "none":  nothing: a record that means nothing once its processes are gone (the
#            supervisor's pid), or a first version its durable one soon replaces (a run's
#            first meta.json: lost with a power loss, so was the run). A reader takes a
#            torn one for none.
# Each fsync is a wait on the disk (1-4 ms on a shared VM's disk) in a delegation's start.
if TYPE_CHECKING:
    Durability = Literal["this", "whole", "none"]


def write_json_atomic(
    path: Path, obj: object, *, last: bool = False, durable: Durability = "this"
) -> None:
    """Replace ``path`` with ``obj`` as JSON: temp file in the same dir, fsync, rename, the
    directory fsynced, as ``durable`` says (see ``Durability``). ``last``: the directory's
    final record, which may use its reserved space."""
    put_staged(stage_json(path, obj, last=last, durable=durable), path, last=last, durable=durable)


def stage_json(
    path: Path, obj: object, *, last: bool = False, durable: Durability = "this"
) -> Path:
    """The first half of :func:`write_json_atomic`: ``obj`` in a temp file beside ``path``
    (fsynced unless ``durable`` is "none"), for :func:`put_staged` to put in place, or to be
    removed. Lets a writer do something else while the file goes to disk."""
    return _write_temp_or_reserve(path, obj, last, sync=durable != "none")


def put_staged(tmp: Path, path: Path, *, last: bool = False, durable: Durability = "this") -> None:
    """The second half of :func:`write_json_atomic`: ``tmp`` (from :func:`stage_json`)
    renamed to ``path``; the directory fsynced when ``durable`` is "this"."""
    os.replace(tmp, path)
    if durable == "this":
        fsync_dir(path.parent)
    if last:
        release_space(path.parent)


def publish_once(path: Path, obj: object) -> bool:
    """Write ``obj`` to ``path`` atomically unless ``path`` already exists.

    Uses a hard link, which fails when the name is taken, so two writers racing
    (the supervisor and a monitor that found it dead) never replace each other's
    result. Returns True when this call wrote it. It is the run's last record: it may use
    the space reserved in its directory, and gives that space back.
    """
    tmp = _write_temp_or_reserve(path, obj, True)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        release_space(path.parent)
    fsync_dir(path.parent)
    return True


def read_json(path: str | Path, *, fast: bool = False) -> JsonValue:
    """A JSON file's value: what the file says, to be checked by its reader (see
    :mod:`subagents.core.records`) before it is taken for a record. ``fast``: parsed by
    orjson (:func:`loads`: the same value, json's error), for a reader of many files (the job
    index rebuilt from 100,000 of them), where orjson's parse pays for its import."""
    with open(path, "rb") as f:
        data = f.read()
    value: JsonValue = loads(data) if fast else json.loads(data)
    return value


def read_tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of a file as text ('' when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def read_events(path: Path) -> list[Event]:
    """Every event of an events file; a torn or bad line (or one not an event) is skipped."""
    from subagents.core.records import is_event

    out: list[Event] = []
    with contextlib.suppress(OSError), open(path, "rb") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if is_event(obj):
                    out.append(obj)
    return out
