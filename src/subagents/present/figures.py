"""Numbers told to people and models: money, token counts, elapsed time.

One formatter each, used by the command line, the MCP server, the notices and the live view,
so a cost reads the same everywhere and never as float noise (``0.000039999999999999996``
is ``$0.00004``). Standard library only.
"""

from __future__ import annotations

import math

# typing is not imported at run time: the supervisor's diagnostics use this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeGuard

SMALLEST = 1e-6  # a cost below this (but above 0) reads "<$0.000001"


def _cost_digits(amount: float) -> int:
    """Decimals that show ``amount`` (> 0) to people: cents from $0.10 up, else two
    significant digits."""
    if amount >= 0.1:
        return 2
    return 1 - math.floor(math.log10(amount))


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def money(cost: object, unknown: str = "-") -> str:
    """``$1.23``, ``$0.012``, ``$0.00004``, ``$0``; ``unknown`` when there is no cost."""
    if not _is_number(cost):
        return unknown
    amount = abs(float(cost))
    sign = "-" if cost < 0 else ""
    if amount == 0:
        return "$0"
    if amount < SMALLEST:
        return f"<{sign}${SMALLEST:.6f}"
    digits = _cost_digits(amount)
    text = f"{amount:.{digits}f}"
    if digits > 2:  # significant digits: no trailing zeros (0.0060 -> 0.006)
        text = text.rstrip("0").rstrip(".")
    return f"{sign}${text}"


def rounded_cost(cost: object) -> float | None:
    """The cost as a number rounded as :func:`money` shows it (for JSON meant for a model);
    None when there is none."""
    if not _is_number(cost):
        return None
    amount = abs(float(cost))
    if amount == 0:
        return 0.0
    digits = _cost_digits(max(amount, SMALLEST))
    return round(float(cost), digits)


def rounded_usage(usage: object) -> dict[str, object] | None:
    """A usage record (``input, output, cacheRead, cacheWrite, totalTokens, cost``) with its
    cost rounded; None for none."""
    if not isinstance(usage, dict):
        return None
    out = dict(usage)
    if "cost" in out:
        out["cost"] = rounded_cost(out["cost"])
    return out


def tokens(count: object) -> str:
    """``950``, ``1.2k``, ``12.3k``, ``123k``, ``1.2M``."""
    n = int(count) if _is_number(count) else 0
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


def elapsed(seconds: float | None) -> str:
    """``3.4s``, ``2m05s``, ``1h02m``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
