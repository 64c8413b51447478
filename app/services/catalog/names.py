"""Closest names for an unknown one, so a 404 can say what the user probably meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_SUGGESTIONS = 3


def closest(name: str, candidates: Iterable[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to ``limit`` candidates closest to ``name``: those equal ignoring case first, then
    difflib's closest matches of the lower-cased names (ratio >= 0.6), then candidates whose
    part after the organisation (``org/``) equals or contains the name's."""
    pool = list(dict.fromkeys(str(c) for c in candidates))
    key = name.casefold()
    lowered: dict[str, list[str]] = {}
    for c in pool:
        lowered.setdefault(c.casefold(), []).append(c)
    out = list(lowered.get(key, []))
    for hit in difflib.get_close_matches(key, list(lowered), n=limit, cutoff=0.6):
        out.extend(lowered[hit])
    tail = key.rpartition("/")[2]
    if tail:
        out.extend(c for c in pool if tail in c.casefold().rpartition("/")[2])
    return list(dict.fromkeys(out))[:limit]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'A' or 'B'? (names are case-sensitive)"``, or ``""`` with no match."""
    found = closest(name, candidates)
    if not found:
        return ""
    listed = " or ".join(repr(c) for c in found)
    case = (
        " (names are case-sensitive)" if any(c.casefold() == name.casefold() for c in found) else ""
    )
    return f"; did you mean {listed}?{case}"
