"""Pages of a leaderboard's pairwise table: cursor-paginated, filtered, never built whole.

A leaderboard of ``m`` models has ``m (m - 1) / 2`` pairs (12.5 million at 5,000 models, gigabytes
of JSON), so the table is served a page at a time: at most ``limit`` (<= ``MAX_PAIRS_PAGE``)
pairs per response, each computed from the stored matrix when the page is asked for
(:meth:`app.core.ranking.pair_table.BlockedPairTable.pairs`). Order: leaderboard order,
``model_a`` the one ranked higher; by ``model_a``'s position, then ``model_b``'s (the order of
the unpaginated table before issue 27).

Filters: ``tier`` keeps the pairs whose two models are both in that tier (the comparisons inside
a tier); ``significant`` keeps only the significant (``true``) or only the non-significant
(``false``) pairs. The leaderboard's own selection (``models``, ``match``, ``top``, ``subset``)
chooses the models, as for the leaderboard.

The cursor names the next pair and the leaderboard it belongs to (results stamp and query): a
cursor from another selection or an older state of the results is refused (422, field
``cursor``) rather than silently skipping or repeating pairs.

Cost per page: ``O(limit N)`` for the records. With ``significant``, one ``O(m N)``
matrix-vector product per row of the board scanned, and at most ``SCAN_PAIRS`` pairs scanned per
request: such a page can hold fewer than ``limit`` pairs; continue with ``next_cursor`` until it
is null.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

import numpy as np
import pydantic_core

from app.errors import InvalidInput
from app.schemas.leaderboards import LeaderboardFormat
from app.services.ranking.leaderboards import (
    ComputedLeaderboard,
    LeaderboardQuery,
    csv_bytes,
    markdown_bytes,
    records,
)

MAX_PAIRS_PAGE = 5_000
DEFAULT_PAIRS_PAGE = 1_000
SCAN_PAIRS = 4_000_000  # pairs examined per request under the significance filter


@dataclass(frozen=True)
class PairsFilter:
    """Which pairs of the board a page lists (None: no filter)."""

    tier: int | None = None
    significant: bool | None = None


@dataclass(frozen=True)
class PairsPage:
    """One page: the pairs as columns (``LeaderboardPairPublic`` fields) and the next cursor."""

    columns: dict[str, list]
    next_cursor: str | None


# --- cursors ------------------------------------------------------------------------------------


def _token(c: ComputedLeaderboard, query: LeaderboardQuery, flt: PairsFilter) -> str:
    state = repr((str(c.info.benchmark_version_id), c.stamp, query, flt))
    return hashlib.sha256(state.encode()).hexdigest()[:16]


def encode_cursor(token: str, pa: int, pb: int) -> str:
    """The cursor of the pair at board positions ``(pa, pb)`` of the board ``token`` names."""
    return base64.urlsafe_b64encode(f"{token}:{pa}:{pb}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, token: str, m: int) -> tuple[int, int]:
    """``(pa, pb)`` of a cursor from :func:`encode_cursor` for this board; 422 otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tok, pa, pb = raw.split(":")
        pa_i, pb_i = int(pa), int(pb)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(
            "invalid cursor", field="cursor", message="not a cursor returned by this API"
        ) from None
    if tok != token:
        raise InvalidInput(
            "this cursor belongs to another selection or to results that have changed since",
            field="cursor",
            message="stale cursor: start again without a cursor",
        )
    if not (0 <= pa_i < pb_i <= m):
        raise InvalidInput(
            "invalid cursor", field="cursor", message="not a cursor returned by this API"
        )
    return pa_i, pb_i


# --- enumeration --------------------------------------------------------------------------------


def _listed_pairs(
    keep: np.ndarray, start: tuple[int, int], limit: int
) -> tuple[np.ndarray, np.ndarray, tuple[int, int] | None]:
    """The first ``limit`` pairs ``p < q`` of the positions ``keep`` (sorted) from ``start`` on,
    and where the next page starts; vectorised (triangular indexing)."""
    k = keep.size
    rows = np.arange(k, dtype=np.int64)
    first = rows * k - rows * (rows + 1) // 2  # index of pair (i, i + 1) among all k(k-1)/2
    total = k * (k - 1) // 2
    pa, pb = start
    ia = int(np.searchsorted(keep, pa))
    if ia < k and keep[ia] == pa:
        jb = max(int(np.searchsorted(keep, pb)), ia + 1)
        at = int(first[ia]) + jb - ia - 1
    else:
        at = int(first[ia]) if ia < k else total
    idx = np.arange(at, min(total, at + limit), dtype=np.int64)
    i = np.searchsorted(first, idx, side="right") - 1
    j = idx - first[i] + i + 1
    nxt = None
    if at + limit < total:
        i_n = int(np.searchsorted(first, at + limit, side="right") - 1)
        nxt = (int(keep[i_n]), int(keep[at + limit - first[i_n] + i_n + 1]))
    return keep[i], keep[j], nxt


