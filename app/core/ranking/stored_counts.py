"""Stored pairwise counts of a leaderboard, updated row and column by row and column (issue 27).

The exact leaderboard tests (:func:`app.core.ranking.leaderboard.leaderboard`, ``"items"``
population) read from every pair only its discordant counts ``n10`` and ``n01``, and with a
coverage mask the items the pair shares. :class:`PairCounts` holds them for ``m`` models as
``m x m`` matrices of the smallest unsigned dtype that fits ``N`` (``n10[i, j]``: items ``i``
got right and ``j`` wrong, on the items both have; ``n01 = n10ᵀ``), plus ``n11`` and the shared
counts only when there is a coverage mask (without one ``n11 = s_i - n10`` and the shared count
is ``N``), and per model the items it has and got right.

* :func:`pair_counts`: every pair from row-block products, time ``O(m² N)``, memory the
  matrices (``m² b`` bytes each, ``b`` = 1 for ``N < 256``, else 2) plus one block;
* :func:`update_pair_counts`: the counts after ``k`` models were added, replaced or removed,
  copying the unchanged ``(m - k)²`` block and computing the ``k`` new rows and columns, time
  ``O(k m N + m²)`` (the ``m²`` is a memory copy);
* :func:`counts_source`: the source a :class:`~app.core.ranking.pair_table.BlockedPairTable`
  reads instead of matrix products, so the leaderboard from stored counts costs ``O(m²)``
  vector work (:func:`app.core.ranking.leaderboard.leaderboard_from_counts`).

Counts are integers, so a table built from stored counts gives bit for bit the same tests, ranks
and tiers as one built from the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from app.core.ranking import leaderboard as lb
from app.core.ranking.pair_table import BLOCK_PAIRS

__all__ = [
    "PairCounts",
    "count_dtype",
    "counts_source",
    "leaderboard_from_counts",
    "pair_counts",
    "update_pair_counts",
]

BLOCK_VALUES = 2**24  # product entries per block of rows (float32: 64 MB)


def count_dtype(n_items: int) -> np.dtype:
    """The smallest unsigned dtype holding counts ``0 .. n_items``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if n_items <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.uint64)


@dataclass(frozen=True)
class PairCounts:
    """Pairwise counts of ``m`` models on ``N`` items.

    Attributes
    ----------
    n10 : ndarray, shape (m, m)
        ``n10[i, j]``: items both have that ``i`` got right and ``j`` wrong (``n01 = n10ᵀ``);
        diagonal 0.
    n11, shared : ndarray, shape (m, m), or None
        Items both got right / both have; ``None`` without a coverage mask (then ``n11 = s_i -
        n10`` and ``shared = N``).
    n_own, k_own : ndarray of int64, shape (m,)
        Items each model has, and got right.
    n_items : int
        ``N``.
    """

    n10: np.ndarray
    n11: np.ndarray | None
    shared: np.ndarray | None
    n_own: np.ndarray
    k_own: np.ndarray
    n_items: int

    @property
    def masked(self) -> bool:
        return self.shared is not None

    def take(self, rows: np.ndarray) -> PairCounts:
        """The counts of the models ``rows`` (in that order): ``O(len(rows)²)``."""
        return PairCounts(
            _square(self.n10, rows),
            None if self.n11 is None else _square(self.n11, rows),
            None if self.shared is None else _square(self.shared, rows),
            self.n_own[rows],
            self.k_own[rows],
            self.n_items,
        )


