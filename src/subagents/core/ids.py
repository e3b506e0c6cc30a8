"""Run and job ids: sortable by creation time, unique, safe in a path, typeable by prefix."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _b32(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        out.append(_ALPHABET[n & 31])
        n >>= 5
    return "".join(reversed(out))


def new_id() -> str:
    """48 bits of milliseconds then 40 random bits: 18 characters, e.g. ``01jd5k8x2m-7qpt3zab``."""
    ms = time.time_ns() // 1_000_000
    return f"{_b32(ms, 10)}-{_b32(int.from_bytes(os.urandom(5), 'big'), 8)}"


def is_valid_id_prefix(text: str) -> bool:
    return bool(text) and len(text) <= 19 and all(c in _ALPHABET or c == "-" for c in text)
