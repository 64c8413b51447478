"""Cost-aware draws and budgets for §7 sessions (issue 37).

Items differ in what they cost to evaluate (tokens, seconds, dollars; tenfold or more on
benchmarks answered by reasoning models). A session pays ``c_i`` for every item ``i`` it draws, so
the quantity to minimise is the *cost* to a decision, not the item count. For a design
``pi`` over the remaining items ``R`` the per-draw variance of the §7 increment is about
``sum_i v_i / (r^2 pi_i)`` (``v_i`` the variance of ``a_i - f_i``) and the expected cost of a draw
is ``sum_i pi_i c_i``; their product is smallest at ``pi_i`` proportional to ``sqrt(v_i / c_i)``
(Cauchy-Schwarz; the classical cost-constrained Neyman allocation, Cochran 1977 §5.5). With the
prediction's variance ``v_i = f_i (1 - f_i)`` that is §7's Neyman score divided by ``sqrt(c_i)``:

    pi_t(i) = (1 - gamma) (s_i / sqrt(c_i)) / sum_{j in R_t} (s_j / sqrt(c_j)) + gamma / r_t.

The costs used by the design are *predicted* costs (e.g. the median over the stored models of
what each item cost them, :func:`item_cost_summary`), fixed when the session starts and stored
with it, so ``pi`` is predictable exactly as in :mod:`app.core.sequential.active` and every
confidence sequence keeps its guarantee whatever the costs are (they only change how much a
decision costs). What a session *spends* is measured on the candidate.

Budgets: a session with ``max_cost`` draws a new batch only while what it has spent is below the
budget (:func:`budget_open`); it can therefore overshoot by at most the cost of one batch, whose
worst case is the sum of the ``k`` largest remaining costs (:func:`worst_batch_cost`). A session
stopped by its budget keeps a valid interval (Ville's inequality holds at every stopping time) and
ends undecided (``INCONCLUSIVE``) with what it spent.

References
----------
Cochran, W. G. (1977). Sampling Techniques, 3rd ed., §5.5 (optimum allocation with costs).
Zrnic, T. & Candès, E. J. (2024). Active statistical inference. ICML.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core.sequential.active import DEFAULT_GAMMA, design_probabilities

#: Floor of the cost-aware designs when a session does not name one (measured: bench/bench_cost.py).
COST_GAMMA = 0.4
#: Cost units the service knows, each with the field of :class:`app.ingest.types.ItemCosts`.
COST_UNITS = ("output_tokens", "input_tokens", "tokens", "seconds", "usd")


def _check_costs(costs, shape) -> np.ndarray:
    c = np.asarray(costs, dtype=np.float64)
    if c.ndim == 1:
        c = np.broadcast_to(c[None, :], (shape[0], c.size))
    if c.shape != tuple(shape):
        raise ValueError(f"costs: expected shape ({shape[1]},) or {tuple(shape)}")
    if not np.all(np.isfinite(c)) or c.min(initial=1.0) <= 0:
        raise ValueError("costs: must be finite and positive")
    return c


def cost_scores(scores, costs, available) -> np.ndarray:
    """Allocation scores per unit of cost: ``s_i / sqrt(c_i)`` (``s = 1`` when ``scores`` is None).

    Parameters
    ----------
    scores : array_like, shape (S, N), or None
        Non-negative information scores (e.g. :func:`~app.core.sequential.active.neyman_scores`);
        ``None`` means every item is worth the same (the design then favours cheap items only).
    costs : array_like, shape (N,) or (S, N)
        Predicted positive cost of each item (any unit: only ratios matter).
    available : array_like of bool, shape (S, N)

    Returns
    -------
    ndarray, shape (S, N)
        Scores for :func:`~app.core.sequential.active.design_probabilities` (0 outside
        ``available``).
    """
    avail = np.asarray(available, dtype=bool)
    c = _check_costs(costs, avail.shape)
    s = np.ones(avail.shape) if scores is None else np.asarray(scores, dtype=np.float64)
    if s.shape != avail.shape:
        raise ValueError("scores: expected shape (S, N) matching available")
    return np.where(avail, s / np.sqrt(c), 0.0)


def cost_design_probabilities(scores, costs, available, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """``pi(i) = (1 - gamma) (s_i/sqrt(c_i)) / sum_R (s/sqrt(c)) + gamma / r`` (module docstring).

    Parameters are those of :func:`cost_scores` and
    :func:`~app.core.sequential.active.design_probabilities` (``gamma`` the floor).
    """
    return design_probabilities(cost_scores(scores, costs, available), available, gamma)


def expected_draw_cost(prob, costs) -> np.ndarray:
    """``sum_i pi(i) c_i``, the expected cost of the next draw, shape (S,)."""
    p = np.asarray(prob, dtype=np.float64)
    return (p * _check_costs(costs, p.shape)).sum(axis=1)


def worst_batch_cost(costs, available, k: int) -> np.ndarray:
    """The most a batch of ``k`` draws from ``available`` can cost: its ``k`` largest costs, (S,)."""
    avail = np.asarray(available, dtype=bool)
    c = np.where(avail, _check_costs(costs, avail.shape), 0.0)
    k = int(k)
    if k < 1:
        raise ValueError("k: expected a positive integer")
    k = min(k, avail.shape[1])
    return -np.sort(-c, axis=1)[:, :k].sum(axis=1)


def budget_open(spent, max_cost) -> np.ndarray:
    """Whether a session may draw another batch: what it spent is below ``max_cost`` (None: yes)."""
    s = np.asarray(spent, dtype=np.float64)
    if max_cost is None:
        return np.ones(s.shape, dtype=bool)
    return s < np.asarray(max_cost, dtype=np.float64)


@dataclass(frozen=True)
class CostSummary:
    """Per-item cost predicted from the stored models (robust to a few odd models).

    Attributes
    ----------
    median : ndarray, shape (N,)
        Median over the models that report the item (NaN when none does).
    lower, upper : ndarray, shape (N,)
        25th and 75th percentiles over those models.
    models : ndarray of int64, shape (N,)
        How many models report the item.
    """

    median: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    models: np.ndarray

    def filled(self) -> np.ndarray:
        """The medians with an item no model reports set to the median of the others (1 if none)."""
        m = self.median
        known = np.isfinite(m)
        fill = float(np.median(m[known])) if known.any() else 1.0
        return np.where(known, m, fill)


def item_cost_summary(costs) -> CostSummary:
    """Summarise a (models x items) cost matrix (NaN = not reported) per item.

    Parameters
    ----------
    costs : array_like, shape (M, N)
        What each item cost each stored model, non-negative, NaN where unknown.

    Returns
    -------
    CostSummary
    """
    c = np.asarray(costs, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError("costs: expected a (models x items) matrix")
    known = np.isfinite(c)
    if np.any(c[known] < 0):
        raise ValueError("costs: must be non-negative")
    n = known.sum(axis=0)
    out = np.full((3, c.shape[1]), np.nan)
    cols = n > 0
    if cols.any():
        out[:, cols] = np.nanpercentile(c[:, cols], [50, 25, 75], axis=0)
    return CostSummary(median=out[0], lower=out[1], upper=out[2], models=n.astype(np.int64))


def model_cost_scale(own_costs, summary: CostSummary) -> float:
    """A model's cost relative to the stored median, from the items it has run (1 if none).

    The ratio of medians ``median_i(own_i) / median_i(summary_i)`` over the items both know: a
    model that writes twice as many tokens as the population's median model predicts twice the
    stored median on the items it has not run yet.
    """
    own = np.asarray(own_costs, dtype=np.float64)
    ref = summary.median
    both = np.isfinite(own) & np.isfinite(ref) & (ref > 0)
    if not both.any():
        return 1.0
    num = float(np.median(own[both]))
    den = float(np.median(ref[both]))
    return num / den if num > 0 and den > 0 else 1.0


def predicted_subset_cost(item_costs, subsets) -> tuple[np.ndarray, np.ndarray]:
    """Expected cost of item subsets and its spread.

    Parameters
    ----------
    item_costs : array_like, shape (M, N)
        Cost of each item for each stored model (NaN filled beforehand), or shape (N,) for one
        cost per item (the spread is then 0).
    subsets : array_like of int or bool
        Shape (k,) item positions, or (B, N) boolean masks (one subset per row).

    Returns
    -------
    mean, sd : ndarray
        Per subset: the mean over models of the subset's total cost, and its standard deviation
        over models (how much the cost depends on which model runs it).
    """
    c = np.asarray(item_costs, dtype=np.float64)
    if c.ndim == 1:
        c = c[None, :]
    sub = np.asarray(subsets)
    if sub.dtype != bool:
        mask = np.zeros((1, c.shape[1]), dtype=bool)
        mask[0, sub.astype(np.int64)] = True
    else:
        mask = np.atleast_2d(sub)
    totals = np.nan_to_num(c) @ mask.T.astype(np.float64)  # (M, B)
    sd = totals.std(axis=0, ddof=1) if c.shape[0] > 1 else np.zeros(mask.shape[0])
    return totals.mean(axis=0), sd


def random_subset_cost(item_costs, size: int) -> tuple[float, float]:
    """Mean and standard deviation of the total cost of a uniform random ``size``-subset.

    Parameters
    ----------
    item_costs : array_like, shape (N,)
        Cost of each item (finite, non-negative).
    size : int
        Items in the subset, ``0 <= size <= N``.

    Returns
    -------
    mean, sd : float
        ``n c_bar`` and ``sqrt(n s^2 (N - n) / N)``, ``s^2`` the population variance of the
        costs times ``N / (N - 1)`` (sampling without replacement: 0 at ``n = N``).
    """
    c = np.asarray(item_costs, dtype=np.float64)
    if c.ndim != 1 or not np.all(np.isfinite(c)) or c.min(initial=0.0) < 0:
        raise ValueError("item_costs: expected finite non-negative costs, shape (N,)")
    n, big_n = int(size), c.size
    if not 0 <= n <= big_n:
        raise ValueError(f"size: expected 0 <= size <= {big_n}")
    s2 = c.var(ddof=1) if big_n > 1 else 0.0
    return float(n * c.mean()), float(np.sqrt(n * s2 * (big_n - n) / big_n))


__all__ = [
    "COST_GAMMA",
    "COST_UNITS",
    "CostSummary",
    "budget_open",
    "cost_design_probabilities",
    "cost_scores",
    "expected_draw_cost",
    "item_cost_summary",
    "model_cost_scale",
    "predicted_subset_cost",
    "random_subset_cost",
    "worst_batch_cost",
]