def _square(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``a[np.ix_(rows, rows)]`` as two gathers (several times faster at this size)."""
    return np.take(np.take(a, rows, axis=0), rows, axis=1)


def _prepare(correct, coverage):
    c = np.asarray(correct)
    mk = None if coverage is None else np.asarray(coverage, dtype=bool)
    if mk is not None and mk.all():
        mk = None  # as the engine: a full mask is no mask
    y = (c == 1).astype(np.float32)
    if mk is not None:
        y *= mk
    return y, (None if mk is None else mk.astype(np.float32))


def _products(y_rows, mk_rows, y, mk, dt):
    """``(n10, n11, shared)`` of the rows ``y_rows`` against all rows ``y`` (``n11``/``shared``
    ``None`` without a mask): exact integer counts (float32 sums below 2**24)."""
    n11 = y_rows @ y.T
    if mk is None:
        n10 = y_rows.sum(axis=1, keepdims=True) - n11
        return np.rint(n10).astype(dt), None, None
    n10 = y_rows @ mk.T - n11
    shared = mk_rows @ mk.T
    return np.rint(n10).astype(dt), np.rint(n11).astype(dt), np.rint(shared).astype(dt)


def _own(y, mk, n):
    k_own = np.rint(y.sum(axis=1, dtype=np.float64)).astype(np.int64)
    if mk is None:
        return np.full(y.shape[0], n, dtype=np.int64), k_own
    return np.rint(mk.sum(axis=1, dtype=np.float64)).astype(np.int64), k_own


def pair_counts(correct, coverage=None) -> PairCounts:
    """Every pair's counts, from row-block products.

    Parameters
    ----------
    correct : array_like, shape (m, n)
        Results; 1 counts as correct, anything else as wrong.
    coverage : array_like of bool, shape (m, n), optional
        Which results exist (``None``: all).

    Returns
    -------
    PairCounts
    """
    y, mk = _prepare(correct, coverage)
    m, n = y.shape
    dt = count_dtype(n)
    n10 = np.empty((m, m), dtype=dt)
    n11 = None if mk is None else np.empty((m, m), dtype=dt)
    shared = None if mk is None else np.empty((m, m), dtype=dt)
    step = max(1, BLOCK_VALUES // max(1, m))
    for r0 in range(0, m, step):  # blocks of rows, not models: bounded memory
        r1 = min(m, r0 + step)
        a, b, c = _products(y[r0:r1], None if mk is None else mk[r0:r1], y, mk, dt)
        n10[r0:r1] = a
        if mk is not None:
            n11[r0:r1], shared[r0:r1] = b, c
    n_own, k_own = _own(y, mk, n)
    return PairCounts(n10, n11, shared, n_own, k_own, n)


def update_pair_counts(
    old: PairCounts, keep_old, keep_new, correct, coverage=None
) -> tuple[PairCounts, np.ndarray]:
    """The counts of a new matrix from those of an old one sharing some unchanged models.

    Parameters
    ----------
    old : PairCounts
        Counts of the old matrix.
    keep_old, keep_new : array_like of int, shape (u,)
        Unchanged models: old row ``keep_old[i]`` is new row ``keep_new[i]`` (same results).
    correct, coverage
        The new matrix, as :func:`pair_counts`.

    Returns
    -------
    counts : PairCounts
        Equal to ``pair_counts(correct, coverage)``.
    changed : ndarray of int64
        The new rows computed (added or replaced models).

    Notes
    -----
    Time ``O(k m N)`` for the ``k`` changed rows and columns plus the ``O(m²)`` copy of the
    unchanged block; memory the new matrices plus ``k x m`` products.
    """
    y, mk = _prepare(correct, coverage)
    m, n = y.shape
    if n != old.n_items or (mk is not None) != old.masked:
        raise ValueError("old counts: another item count or coverage kind; compute them all")
    keep_old = np.asarray(keep_old, dtype=np.int64)
    keep_new = np.asarray(keep_new, dtype=np.int64)
    dt = old.n10.dtype
    fresh = np.ones(m, dtype=bool)
    fresh[keep_new] = False
    changed = np.flatnonzero(fresh)
    n_own, k_own = _own(y, mk, n)
    mats = [old.n10] if mk is None else [old.n10, old.n11, old.shared]
    if old.n10.shape[0]:
        src = np.zeros(m, dtype=np.int64)  # new row -> old row (changed rows: overwritten)
        src[keep_new] = keep_old
        out = [_square(prev, src) for prev in mats]
    else:
        out = [np.zeros((m, m), dtype=dt) for _ in mats]
    if changed.size:
        mk_c = None if mk is None else mk[changed]
        rows = _products(y[changed], mk_c, y, mk, dt)  # changed rows against every model
        if mk is None:
            n11_cols = y @ y[changed].T  # every model against the changed ones
            cols = (np.rint(y.sum(axis=1, keepdims=True) - n11_cols).astype(dt),)
        else:
            n11_cols = y @ y[changed].T
            cols = (
                np.rint(y @ mk_c.T - n11_cols).astype(dt),
                np.rint(n11_cols).astype(dt),
                np.rint(mk @ mk_c.T).astype(dt),
            )
        for new, r, c in zip(out, rows, cols, strict=False):
            new[changed] = r
            new[:, changed] = c
    if mk is None:
        return PairCounts(out[0], None, None, n_own, k_own, n), changed
    return PairCounts(out[0], out[1], out[2], n_own, k_own, n), changed


class _CountsSource:
    """Stored counts in the interface :class:`~app.core.ranking.pair_table.BlockedPairTable`
    reads (``_Products``'s). Without a mask the rows are stored by decreasing number correct,
    as ``_Products`` does: for stored ``i < j``, ``n01 = n10 - (s_i - s_j)``, so a block's codes
    come from its own rows of ``n10`` (no transposed reads) and row ``i`` is the better model.
    With a mask rows stay in input order and every block also returns the directions and
    shared counts."""

    def __init__(self, counts: PairCounts) -> None:
        m = int(counts.n10.shape[0])
        self.sorted_rows = counts.shared is None
        self.perm = np.argsort(-counts.k_own, kind="stable") if self.sorted_rows else None
        self.c = counts if self.perm is None else counts.take(self.perm)
        self.s = self.c.k_own.astype(np.int32)
        self.m = m
        self.n = counts.n_items
        self.width = self.n // 2 + 1  # BlockedPairTable's cell-code width
        self.inv = np.arange(m)
        if self.perm is not None:
            self.inv[self.perm] = np.arange(m)
        self.mk = counts.shared  # not None only with a mask
        n_codes = (self.n + 1) * self.width
        self.code_dtype = (
            np.uint16 if n_codes <= 2**16 else np.int32 if n_codes < 2**31 else np.int64
        )

    def codes(self, r0: int, r1: int):
        wide = np.int64 if self.code_dtype == np.int64 else np.int32
        n10 = self.c.n10[r0:r1, r0:].astype(wide)
        if self.sorted_rows:  # entries j <= i come out meaningless: the table clears them
            d = self.s[r0:r1, None] - self.s[None, r0:]  # s_i - s_j = n10 - n01
            code = (2 * n10 - d) * self.width + (n10 - d)
            return code.astype(self.code_dtype), None
        n01 = self.c.n10[r0:, r0:r1].T.astype(wide)
        code = (n10 + n01).astype(wide) * self.width + np.minimum(n10, n01)
        shared = self.c.shared[r0:r1, r0:].astype(np.int32)
        return code.astype(self.code_dtype, copy=False), (n10 > n01, n01 > n10, shared)

    def row(self, i: int):
        return self.c.n10[i].astype(np.int64), self.c.n10[:, i].astype(np.int64)

    def elementwise(self, a: np.ndarray, b: np.ndarray):
        c = self.c
        n10 = c.n10[a, b].astype(np.int64)
        n01 = c.n10[b, a].astype(np.int64)
        if c.shared is None:
            n11 = c.k_own[a] - n10
            shared = np.full(a.shape, self.n, dtype=np.int64)
        else:
            n11 = c.n11[a, b].astype(np.int64)
            shared = c.shared[a, b].astype(np.int64)
        return n11, n10, n01, shared - n11 - n10 - n01, shared

    def blocks(self):
        r0 = 0
        while r0 < self.m - 1:
            r1 = min(self.m - 1, r0 + max(1, BLOCK_PAIRS // max(1, self.m - r0)))
            yield r0, r1
            r0 = r1


def counts_source(counts: PairCounts) -> _CountsSource:
    """What a :class:`~app.core.ranking.pair_table.BlockedPairTable` reads from stored counts."""
    return _CountsSource(counts)


def leaderboard_from_counts(
    counts: PairCounts, *, alpha: float = 0.05, correction: str = "holm", mid_p: bool = False
):
    """The ``"items"`` leaderboard of :func:`app.core.ranking.leaderboard.leaderboard` from
    stored pairwise counts instead of the results matrix.

    Parameters
    ----------
    counts : PairCounts
        The models' counts (:func:`pair_counts` or :func:`update_pair_counts`), in input order.
    alpha, correction, mid_p
        As :func:`~app.core.ranking.leaderboard.leaderboard`.

    Returns
    -------
    Leaderboard
        Equal to ``leaderboard(correct, coverage=coverage, ...)`` of the matrix the counts were
        computed from (same rows, tests, ranks and tiers; pairs' records on demand from the
        counts).

    Notes
    -----
    Time ``O(m²)`` vector work (cell codes, the grouped multiplicity step, per-model orderings)
    plus ``O(m)`` per tier head; memory the counts plus one block of ``BLOCK_PAIRS`` pairs.
    """
    alpha = lb.check_alpha(alpha)
    if correction not in lb.CORRECTIONS:
        raise ValueError(f"correction: expected one of {lb.CORRECTIONS}, got {correction!r}")
    if np.any(counts.n_own == 0):
        raise ValueError("coverage: every model needs at least one item")
    z = float(_st.norm.ppf(1.0 - alpha / 2.0))
    acc = counts.k_own.astype(np.float64) / counts.n_own
    lo_acc, hi_acc = lb.wilson(acc, counts.n_own, z)
    p_of, p_better_of = lb.items_tests(mid_p)
    table = lb.BlockedPairTable(
        None, None, p_of, p_better_of, 1.0, alpha, correction, z, source=_CountsSource(counts)
    )
    return lb.assemble_board(
        acc, lo_acc, hi_acc, counts.n_own, table, masked=counts.masked, alpha=alpha,
        correction=correction, population="items", design="full", mid_p=mid_p,
        n_items=counts.n_items, n_population=None,
    )  # fmt: skip
