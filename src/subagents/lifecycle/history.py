"""Reading the session log for a person: following it as it grows (``watch``), and selecting entries by time, session, agent and kind (``history``)."""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from subagents.core.clock import epoch
from subagents.core.tail import LineTail
from subagents.core.waker import DirWaker
from subagents.lifecycle.sessionlog import EVENT_TYPES, normalize_event_type, parse_line

try:  # not on Windows; there appends stay single writes, without the lock
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

# typing itself is not imported at run time (import cost).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from subagents.types import JsonObject

_DURATION_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_STOP_EVERY = 0.5  # follow() checks its stop condition at least this often


# ---- following ----------------------------------------------------------------------


def _stopper(stop: Callable[[], bool] | threading.Event | None) -> Callable[[], bool]:
    if stop is None:
        return lambda: False
    is_set = getattr(stop, "is_set", None)
    if callable(is_set):
        return lambda: bool(is_set())
    if callable(stop):
        return lambda: bool(stop())
    raise TypeError("stop must be a callable, a threading.Event or None")


def follow(
    path: Path,
    *,
    stop: Callable[[], bool] | threading.Event | None = None,
    from_start: bool = False,
) -> Iterator[JsonObject]:
    """Yield each complete entry appended to *path*, as soon as it lands.

    ``from_start``: first yield the entries already there; else only new ones. The file
    need not exist yet (entries are yielded from its beginning once it appears). Never yields
    a partial line; skips torn and bad lines. Waits with inotify where available (a ~50 ms
    sleep elsewhere) and checks *stop* at least every 0.5 s; returns once it is true.
    A file that shrinks or is replaced is read again from its start.
    """
    path = Path(path)
    should_stop = _stopper(stop)
    waker = DirWaker(path.parent)
    tail = LineTail(path)
    try:
        waker.arm()
        if not from_start:
            # Start at the end. A torn tail there is harmless: the next append starts
            # with a newline (see append), which ends it as an empty line.
            tail.skip_to_end()
        while True:
            waker.arm()
            for line in tail.lines():
                obj = parse_line(line) if line.strip() else None
                if obj is not None:
                    yield obj
            if should_stop():
                return
            waker.wait(_STOP_EVERY)
            if should_stop():
                return
    finally:
        waker.close()


# ---- history filters ----------------------------------------------------------------


def parse_since(text: str, *, now: float | None = None) -> float:
    """``"45s"``, ``"30m"``, ``"2h"``, ``"1d"``, ``"2w"`` (that long ago) or an ISO date or
    date/time (``2026-01-05``, ``2026-01-05T14:30``, ``…Z`` / ``+02:00``; without a zone it
    is local time) -> epoch seconds. ValueError with a clear message otherwise."""
    raw = str(text).strip()
    match = _DURATION_RE.fullmatch(raw)
    if match:
        amount = float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        return (time.time() if now is None else now) - amount
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(
            f"invalid time {text!r}: use a duration ago like 45s, 30m, 2h, 1d, 2w "
            "or an ISO date/time like 2026-01-05 or 2026-01-05T14:30"
        ) from None
    return dt.timestamp()


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _as_set(value: str | Iterable[str] | None) -> set[str] | None:
    if value is None:
        return None
    return {value} if isinstance(value, str) else set(value)


def newest(
    home: Path,
    log: Path,
    *,
    limit: int | None = None,
    status: str | Iterable[str] | None = None,
    agent: str | Iterable[str] | None = None,
    since: float | None = None,
    event_types: str | Iterable[str] | None = None,
) -> Iterator[JsonObject]:
    """The entries of one session log that pass the filters (see :func:`selected`), newest
    first, at most ``limit`` (None: all), one at a time. Found through the index, which
    reads from the log only the entries shown (and, with ``agent``, those passed over on
    the way); the whole log is read where the index cannot be used."""
    from subagents.lifecycle import logindex

    statuses, types = _statuses(status), _event_types(event_types)
    try:
        # (every filter but the agent's is the index's: without one, it stops at the limit)
        found = logindex.newest(
            home,
            log,
            limit=limit if agent is None else None,
            since=since,
            events=types,
            statuses=statuses,
        )
    except (sqlite3.Error, OSError):
        found = logindex.backwards(log)
    chosen = selected(found, status=statuses, agent=agent, since=since, event_types=types)
    return chosen if limit is None else itertools.islice(chosen, limit)


def _statuses(status: str | Iterable[str] | None) -> set[str] | None:
    """The statuses an entry may have to pass (``timeout`` is recorded as ``failed``)."""
    statuses = _as_set(status)
    if statuses is not None and "timeout" in statuses:
        statuses.add("failed")
    return statuses


def _event_types(event_types: str | Iterable[str] | None) -> set[str] | None:
    """Event types in full (``subagent:complete``), from full or short forms."""
    wanted = _as_set(event_types)
    if wanted is None:
        return None
    types: set[str] = set()
    for name in wanted:
        full = normalize_event_type(name)
        if full is None:
            raise ValueError(
                f"unknown event type {name!r}: expected one of "
                f"{', '.join(EVENT_TYPES)} (or start, complete, error, aborted)"
            )
        types.add(full)
    return types


def selected(
    entries: Iterable[JsonObject],
    *,
    status: str | Iterable[str] | None = None,
    agent: str | Iterable[str] | None = None,
    since: float | None = None,
    event_types: str | Iterable[str] | None = None,
    job_id: str | None = None,
) -> Iterator[JsonObject]:
    """The entries that pass every given filter, in order, one at a time.

    ``status``: entry status(es) (``timeout`` matches ``failed``, as it is recorded);
    ``agent``: matches ``agentName`` or one of its ``", "``-joined names; ``since``: epoch
    seconds (see :func:`parse_since`), entries at or after it; ``event_types``: full or short
    forms (``complete``); ``job_id``: the job id or a prefix of it.
    """
    statuses, types, agents = _statuses(status), _event_types(event_types), _as_set(agent)
    for item in entries:
        # (a damaged entry's status may be anything, an object too: only text is one)
        if statuses is not None and _text(item.get("status")) not in statuses:
            continue
        if types is not None and _text(item.get("eventType")) not in types:
            continue
        if agents is not None:
            name = str(item.get("agentName") or "")
            names = {name, *(part.strip() for part in name.split(","))}
            if not agents & names:
                continue
        if job_id is not None and not str(item.get("jobId") or "").startswith(job_id):
            continue
        if since is not None:
            when = epoch(item.get("timestamp"))
            if when is None or when < since:
                continue
        yield dict(item)
