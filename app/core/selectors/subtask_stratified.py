"""Random sampling stratified by subtask (paper §3.2)."""

from __future__ import annotations

import numpy as np

from app.core._validation import ResultsData
from app.core.selectors._sampling import draw_within_groups, group_codes
from app.core.selectors.base import Chosen, Selector

ALLOCATIONS = ("equal", "proportional", "paper_proportional")


class SubtaskStratifiedSelector(Selector):
    """Uniform random sampling within subtasks of the candidate pool.

    Parameters
    ----------
    allocation : {"equal", "proportional", "paper_proportional"}, default "equal"
        How the ``n`` items are spread over the ``K`` subtasks present in the candidate pool
        (subtasks with no candidate item do not count).

        ``"equal"`` (the paper's ``Random_Subtask_Stratified_Equal``)
            Every subtask gets ``floor(n / K)`` items; the ``n mod K`` leftovers go one each to a
            uniformly random set of distinct subtasks. Within a subtask the items are drawn
            uniformly without replacement. Estimator: the **unweighted** mean over the selected
            items (``"mean"``), as in the paper, even though subtasks of different sizes are then
            weighted equally rather than by size. If a subtask has fewer candidates than its
            allocation, ``ValueError`` naming ``n`` is raised (the reference code asserts);
            nothing is redistributed.
        ``"proportional"`` (classic proportional allocation)
            Subtask ``h`` with ``N_h`` of the ``N`` candidates gets ``n_h = floor(n N_h / N)``
            items, and the ``n - sum(n_h)`` leftovers go to the subtasks with the largest
            remainders ``n N_h mod N`` (largest-remainder rounding; ties broken uniformly at
            random). Then ``n_h <= N_h`` always holds and exactly ``n`` items are drawn. Weights
            ``w_i = (N_h / N_rep) / n_h`` with ``N_rep = sum of N_h over subtasks with n_h > 0``,
            so the default estimator (``"weighted_mean"``) is the item-weighted mean of the
            subtask means: unbiased for the pool's accuracy whenever every subtask is represented
            (``n_h >= 1``); when ``n < K`` some subtasks get no item and the weights are
            renormalised over the represented ones.
        ``"paper_proportional"`` (the paper's ``Random_Subtask_Stratified_Proportional``)
            ``n`` items drawn without replacement (successive sampling, as
            ``numpy.random.Generator.choice``) with item probability proportional to
            ``1 / N_h`` (equal mass per subtask); plain mean (``"mean"``).

    Notes
    -----
    Source models are not used, only the subtask labels. With a single subtask, ``"equal"`` and
    ``"proportional"`` reduce to uniform random sampling. Cost per selection: O(N log N).
    """

    name = "subtask_stratified"
    estimators = ("mean", "weighted_mean")
    uses_sources = False

    def __init__(self, *, allocation: str = "equal") -> None:
        super().__init__(allocation=allocation)

    @property
    def default_estimator(self) -> str:
        return "weighted_mean" if self.params["allocation"] == "proportional" else "mean"

    def _fit(self, data: ResultsData) -> None:
        allocation = self.params["allocation"]
        if allocation not in ALLOCATIONS:
            raise ValueError(f"allocation: expected one of {ALLOCATIONS}, got {allocation!r}")
        labels = data.subtasks[data.candidates]
        self.subtask_labels_, self.codes_, self.sizes_ = group_codes(labels)

    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        allocation = self.params["allocation"]
        cand = data.candidates
        if allocation == "paper_proportional":
            p = 1.0 / self.sizes_[self.codes_]
            picked = rng.choice(cand.shape[0], size=n, replace=False, p=p / p.sum())
            return Chosen(indices=np.sort(cand[picked]), weights=np.full(n, 1.0 / n))
        if allocation == "equal":
            counts = equal_allocation(n, self.sizes_.shape[0], rng)
            short = counts > self.sizes_
            if np.any(short):
                worst = int(np.argmax(short))
                raise ValueError(
                    f"n: {n} items need {counts[worst]} from subtask "
                    f"{str(self.subtask_labels_[worst])!r}, which has only {self.sizes_[worst]} candidates"
                )
        else:
            counts = proportional_allocation(n, self.sizes_, rng)
        pos = draw_within_groups(self.codes_, counts, rng)
        if allocation == "equal":
            weights = np.full(pos.shape[0], 1.0 / pos.shape[0])
        else:
            represented = counts > 0
            share = np.where(represented, self.sizes_, 0) / self.sizes_[represented].sum()
            per_item = share / np.maximum(counts, 1)
            weights = per_item[self.codes_[pos]]
        return Chosen(indices=cand[pos], weights=weights)


def equal_allocation(n: int, n_groups: int, rng: np.random.Generator) -> np.ndarray:
    """Paper §3.2 equal allocation.

    Parameters
    ----------
    n : int
        Total subset size.
    n_groups : int
        Number of subtasks ``K``.
    rng : numpy.random.Generator
        Chooses which subtasks receive the leftovers.

    Returns
    -------
    ndarray of int64, shape (K,)
        ``floor(n / K)`` per subtask, plus one for each of ``n mod K`` distinct subtasks chosen
        uniformly at random.
    """
    counts = np.full(n_groups, n // n_groups, dtype=np.int64)
    extra = rng.choice(n_groups, size=n % n_groups, replace=False)
    counts[extra] += 1
    return counts


def proportional_allocation(n: int, sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Largest-remainder (Hamilton) allocation of ``n`` proportional to ``sizes``.

    Parameters
    ----------
    n : int
        Total, ``0 <= n <= sizes.sum()``.
    sizes : ndarray of int, shape (K,)
        Stratum sizes ``N_h``.
    rng : numpy.random.Generator
        Breaks ties between equal remainders uniformly at random.

    Returns
    -------
    ndarray of int64, shape (K,)
        ``n_h = floor(n N_h / N) + [h among the n - sum floor largest remainders]``; sums to
        ``n`` and never exceeds ``N_h``.

    Notes
    -----
    Quotas and remainders are computed in exact integer arithmetic (``n N_h // N`` and
    ``n N_h % N``), so ties are real ties, not rounding noise.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    base = (n * sizes) // total
    remainder = (n * sizes) % total
    leftover = n - int(base.sum())
    order = np.lexsort((rng.random(sizes.shape[0]), -remainder))
    base[order[:leftover]] += 1
    return base
