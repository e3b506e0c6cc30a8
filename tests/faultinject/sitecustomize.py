"""Injected into every Python process of a test (CLI, job driver, supervisor) through
PYTHONPATH: once the file named by $SUBAGENTS_TEST_DISK_FULL exists, the disk is full for
writes through subagents' write layer (subagents.core.files) — except for the space that
giving back a directory's reserve frees, as on a real disk."""

from __future__ import annotations

import errno
import os

FLAG = os.environ.get("SUBAGENTS_TEST_DISK_FULL")

if FLAG:
    from typing import Any

    import subagents.core.files as files

    credit = [0]
    real_open, real_release = files.open_private, files.release_space

    def full() -> bool:
        return os.path.exists(FLAG)  # type: ignore[arg-type]

    class FullFile:
        def __init__(self, f: Any, path: Any) -> None:
            self._f, self._path = f, path

        def write(self, data: Any) -> int:
            if full():
                if credit[0] < len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._path))
                credit[0] -= len(data)
            return int(self._f.write(data))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

        def __enter__(self) -> FullFile:
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.close()

    def open_private(path: Any, mode: str = "wb", *args: Any, **kw: Any) -> Any:
        if full() and "a" not in mode and credit[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return FullFile(real_open(path, mode, *args, **kw), path)

    def release_space(directory: Any) -> bool:
        released = bool(real_release(directory))
        if released:
            credit[0] += files.RESERVE_BYTES
        return released

    def reserve_space(directory: Any, size: int = files.RESERVE_BYTES) -> None:
        if full():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory))
        real_reserve(directory, size)

    real_reserve = files.reserve_space
    files.open_private = open_private  # type: ignore[assignment]
    files.release_space = release_space  # type: ignore[assignment]
    files.reserve_space = reserve_space  # type: ignore[assignment]
