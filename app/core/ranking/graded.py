"""Leaderboards of graded scores (in [0, 1], not 0/1; issue 35): paired t-tests from one Gram matrix.

McNemar's test and the exact hypergeometric test need 0/1 results. For scores in [0, 1] the pair
``(a, b)`` is compared by the paired t-test of ``d_i = y_ai - y_bi`` over the ``n`` items: its mean
is the accuracy difference and its variance ``Var(y_a) + Var(y_b) - 2 Cov(y_a, y_b)`` comes from the
models' Gram matrix, so every pair costs what the 0/1 board's products cost (``O(m² n)`` in row
blocks), not a permutation test each. The multiplicity step, rank intervals and tiers are the 0/1
board's (:func:`app.core.ranking.leaderboard.assemble_board`). The p-values are kept in float32
(4 bytes a pair; the 0/1 board keeps 2-byte cell codes), and the significance of a pair is
``p <= c`` for the correction's cut-off ``c`` (Holm: the step-down's last rejected p-value; BH:
the step-up's; none: alpha).

The t-test is approximate for bounded scores; its family-wise wrong-decision rate is measured on
graded synthetic families in ``bench/bench_graded.py``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import special as _sc
from scipy import stats as _st

from app.core.ranking.leaderboard import assemble_board, check_alpha
from app.core.ranking.pair_table import LeaderboardPairs

__all__ = ["GRADED_TEST", "GradedPairTable", "graded_leaderboard"]

GRADED_TEST = "paired_t"
_BLOCK_CELLS = 2**20  # rows x models per working block (three float32 temporaries of it)
_DEGENERATE_SE = 1e-6  # an SE below this (float32 rounding of a zero) is zero


def _pair_stats(mean_a, mean_b, var_a, var_b, cov, n: int):
    """Mean difference, its SE (ddof 1) and the t statistic, elementwise (``±inf`` when every
    item moves the same way, so the difference is certain; 0 when there is none)."""
    diff = mean_a - mean_b
    var_d = np.maximum(var_a + var_b - 2.0 * cov, 0.0) * (n / (n - 1.0) if n > 1 else 0.0)
    se = np.sqrt(var_d / n)
    tiny = 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > tiny, diff / np.where(se > tiny, se, 1.0), np.sign(diff) * np.inf)
    t = np.where((se <= tiny) & (np.abs(diff) <= tiny), 0.0, t)
    return diff, se, t


def _p_of_t(t, df: int) -> np.ndarray:
    """Two-sided p-value of t statistics (``stdtr``, the costly step: only where needed)."""
    return 2.0 * _sc.stdtr(df, -np.abs(np.asarray(t, dtype=np.float64)))


def _t_of_p(p: float, df: int) -> float:
    """|t| whose two-sided p-value is ``p``."""
    return float(_sc.stdtrit(df, 1.0 - p / 2.0))


class GradedPairTable:
    """The pairwise table of a graded leaderboard (interface of
    :class:`app.core.ranking.pair_table.BlockedPairTable`).

    Pass 1 stores every pair's t statistic (float32, one rectangle per row block) from blocks
    of the Gram matrix. The p-value is monotone in ``|t|`` (one ``df = n - 1`` for all pairs), so
    the correction's decision is a cut-off ``|t| >= t_cut`` found on the sorted ``|t|``: Holm
    rejects every ``|t|`` at least the one of ``p = alpha / K`` outright and computes p-values
    only from there to its first acceptance; BH only between ``p = alpha`` and ``alpha / K``.
    Adjusted p-values of all pairs are computed once, when a pair's record is first asked for.
    """

    def __init__(self, scores: np.ndarray, alpha: float, correction: str, level: float) -> None:
        y32 = np.ascontiguousarray(scores, dtype=np.float32)  # no copy of float32 input
        m, n = y32.shape
        self._mean = y32.mean(axis=1, dtype=np.float64)
        self._centred = y32 - self._mean.astype(np.float32)[:, None]  # the one m x n copy
        self._var = np.square(self._centred).sum(axis=1, dtype=np.float64) / n
        self._var32 = self._var.astype(np.float32)
        self._mean32 = self._mean.astype(np.float32)
        self._n, self._m, self._df = n, m, max(n - 1, 1)
        self.alpha, self.correction = alpha, correction
        self._q = float(_st.t.ppf(0.5 + level / 2.0, self._df))
        self.n_pairs = m * (m - 1) // 2
        self.unshared_pairs = np.zeros((0, 2), dtype=np.int64)
        self._rows = max(1, _BLOCK_CELLS // max(m, 1))
        # one float32 rectangle per row block (rows r0:r1 against r0:), NaN where j <= i
        self._t = [self._block_t(r0, min(m, r0 + self._rows)) for r0 in range(0, m, self._rows)]
        self._abs_sorted: np.ndarray | None = None  # every |t|, decreasing (on demand)
        self._adjusted: np.ndarray | None = None
        self._cut = self._cut_off()
        with np.errstate(invalid="ignore"):
            self.n_significant = int(sum(np.count_nonzero(np.abs(t) >= self._cut) for t in self._t))

    @property
    def means(self) -> np.ndarray:
        """Each model's mean score (float64)."""
        return self._mean

    @property
    def variances(self) -> np.ndarray:
        """Each model's score variance over the items (ddof 0, float64)."""
        return self._var

    def _t32(self, a: slice, b: slice) -> np.ndarray:
        """t statistics of rows ``a`` against rows ``b``, float32 and in place (the Gram block
        is the only large temporary); ``±inf`` where every item moves the same way."""
        n = self._n
        c = self._centred
        s2 = c[a] @ c[b].T  # n Cov(a, b)
        s2 *= np.float32(-2.0 / n)
        s2 += self._var32[a, None]
        s2 += self._var32[None, b]
        np.maximum(s2, 0.0, out=s2)
        s2 *= np.float32(1.0 / (n - 1) if n > 1 else 0.0)  # Var(d) (ddof 1) / n = SE²
        np.sqrt(s2, out=s2)
        diff = np.subtract(self._mean32[a, None], self._mean32[None, b])
        degenerate = s2 <= _DEGENERATE_SE
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(diff, s2, out=s2)
        if degenerate.any():  # a certain difference, or none
            d = diff[degenerate]
            s2[degenerate] = np.where(np.abs(d) > 1e-7, np.copysign(np.float32(np.inf), d), 0.0)
        return s2

    def _block_t(self, r0: int, r1: int) -> np.ndarray:
        """Rows ``r0:r1`` against rows ``r0:``, NaN where ``j <= i`` (not a pair of the block)."""
        t = self._t32(slice(r0, r1), slice(r0, None))
        b = r1 - r0
        t[:, :b][np.tri(b, b, 0, dtype=bool)] = np.nan
        return t

    def _cut_off(self) -> float:
        """The smallest significant ``|t|`` (``inf`` when no pair is significant).

        Holm and BH reject every ``p <= alpha / K`` (``|t| >= t_sure``) wherever it stands and
        no ``p > alpha`` (``|t| < t_alpha``), so only the ``|t|`` between are sorted and only
        their p-values computed (Holm: in chunks until its first acceptance)."""
        k, a = self.n_pairs, self.alpha
        if k == 0:
            return np.inf
        t_alpha = _t_of_p(a, self._df)
        if self.correction == "none":
            return t_alpha
        t_sure = _t_of_p(a / k, self._df)
        sure = between = 0
        with np.errstate(invalid="ignore"):  # NaN: not a pair
            for t in self._t:
                at = np.abs(t)
                sure += int(np.count_nonzero(at >= t_sure))
                between += int(np.count_nonzero((at >= t_alpha) & (at < t_sure)))
        t_low = t_alpha
        if self.correction == "holm" and between:
            # Holm's step at rank sure + j is alpha / (K - sure - j + 1) <= alpha / (K - sure -
            # between + 1): a larger p-value is never rejected, so only the |t| above that
            # step are kept and sorted (few: the pairs with p > alpha keep the steps small)
            t_low = max(t_alpha, _t_of_p(a / (k - sure - between + 1), self._df))
        parts = []
        with np.errstate(invalid="ignore"):
            for t in self._t:
                at = np.abs(t)
                parts.append(at[(at >= t_low) & (at < t_sure)])
        ts = np.concatenate(parts)
        del parts
        ts.sort()
        ts = ts[::-1]  # decreasing |t|: increasing p (a view)
        if self.correction == "holm":
            i = 0
            while i < ts.size:  # step down in chunks until the first acceptance
                chunk = np.arange(i, min(ts.size, i + 65536))
                ok = _p_of_t(ts[chunk], self._df) <= a / (k - sure - chunk)
                if not ok.all():
                    i = int(chunk[np.argmin(ok)])
                    break
                i = int(chunk[-1]) + 1
            last = float(ts[i - 1]) if i > 0 else np.inf
        else:  # BH: the largest rank whose p-value is within its step
            rank = sure + np.arange(1, ts.size + 1)
            ok = np.flatnonzero(_p_of_t(ts, self._df) <= rank * a / k)
            last = float(ts[ok[-1]]) if ok.size else np.inf
        if sure == 0 and not np.isfinite(last):
            return np.inf
        return min(last, t_sure)

    def _sorted_abs(self) -> np.ndarray:
        if self._abs_sorted is None:
            flat = np.concatenate([np.abs(t).ravel() for t in self._t])
            flat.sort()  # NaN last
            self._abs_sorted = flat[: self.n_pairs][::-1]
        return self._abs_sorted

    def order_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """``(n_better_than, n_worse_than)`` per model, block by block from the stored t."""
        m = self._m
        beats = np.zeros(m, dtype=np.int64)
        beaten = np.zeros(m, dtype=np.int64)
        for r0, t in zip(range(0, m, self._rows), self._t, strict=True):
            r1 = r0 + t.shape[0]
            up, down = t >= self._cut, t <= -self._cut  # NaN (not a pair) is neither
            beats[r0:r1] += np.count_nonzero(up, axis=1)
            beaten[r0:] += np.count_nonzero(up, axis=0)
            beats[r0:] += np.count_nonzero(down, axis=0)
            beaten[r0:r1] += np.count_nonzero(down, axis=1)
        return beaten, beats

    def _row_t(self, i: int) -> np.ndarray:
        return self._t32(slice(i, i + 1), slice(None))[0]

    def better_row(self, i: int) -> np.ndarray:
        out = self._row_t(i) >= self._cut
        out[i] = False
        return out

    def significant_row(self, i: int) -> np.ndarray:
        out = np.abs(self._row_t(i)) >= self._cut
        out[i] = False
        return out

    def adjusted_of(self, t: np.ndarray) -> np.ndarray:
        """Adjusted p-values of pairs with t statistics ``t`` (float32, as stored)."""
        ts = self._sorted_abs()
        if self._adjusted is None:
            self._adjusted = _adjust_sorted(_p_of_t(ts, self._df), self.correction)
        key = -np.abs(np.asarray(t, dtype=np.float32))
        pos = np.searchsorted(-ts, key, side="left")
        return self._adjusted[np.minimum(pos, ts.size - 1)]

    def pairs(self, a, b) -> LeaderboardPairs:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        cov = np.einsum("kn,kn->k", self._centred[a], self._centred[b]).astype(np.float64)
        diff, se, _ = _pair_stats(
            self._mean[a], self._mean[b], self._var[a], self._var[b], cov / self._n, self._n
        )
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        block = lo // self._rows
        stored = np.empty(a.shape, dtype=np.float32)  # the tested statistic
        for k in np.unique(block).tolist():  # a handful of row blocks
            sel = block == k
            r0 = k * self._rows
            stored[sel] = self._t[k][lo[sel] - r0, hi[sel] - r0]
        t32 = np.where(a < b, stored, -stored).astype(np.float32)
        p = _p_of_t(t32, self._df)
        ya, yb = self._centred[a], self._centred[b]  # the scores, less each model's mean
        ya = ya + self._mean32[a, None]
        yb = yb + self._mean32[b, None]
        with np.errstate(invalid="ignore"):
            p_better = np.where(np.isfinite(t32), _sc.stdtr(self._df, t32), (t32 > 0) * 1.0)
        p_better = np.where(t32 == 0, 0.5, p_better)
        return LeaderboardPairs(
            a, b, np.count_nonzero(ya > yb, axis=1).astype(np.int64),
            np.count_nonzero(ya < yb, axis=1).astype(np.int64),
            np.full(a.shape, self._n, dtype=np.int64), diff,
            np.maximum(-1.0, diff - self._q * se), np.minimum(1.0, diff + self._q * se),
            p, self.adjusted_of(t32), p_better, np.abs(t32) >= self._cut,
        )  # fmt: skip


