"""The pairwise table of a leaderboard in row blocks: memory ``O(m N)`` plus a bounded block.

A leaderboard of ``m`` models has ``m (m - 1) / 2`` pairs; the rows (ranks, rank intervals,
tiers) need from them only which pairs are significant and in which direction. For the exact
designs (``"items"``: McNemar; ``"benchmark"`` uniform or full: the conditional hypergeometric
test) a pair's p-value depends on its discordant cell alone, ``(k, lo) = (n10 + n01,
min(n10, n01))``, so the multiplicity step (Holm or Benjamini-Hochberg) needs only how many pairs
fall in each cell, not every pair's p-value:

1. pass 1 counts the pairs of each cell, ``BLOCK_PAIRS`` pairs at a time (``n11 = Y Yᵀ`` of a
   block of rows against the rows below it, in float32, exact);
2. the corrected p-value of every observed cell follows from the sorted distinct p-values and
   their multiplicities (:func:`adjust_grouped`, equal to :func:`adjust_pvalues` pair by pair);
3. pass 2 recomputes the blocks (or, without a coverage mask, reads pass 1's cell codes when
   they fit in ``PASS_CACHE_BYTES``: 2 or 4 bytes a pair) and counts, per model, the models
   significantly better and worse (rank intervals); a tier head's row of orderings is one
   matrix-vector product.

Any pair's full record (difference, interval, p-values, P(better)) is computed on demand from
the stored matrix (:meth:`BlockedPairTable.pairs`), so pages of the pairwise table cost what
they show. Memory: the float32 matrix (``4 m N`` bytes), the cell histogram (at most
``(N + 1)(N / 2 + 1)`` counts; observed cells only when that is large), one block of
``BLOCK_PAIRS`` pairs (tens of MB) and the kept codes (at most ``PASS_CACHE_BYTES``); time
``O(m² N)`` for the products (once when the codes are kept, else twice) plus ``O(m²)`` for the
cell look-ups. The weighted design's p-values are continuous, so
:class:`DensePairTable` keeps every pair (``O(m²)``; subsets only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from app.core.ranking.pairwise import newcombe

__all__ = [
    "BLOCK_PAIRS",
    "BlockedPairTable",
    "DensePairTable",
    "LeaderboardPairs",
    "adjust_grouped",
]

BLOCK_PAIRS = 2**21  # pairs per working block: ~20 bytes each across the block's arrays
GATHER_VALUES = 2**23  # row values gathered at once for explicitly listed pairs
PASS_CACHE_BYTES = 2**28  # pass 1's cell codes kept for pass 2 (no mask) up to this size
DENSE_CELLS = 2**22  # cell histograms up to this size are dense arrays (N up to ~2,900)
_EXACT_F32 = 2**24  # integer sums below this are exact in float32 accumulation


def _frozen(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class LeaderboardPairs:
    """One row per pair ``a < b`` (input row positions).

    Attributes
    ----------
    a, b : ndarray of int64, shape (k,)
    n10, n01, n_shared : ndarray of int64
        Items only ``a`` / only ``b`` got right, and items both have (on the subset in subset
        mode).
    difference, ci_low, ci_high : ndarray of float64
        Estimated accuracy difference ``a - b`` (on the shared items; of the full benchmark in
        ``"benchmark"`` mode) and its interval at level ``1 - alpha`` (unadjusted). NaN where
        the pair shares no items.
    p_value, p_adjusted : ndarray of float64
        Two-sided p-value of ``H0: no difference`` and its multiplicity-adjusted value.
    p_better : ndarray of float64
        Probability that ``a`` is better than ``b`` (see :func:`app.core.ranking.leaderboard.leaderboard`).
    significant : ndarray of bool
        ``p_adjusted <= alpha``.
    """

    a: np.ndarray
    b: np.ndarray
    n10: np.ndarray
    n01: np.ndarray
    n_shared: np.ndarray
    difference: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray
    p_adjusted: np.ndarray
    p_better: np.ndarray
    significant: np.ndarray

    def frozen(self) -> LeaderboardPairs:
        return LeaderboardPairs(**{k: _frozen(v) for k, v in self.__dict__.items()})


def adjust_grouped(values, counts, correction: str) -> np.ndarray:
    """Holm or Benjamini-Hochberg adjusted p-values of tied groups of p-values.

    Parameters
    ----------
    values : array_like of float, shape (g,)
        Distinct p-values, increasing.
    counts : array_like of int, shape (g,)
        How many tests have each p-value (positive).
    correction : {"holm", "bh", "none"}

    Returns
    -------
    ndarray of float64, shape (g,)
        The adjusted p-value every test of the group gets: equal, bit for bit, to
        :func:`app.core.ranking.pairwise.adjust_pvalues` of the ``Σ counts`` p-values.

    Notes
    -----
    With ``C_j`` the cumulative count through group ``j`` and ``k = C_g``: in the stable sort of
    all p-values the group occupies positions ``C_{j-1} + 1 .. C_j``. Holm's factor
    ``k - i + 1`` is largest at the group's first position and its running maximum is therefore
    ``max_{l<=j} min(1, (k - C_{l-1}) v_l)`` for every member; BH's ``k v / i`` is smallest at
    the group's last position, giving ``min_{l>=j} min(1, k v_l / C_l)``. Both are the same
    floating-point expressions as the per-test step, so the results are identical.
    """
    v = np.asarray(values, dtype=np.float64)
    c = np.asarray(counts, dtype=np.int64)
    if correction == "none" or v.size == 0:
        return v.copy()
    cum = np.cumsum(c)
    k = int(cum[-1])
    if correction == "holm":
        return np.maximum.accumulate(np.minimum(1.0, (k - (cum - c)) * v))
    return np.minimum.accumulate(np.minimum(1.0, k * v / cum)[::-1])[::-1]


# ---------------------------------------------------------------------------------------------
# the prepared matrix
# ---------------------------------------------------------------------------------------------
class _Products:
    """The 0/1 matrix in the dtype of its products, with its coverage mask and row sums.

    Without a mask the rows are stored by decreasing number correct (``perm``), so that for
    every stored pair ``i < j``: ``lo = min(n10, n01) = s_j - n11`` and ``k = s_i + s_j -
    2 n11``; a block's cell codes are then ``W s_i + (W + 1) s_j - (2 W + 1) n11`` (``W`` the
    code width) straight from the product, and a significant pair's better model is row ``i``
    (``s_i = s_j`` means ``n10 = n01``, p = 1).
    """

    def __init__(self, correct: np.ndarray, mask: np.ndarray | None, width: int) -> None:
        m, n = correct.shape
        self.m, self.n, self.width = m, n, width
        self.sorted_rows = mask is None  # blocks return no directions: row i is the better
        self.dtype = np.float32 if n < _EXACT_F32 else np.float64
        if mask is None:
            s = np.count_nonzero(correct == 1, axis=1).astype(np.int64)
            self.perm = np.argsort(-s, kind="stable")
        else:
            self.perm = np.arange(m)
        self.inv = np.empty(m, dtype=np.int64)
        self.inv[self.perm] = np.arange(m)
        y = correct[self.perm].astype(self.dtype)
        if mask is not None:
            y *= mask
        self.y = y
        self.mk = None if mask is None else mask.astype(self.dtype)
        self.s = np.rint(y.sum(axis=1, dtype=np.float64)).astype(np.int64)
        n_codes = (n + 1) * width
        self.code_dtype = (
            np.uint16 if n_codes <= 2**16 else np.int32 if n_codes < 2**31 else np.int64
        )
        # W s_i + (W + 1) s_j and (2 W + 1) n11 below 2**24: codes exact in float32
        self.f32_codes = self.dtype == np.float32 and (4 * width + 2) * n < _EXACT_F32

    def codes(self, r0: int, r1: int):
        """Cell codes of rows ``r0:r1`` against rows ``r0:`` (stored order) and, with a mask,
        ``(n10 > n01, n01 > n10, n_shared)``; ``None`` for those without a mask."""
        y, mk, s, w = self.y, self.mk, self.s, self.width
        prod = y[r0:r1] @ y[r0:].T
        if mk is None:
            if self.f32_codes:
                prod *= -(2 * w + 1)
                prod += (w * s[r0:r1]).astype(self.dtype)[:, None]
                prod += ((w + 1) * s[r0:]).astype(self.dtype)[None, :]
                return prod.astype(self.code_dtype), None
            n11 = np.rint(prod).astype(np.int64)
            code = w * s[r0:r1, None] + (w + 1) * s[None, r0:] - (2 * w + 1) * n11
            return code.astype(self.code_dtype), None
        n11 = np.rint(prod).astype(np.int32)
        del prod
        n10 = np.rint(y[r0:r1] @ mk[r0:].T).astype(np.int32) - n11
        n01 = np.rint(mk[r0:r1] @ y[r0:].T).astype(np.int32) - n11
        shared = np.rint(mk[r0:r1] @ mk[r0:].T).astype(np.int32)
        wide = np.int64 if self.code_dtype == np.int64 else np.int32  # (n + 1) w fits
        code = (n10 + n01).astype(wide) * w + np.minimum(n10, n01)
        return code.astype(self.code_dtype, copy=False), (n10 > n01, n01 > n10, shared)

    def row(self, i: int):
        """``(n10, n01)`` of stored row ``i`` against every stored row."""
        y, mk = self.y, self.mk
        n11 = np.rint(y @ y[i]).astype(np.int64)
        if mk is None:
            return self.s[i] - n11, self.s - n11
        n10 = np.rint(mk @ y[i]).astype(np.int64) - n11
        return n10, np.rint(y @ mk[i]).astype(np.int64) - n11

    def elementwise(self, a: np.ndarray, b: np.ndarray):
        """``(n11, n10, n01, n00, n_shared)`` of the stored pairs ``(a[i], b[i])`` as int64."""
        y, mk = self.y, self.mk
        n11 = np.rint(np.einsum("ij,ij->i", y[a], y[b])).astype(np.int64)
        if mk is None:
            n10 = self.s[a] - n11
            n01 = self.s[b] - n11
            shared = np.full(a.shape, self.n, dtype=np.int64)
        else:
            n10 = np.rint(np.einsum("ij,ij->i", y[a], mk[b])).astype(np.int64) - n11
            n01 = np.rint(np.einsum("ij,ij->i", mk[a], y[b])).astype(np.int64) - n11
            shared = np.rint(np.einsum("ij,ij->i", mk[a], mk[b])).astype(np.int64)
        return n11, n10, n01, shared - n11 - n10 - n01, shared

    def blocks(self) -> Iterator[tuple[int, int]]:
        """Row blocks ``[r0, r1)`` of about ``BLOCK_PAIRS`` upper-triangle pairs each."""
        r0 = 0
        while r0 < self.m - 1:
            r1 = min(self.m - 1, r0 + max(1, BLOCK_PAIRS // max(1, self.m - r0)))
            yield r0, r1
            r0 = r1


# ---------------------------------------------------------------------------------------------
# the table for the exact designs
# ---------------------------------------------------------------------------------------------
class BlockedPairTable:
    """Significance of every pair of an exact design, from the cell histogram.

    Parameters
    ----------
    correct : ndarray, shape (m, n)
        Validated 0/1 results.
    mask : ndarray of bool or None
        Validated coverage mask.
    p_of : callable
        ``p_of(n10, n01) -> p-values`` (elementwise; a function of ``(n10 + n01,
        min(n10, n01))`` only).
    p_better_of : callable
        ``p_better_of(n10, n01) -> P(a better)`` (elementwise).
    factor : float
        Sample-size factor of the Newcombe interval's Wilson components.
    alpha, correction, z
        Level, multiplicity correction and normal quantile of the intervals.
    source : optional
        Where the counts come from instead of products of ``correct``: stored counts
        (:func:`app.core.ranking.stored_counts.counts_source`; ``correct`` and ``mask`` are then
        unused).
    """

    def __init__(
        self,
        correct: np.ndarray,
        mask: np.ndarray | None,
        p_of: Callable,
        p_better_of: Callable,
        factor: float,
        alpha: float,
        correction: str,
        z: float,
        source=None,
    ) -> None:
        n = correct.shape[1] if source is None else source.n
        self._width = n // 2 + 1  # cell code = k * width + lo, k in [0, n], lo in [0, n // 2]
        self._x = _Products(correct, mask, self._width) if source is None else source
        self._p_of, self._p_better_of = p_of, p_better_of
        self._factor, self._z = factor, z
        self.alpha, self.correction = alpha, correction
        self._dense = (n + 1) * self._width <= DENSE_CELLS
        self.n_pairs = self._x.m * (self._x.m - 1) // 2
        self.unshared_pairs = _frozen(self._count_cells())
        self._settle()

    # -- pass 1: the histogram of cells ----------------------------------------------------
    def _codes(self, r0: int, r1: int):
        """The block's codes with ``j <= i`` set to 0 (a never-significant cell), the mask
        extras and how many entries were so cleared."""
        code, extra = self._x.codes(r0, r1)
        b = r1 - r0
        code[:, :b][np.tri(b, b, 0, dtype=bool)] = 0
        return code, extra, b * (b + 1) // 2

    def _count_cells(self) -> np.ndarray:
        unshared = []
        hist = np.zeros((self._x.n + 1) * self._width if self._dense else 0, dtype=np.int64)
        parts_codes, parts_counts = [], []
        size = self.n_pairs * np.dtype(self._x.code_dtype).itemsize
        self._kept = [] if self._x.sorted_rows and size <= PASS_CACHE_BYTES else None
        for r0, r1 in self._x.blocks():
            code, extra, cleared = self._codes(r0, r1)
            if self._kept is not None:
                self._kept.append(code)
            if extra is not None:
                i, j = np.nonzero(np.triu(extra[2] == 0, 1))
                unshared.append(np.column_stack([i + r0, j + r0]))
            if self._dense:
                hist += np.bincount(code.ravel(), minlength=hist.size)
                hist[0] -= cleared
            else:
                u, cnt = np.unique(code, return_counts=True)
                cnt[0] -= cleared if u[0] == 0 else 0
                parts_codes.append(u)
                parts_counts.append(cnt)
        if self._dense:
            codes = np.flatnonzero(hist)
            counts = hist[codes]
        else:
            codes, inv = np.unique(np.concatenate(parts_codes), return_inverse=True)
            counts = np.bincount(inv, weights=np.concatenate(parts_counts))
            counts = np.rint(counts).astype(np.int64)
            codes, counts = codes[counts > 0], counts[counts > 0]
        self._codes_seen = codes.astype(np.int64)
        self._code_counts = counts
        if not unshared:
            return np.zeros((0, 2), dtype=np.int64)
        pairs = np.concatenate(unshared).astype(np.int64)  # stored = input order with a mask
        return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]

    # -- the multiplicity step ---------------------------------------------------------------
    def _settle(self) -> None:
        k, lo = np.divmod(self._codes_seen, self._width)
        p = np.asarray(self._p_of(lo, k - lo), dtype=np.float64)
        values, group = np.unique(p, return_inverse=True)
        counts = np.bincount(group, weights=self._code_counts, minlength=values.size)
        adjusted = adjust_grouped(values, np.rint(counts).astype(np.int64), self.correction)
        self._p_values, self._p_adjusted = values, adjusted
        sig = adjusted[group] <= self.alpha
        self.n_significant = int(self._code_counts[sig].sum())
        if self._dense:
            table = np.zeros((self._x.n + 1) * self._width, dtype=bool)
            table[self._codes_seen[sig]] = True
            self._sig_lookup = table.__getitem__
        else:
            seen, sig_seen = self._codes_seen, sig

            def lookup(code):
                pos = np.minimum(np.searchsorted(seen, code), seen.size - 1)
                return sig_seen[pos] & (seen[pos] == code)

            self._sig_lookup = lookup

    # -- pass 2: orderings per model ------------------------------------------------------------
    def order_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """``(n_better_than, n_worse_than)`` per model (input order): how many models are
        significantly better than it, and how many it is significantly better than."""
        m = self._x.m
        beaten = np.zeros(m, dtype=np.int64)
        beats = np.zeros(m, dtype=np.int64)
        kept, self._kept = self._kept, None  # pass 2 only: free them after it
        if self.n_significant:
            for b, (r0, r1) in enumerate(self._x.blocks()):
                code, extra = (kept[b], None) if kept is not None else self._codes(r0, r1)[:2]
                sig = self._sig_lookup(code)  # code 0 (j <= i) is never significant
                if extra is None:  # stored by decreasing s: the row model is the better one
                    beats[r0:r1] += np.count_nonzero(sig, axis=1)
                    beaten[r0:] += np.count_nonzero(sig, axis=0)
                    continue
                row_up, col_up = sig & extra[0], sig & extra[1]
                beats[r0:r1] += np.count_nonzero(row_up, axis=1)
                beaten[r0:] += np.count_nonzero(row_up, axis=0)
                beats[r0:] += np.count_nonzero(col_up, axis=0)
                beaten[r0:r1] += np.count_nonzero(col_up, axis=1)
        return beaten[self._x.inv], beats[self._x.inv]

    def _row(self, i: int, direction: bool) -> np.ndarray:
        x = self._x
        ip = int(x.inv[i])
        n10, n01 = x.row(ip)
        code = (n10 + n01) * self._width + np.minimum(n10, n01)
        out = self._sig_lookup(code.astype(x.code_dtype))
        if direction:
            out &= n10 > n01
        out[ip] = False
        return out[x.inv]

    def better_row(self, i: int) -> np.ndarray:
        """``better[i, :]`` (input order): the models model ``i`` is significantly better
        than. One matrix-vector product, ``O(m N)``."""
        return self._row(i, True)

    def significant_row(self, i: int) -> np.ndarray:
        """Which models differ significantly from model ``i`` (input order), ``O(m N)``."""
        return self._row(i, False)

    # -- any pairs' records ------------------------------------------------------------------
    def adjusted_of(self, p: np.ndarray) -> np.ndarray:
        """The adjusted p-value of p-values this table produced (exact look-up)."""
        pos = np.searchsorted(self._p_values, p)
        return self._p_adjusted[np.minimum(pos, self._p_values.size - 1)]

    def pairs(self, a, b) -> LeaderboardPairs:
        """The full records of the pairs ``(a[i], b[i])`` (input rows, ``a[i] < b[i]``),
        computed in chunks of bounded memory."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        step = max(1, GATHER_VALUES // max(1, 4 * self._x.n))
        parts = [self._pairs(a[s : s + step], b[s : s + step]) for s in range(0, a.size, step)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return self._pairs(a, b)
        fields = LeaderboardPairs.__dataclass_fields__
        return LeaderboardPairs(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))

    def _pairs(self, a: np.ndarray, b: np.ndarray) -> LeaderboardPairs:
        n11, n10, n01, n00, shared = self._x.elementwise(self._x.inv[a], self._x.inv[b])
        p_value = np.asarray(self._p_of(n10, n01), dtype=np.float64)
        p_better = np.asarray(self._p_better_of(n10, n01), dtype=np.float64)
        diff, ci_lo, ci_hi = newcombe(n11, n10, n01, n00, self._factor, self._z)
        unshared = shared == 0
        if unshared.any():
            diff = np.where(unshared, np.nan, diff)
            ci_lo = np.where(unshared, np.nan, ci_lo)
            ci_hi = np.where(unshared, np.nan, ci_hi)
            p_value = np.where(unshared, 1.0, p_value)
            p_better = np.where(unshared, 0.5, p_better)
        p_adj = self.adjusted_of(p_value)
        return LeaderboardPairs(
            a, b, n10, n01, shared, diff, ci_lo, ci_hi, p_value, p_adj, p_better,
            p_adj <= self.alpha,
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the table of the weighted design
# ---------------------------------------------------------------------------------------------
class DensePairTable:
    """Every pair's record held at once (the weighted design's continuous p-values)."""

    def __init__(self, full: LeaderboardPairs, m: int, alpha: float, correction: str):
        self._full, self._m = full, m
        self.alpha, self.correction = alpha, correction
        self.n_pairs = int(full.a.size)
        self.n_significant = int(full.significant.sum())
        self.unshared_pairs = _frozen(np.zeros((0, 2), dtype=np.int64))
        sig, dif = full.significant, full.difference
        up, down = sig & (dif > 0), sig & (dif < 0)
        self._better_ab = (full.a[up], full.b[up])
        self._better_ba = (full.b[down], full.a[down])

    def order_counts(self) -> tuple[np.ndarray, np.ndarray]:
        m = self._m
        winners = np.r_[self._better_ab[0], self._better_ba[0]]
        losers = np.r_[self._better_ab[1], self._better_ba[1]]
        return np.bincount(losers, minlength=m), np.bincount(winners, minlength=m)

    def better_row(self, i: int) -> np.ndarray:
        out = np.zeros(self._m, dtype=bool)
        for w, lose in (self._better_ab, self._better_ba):
            out[lose[w == i]] = True
        return out

    def significant_row(self, i: int) -> np.ndarray:
        out = self.better_row(i)
        for w, lose in (self._better_ab, self._better_ba):
            out[w[lose == i]] = True
        return out

    def pairs(self, a, b) -> LeaderboardPairs:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        m = self._m
        k = a * m - a * (a + 1) // 2 + (b - a - 1)  # position in np.triu_indices(m, 1) order
        return LeaderboardPairs(
            *(getattr(self._full, f)[k] for f in LeaderboardPairs.__dataclass_fields__)
        )
