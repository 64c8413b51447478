"""How benchslice writes numbers, in one place: the CLI, the pages and the verdict sentences
all format through these functions (the written rule: docs/number-style.md).

* An accuracy (a level): percent, one decimal, ``35.0%``.
* A difference of accuracies (a gap, an MDAD): points, one decimal, ``2.2 pts``.
* A probability (P(same order), a threshold, power): two decimals, ``0.51``.
* A p-value: two significant digits (``0.53``, ``0.0031``), ``< 0.0001`` below that.
* A count: an integer with thousands separators, ``87,990``.
* An interval: ``[lo, hi]`` in the unit of its value; an answer with no sampling error is one
  value followed by ``(exact)``, never ``[x, x]``; an end that was not reached is written
  ``not reached``.
* A range of whole numbers (a rank interval): ``1-8``.
* A missing value: an en dash (U+2013).
"""

from __future__ import annotations

import math
from collections.abc import Callable

MISSING = "\u2013"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(float(x))


def pct(x: float | None, digits: int = 1) -> str:
    """An accuracy (a fraction) as a percentage: ``0.35 -> "35.0%"``."""
    return f"{100 * float(x):.{digits}f}%" if _finite(x) else MISSING


def pts(x: float | None, *, unit: bool = True, signed: bool = False) -> str:
    """A difference of accuracies in points: ``0.022 -> "2.2 pts"`` (``unit=False``: ``"2.2"``)."""
    if not _finite(x):
        return MISSING
    text = f"{100 * float(x):+.1f}" if signed else f"{100 * float(x):.1f}"
    return f"{text} pts" if unit else text


def prob(x: float | None) -> str:
    """A probability: ``0.5123 -> "0.51"``."""
    return f"{float(x):.2f}" if _finite(x) else MISSING


def p_value(x: float | None) -> str:
    """A p-value: ``0.5327 -> "0.53"``, ``0.00312 -> "0.0031"``, tiny ones ``"< 0.0001"``."""
    if not _finite(x):
        return MISSING
    x = float(x)
    if x < 1e-4:
        return "< 0.0001"
    return f"{x:.2g}" if x < 0.1 else f"{x:.2f}"


def p_equals(x: float | None) -> str:
    """``"p = 0.53"``, or ``"p < 0.0001"`` for tiny p-values."""
    text = p_value(x)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def count(n: int | None) -> str:
    """A count: ``87990 -> "87,990"``."""
    return MISSING if n is None else f"{int(n):,}"


def interval(lo: float | None, hi: float | None, fmt: Callable[[float | None], str] = pct) -> str:
    """``[lo, hi]``; one value with ``(exact)`` when both ends are the same number; an open
    upper end ``not reached``."""
    if not _finite(lo) and not _finite(hi):
        return MISSING
    if _finite(lo) and _finite(hi) and float(lo) == float(hi):
        return f"{fmt(lo)} (exact)"
    return f"[{fmt(lo)}, {fmt(hi) if _finite(hi) else 'not reached'}]"


def span(lo: int | None, hi: int | None) -> str:
    """A range of whole numbers (ranks): ``"1-8"``."""
    return MISSING if lo is None or hi is None else f"{lo}-{hi}"


def more(shown: int, total: int) -> str:
    """The tail of a truncated list: ``"… and 55 more"`` (empty when nothing is left out)."""
    return f"… and {total - shown} more" if total > shown else ""