def _significance_scan(
    c: ComputedLeaderboard,
    keep: np.ndarray,
    want: bool,
    start: tuple[int, int],
    limit: int,
) -> tuple[np.ndarray, np.ndarray, tuple[int, int] | None]:
    """Pairs of ``keep`` whose significance is ``want``, row by row of the board (one
    matrix-vector product per row), from ``start`` on; at most ``SCAN_PAIRS`` pairs scanned."""
    order = c.board.rows.model  # board position -> input row
    out_a, out_b = [], []
    found = scanned = 0
    pa, pb = start
    for p in keep[np.searchsorted(keep, pa) :].tolist():
        lo = pb if p == pa else p + 1
        q = keep[np.searchsorted(keep, lo) :]
        if q.size:
            hit = q[c.board.table.significant_row(int(order[p]))[order[q]] == want]
            take = hit[: limit - found]
            out_a.append(np.full(take.size, p, dtype=np.int64))
            out_b.append(take)
            found += take.size
            scanned += q.size
            if take.size < hit.size:
                return np.concatenate(out_a), np.concatenate(out_b), (p, int(take[-1]) + 1)
        if found >= limit or scanned >= SCAN_PAIRS:
            nxt = keep[keep > p]
            tail = (int(nxt[0]), int(nxt[0]) + 1) if nxt.size > 1 else None
            return _cat(out_a), _cat(out_b), tail
    return _cat(out_a), _cat(out_b), None


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _columns(c: ComputedLeaderboard, pa: np.ndarray, pb: np.ndarray) -> dict[str, list]:
    """Records of the pairs at board positions ``pa < pb`` (``LeaderboardPairPublic`` fields,
    ``model_a`` the one ranked higher)."""
    order = c.board.rows.model
    first, second = order[pa], order[pb]
    swap = first > second  # the engine's records are of (lower, higher) input row
    p = c.board.table.pairs(np.minimum(first, second), np.maximum(first, second))
    return {
        "model_a": c.names[first].tolist(),
        "model_b": c.names[second].tolist(),
        "difference": np.where(swap, -p.difference, p.difference).tolist(),
        "ci_low": np.where(swap, -p.ci_high, p.ci_low).tolist(),
        "ci_high": np.where(swap, -p.ci_low, p.ci_high).tolist(),
        "p_value": p.p_value.tolist(),
        "p_adjusted": p.p_adjusted.tolist(),
        "p_better": np.where(swap, 1.0 - p.p_better, p.p_better).tolist(),
        "significant": p.significant.tolist(),
        "n10": np.where(swap, p.n01, p.n10).tolist(),
        "n01": np.where(swap, p.n10, p.n01).tolist(),
        "n_shared": p.n_shared.tolist(),
    }


def pairs_page(
    c: ComputedLeaderboard,
    query: LeaderboardQuery,
    flt: PairsFilter,
    *,
    limit: int = DEFAULT_PAIRS_PAGE,
    cursor: str | None = None,
) -> PairsPage:
    """One page of the board's pairwise table (module docstring)."""
    if not 1 <= limit <= MAX_PAIRS_PAGE:
        raise InvalidInput(
            f"limit must lie in [1, {MAX_PAIRS_PAGE}]",
            field="limit",
            message=f"in [1, {MAX_PAIRS_PAGE}]",
        )
    m = c.names.shape[0]
    token = _token(c, query, flt)
    start = (0, 1) if cursor is None else decode_cursor(cursor, token, m)
    keep = np.arange(m, dtype=np.int64)
    if flt.tier is not None:
        keep = np.flatnonzero(c.board.rows.tier == flt.tier)
    if flt.significant is None:
        pa, pb, nxt = _listed_pairs(keep, start, limit)
    else:
        pa, pb, nxt = _significance_scan(c, keep, flt.significant, start, limit)
    return PairsPage(
        columns=_columns(c, pa, pb),
        next_cursor=None if nxt is None else encode_cursor(token, *nxt),
    )


def render_page(c: ComputedLeaderboard, page: PairsPage, fmt: LeaderboardFormat) -> bytes:
    """A page as the bytes of :class:`LeaderboardPairsPublic` (JSON), CSV or Markdown."""
    if fmt == "csv":
        return csv_bytes(page.columns)
    if fmt == "markdown":
        note = f"More pairs: ?cursor={page.next_cursor}" if page.next_cursor else ""
        return markdown_bytes(c.info, page.columns, "Pairwise comparisons", note)
    body = c.info.model_dump(mode="json")
    body["n_pairs"] = int(c.board.table.n_pairs)
    body["n_significant"] = int(c.board.table.n_significant)
    body["pairs"] = records(page.columns)
    body["next_cursor"] = page.next_cursor
    return pydantic_core.to_json(body, inf_nan_mode="null")