def _adjust_sorted(p: np.ndarray, correction: str) -> np.ndarray:
    """Holm / BH / no adjustment of increasing p-values (float64)."""
    k = p.size
    if correction == "none" or k == 0:
        return np.minimum(p, 1.0)
    if correction == "holm":
        return np.minimum(np.maximum.accumulate(p * np.arange(k, 0, -1)), 1.0)
    out = np.minimum.accumulate((p * (k / np.arange(1, k + 1)))[::-1])[::-1]
    return np.minimum(out, 1.0)


def graded_leaderboard(scores, *, alpha: float = 0.05, correction: str = "holm"):
    """A leaderboard of models with graded scores on every item (population ``"items"``).

    Parameters
    ----------
    scores : array_like, shape (m, n)
        Scores in [0, 1]; every model on every item.
    alpha : float
    correction : {"holm", "bh", "none"}

    Returns
    -------
    Leaderboard
        ``design="full"``, population ``"items"``; pairs by the paired t-test
        (:class:`GradedPairTable`), accuracies with the Student-t interval of the mean.
    """
    y = np.asarray(scores)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
        raise ValueError("scores: expected at least two models on at least two items")
    if not np.all(np.isfinite(y)) or y.min() < 0 or y.max() > 1:
        raise ValueError("scores: expected values in [0, 1] on every item")
    alpha = check_alpha(alpha)
    m, n = y.shape
    table = GradedPairTable(y, alpha, correction, 1.0 - alpha)
    acc = table.means
    q = float(_st.t.ppf(1.0 - alpha / 2.0, n - 1))
    half = q * np.sqrt(table.variances * n / (n - 1) / n)
    board = assemble_board(
        acc, np.maximum(0.0, acc - half), np.minimum(1.0, acc + half),
        np.full(m, n, dtype=np.int64), table, masked=False, alpha=alpha, correction=correction,
        population="items", design="full", mid_p=False, n_items=n, n_population=None,
    )  # fmt: skip
    corr = {"holm": "Holm (family-wise error rate)", "bh": "Benjamini-Hochberg (false "
            "discovery rate)", "none": "no multiplicity correction"}[correction]  # fmt: skip
    method = (
        f"Pairs: graded scores (in [0, 1], not 0/1), so McNemar does not apply: two-sided paired "
        f"t-test of the per-item differences on all {n} items (the items a sample from a "
        "population of items); difference interval: Student t; accuracy interval: Student t. "
        f"Multiplicity: {corr}, alpha = {alpha:g}. Rank: by mean score, ties share the best "
        "rank. Rank interval: [1 + #significantly better, m - #significantly worse]. Tiers: the "
        "best unassigned model plus every unassigned model not significantly worse than it. "
        f"Intervals at {100 * (1 - alpha):g}%."
    )
    return replace(board, method=method)
