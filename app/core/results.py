"""Frozen result types returned by the engine, each carrying its provenance."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Selection:
    """A fixed micro-benchmark chosen by a selector.

    Attributes
    ----------
    method : str
        Registry name of the selector (``"random"``, ``"anchor_points"``...).
    indices : ndarray of int64, shape (k,)
        Selected item positions in the benchmark's item order (distinct). ``k`` may differ from
        the requested ``n`` only where the method says so (confidence-stratified overflow).
    weights : ndarray of float64, shape (k,)
        Coefficients of the method's default *linear* estimator, aligned with ``indices``:
        ``estimate = sum(weights * y[indices])``. For mean-type estimators they are >= 0 and sum
        to 1; for Horvitz-Thompson they are ``1 / (N * pi_i)``.
    estimator : str
        Name of the default estimator (see :mod:`app.core.estimation.estimators`).
    estimate_on : str
        ``"correct"`` or ``"confidence"``: which per-item signal the default estimator reads.
    signal : str
        Which source signal drove the selection: ``"confidence"`` or ``"correct"`` (the fallback
        used when no confidences were supplied).
    n_requested : int
    n_candidates : int
        Size of the candidate pool the subset was drawn from.
    seed : int or None
        Seed the selection's randomness flowed from (``None`` only when the caller passed a
        ``Generator``).
    params : Mapping
        The selector's parameters, as given.
    fitted : Mapping[str, ndarray]
        Fitted state needed by non-linear estimators (e.g. IRT item parameters for p-IRT), so a
        stored selection can score new models without refitting.
    """

    method: str
    indices: np.ndarray
    weights: np.ndarray
    estimator: str
    estimate_on: str
    signal: str
    n_requested: int
    n_candidates: int
    seed: int | None
    params: Mapping[str, Any] = field(default_factory=dict)
    fitted: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", _freeze(np.asarray(self.indices, dtype=np.int64)))
        object.__setattr__(self, "weights", _freeze(np.asarray(self.weights, dtype=np.float64)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(
            self, "fitted", MappingProxyType({k: _freeze(v) for k, v in dict(self.fitted).items()})
        )
        if self.indices.shape != self.weights.shape:
            raise ValueError("weights: must align with indices")

    @property
    def size(self) -> int:
        return int(self.indices.shape[0])


# -- reliability results (protocol, agreement, MDAD, planning, scoring) ----------------------------


def _freeze_opt(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else _freeze(a)


@dataclass(frozen=True)
class RunRecord:
    """One (method, n, run) record of the paper protocol (§1.3 of the methods spec).

    Attributes
    ----------
    method : str
    n : int
    run : int
    targets : ndarray of int64, shape (n_targets,)
        Row positions of the run's target models.
    acc_seen, acc_unseen, acc_full : ndarray of float64, shape (n_targets,)
        Target accuracies on the run's seen half, unseen half and all items.
    estimates : ndarray of float64, shape (n_targets,)
        The method's estimate of each target's seen-half accuracy.
    """

    method: str
    n: int
    run: int
    targets: np.ndarray
    acc_seen: np.ndarray
    acc_unseen: np.ndarray
    acc_full: np.ndarray
    estimates: np.ndarray


# The per-run array fields of ProtocolResult (and of a chunk of its runs), in field order.
PROTOCOL_ARRAYS = (
    "targets",
    "sources",
    "seen",
    "acc_seen",
    "acc_unseen",
    "acc_full",
    "estimates",
    "subset_sizes",
)


@dataclass(frozen=True)
class ProtocolResult:
    """All records of one protocol invocation, stored as dense arrays.

    Attributes
    ----------
    methods : tuple of str
    sizes : tuple of int
    runs, n_sources, n_targets : int
    seed : int
        Every random choice (splits, selections) flows from this seed.
    targets : ndarray of int64, shape (runs, n_targets)
    sources : ndarray of int64, shape (runs, n_sources)
    seen : ndarray of bool, shape (runs, n_items)
        The run's seen-half mask (the unseen half is its complement).
    acc_seen, acc_unseen, acc_full : ndarray of float64, shape (runs, n_targets)
    estimates : ndarray of float64, shape (n_methods, n_sizes, runs, n_targets)
    subset_sizes : ndarray of int64, shape (n_methods, n_sizes, runs)
        Actual number of selected items (may exceed ``n`` for confidence-stratified sampling).
    seconds : Mapping[str, float]
        Wall time spent per method (fit + select + estimate, summed over runs and processes).
    selector_params : Mapping[str, Mapping]
    """

    methods: tuple[str, ...]
    sizes: tuple[int, ...]
    runs: int
    n_sources: int
    n_targets: int
    seed: int
    targets: np.ndarray
    sources: np.ndarray
    seen: np.ndarray
    acc_seen: np.ndarray
    acc_unseen: np.ndarray
    acc_full: np.ndarray
    estimates: np.ndarray
    subset_sizes: np.ndarray
    seconds: Mapping[str, float] = field(default_factory=dict)
    selector_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in PROTOCOL_ARRAYS:
            object.__setattr__(self, name, _freeze(getattr(self, name)))
        object.__setattr__(self, "seconds", MappingProxyType(dict(self.seconds)))
        object.__setattr__(
            self,
            "selector_params",
            MappingProxyType(
                {k: MappingProxyType(dict(v)) for k, v in self.selector_params.items()}
            ),
        )

    def cell(self, method: str, n: int) -> np.ndarray:
        """Estimates of one (method, n) cell, shape (runs, n_targets)."""
        try:
            return self.estimates[self.methods.index(method), self.sizes.index(n)]
        except ValueError:
            raise ValueError(f"cell: no ({method!r}, {n}) cell in this result") from None

    def truth(self, split: str) -> np.ndarray:
        """Target accuracies for ``split`` in {"seen", "unseen", "full"}, shape (runs, n_targets)."""
        try:
            return {"seen": self.acc_seen, "unseen": self.acc_unseen, "full": self.acc_full}[split]
        except KeyError:
            raise ValueError(f"split: expected 'seen', 'unseen' or 'full', got {split!r}") from None

    def record(self, method: str, n: int, run: int) -> RunRecord:
        """The paper's per-(method, n, run) record."""
        est = self.cell(method, n)
        if not 0 <= run < self.runs:
            raise ValueError(f"run: expected 0 <= run < {self.runs}, got {run}")
        return RunRecord(
            method=method,
            n=n,
            run=run,
            targets=self.targets[run],
            acc_seen=self.acc_seen[run],
            acc_unseen=self.acc_unseen[run],
            acc_full=self.acc_full[run],
            estimates=est[run],
        )


@dataclass(frozen=True)
class AgreementCurve:
    """Probability that a micro-benchmark orders a pair like the full benchmark, by gap.

    Attributes
    ----------
    gaps : ndarray of float64, shape (n_bins,)
        Lower edge of each bin (or merged group of bins) of the absolute full-benchmark gap,
        in accuracy units.
    gap_upper : ndarray of float64, shape (n_bins,)
        Exclusive upper edge of each bin.
    n_pairs : ndarray of float64, shape (n_bins,)
        Pairs (pooled over runs) in each bin; expected counts for exact curves.
    p_same : ndarray of float64, shape (n_bins,)
        Raw proportion of pairs whose estimated order matches the full-benchmark order (a tie in
        the estimate is not a match).
    p_tie, p_reversed : ndarray of float64, shape (n_bins,)
        Proportions of tied and reversed estimated orders (``p_same + p_tie + p_reversed = 1``
        except in paper mode, where ``Δ_seen = 0`` pairs count as "same" when ``Δ_est > 0``).
    fitted : ndarray of float64, shape (n_bins,) or None
        Monotone (isotonic, pair-weighted) fit of ``p_same``; ``None`` for paper-mode curves.
    band_low, band_high : ndarray of float64 or None
        Pointwise 95 % bootstrap band of ``fitted`` (runs bootstrap), when computed.
    method, n, split, kind : str / int
        Cell identity; ``kind`` is ``"paper"``, ``"robust"`` or ``"exact"``.
    max_gap : float
        Largest absolute gap observed.
    """

    gaps: np.ndarray
    gap_upper: np.ndarray
    n_pairs: np.ndarray
    p_same: np.ndarray
    p_tie: np.ndarray
    p_reversed: np.ndarray
    fitted: np.ndarray | None = None
    band_low: np.ndarray | None = None
    band_high: np.ndarray | None = None
    method: str = ""
    n: int = 0
    split: str = "seen"
    kind: str = "robust"
    max_gap: float = 0.0

    def __post_init__(self) -> None:
        for name in ("gaps", "gap_upper", "n_pairs", "p_same", "p_tie", "p_reversed"):
            object.__setattr__(
                self, name, _freeze(np.asarray(getattr(self, name), dtype=np.float64))
            )
        for name in ("fitted", "band_low", "band_high"):
            object.__setattr__(self, name, _freeze_opt(getattr(self, name)))

    def at(self, gap: float | np.ndarray) -> np.ndarray:
        """Curve value (``fitted`` if present, else ``p_same``) of the bin containing ``gap``."""
        values = self.fitted if self.fitted is not None else self.p_same
        g = np.abs(np.asarray(gap, dtype=np.float64))
        idx = np.clip(np.searchsorted(self.gaps, g + 1e-12, side="right") - 1, 0, len(values) - 1)
        return values[idx]


@dataclass(frozen=True)
class MDADResult:
    """Minimum detectable ability difference of one (method, n, split) cell.

    Attributes
    ----------
    method, n, split : str, int, str
    mode : str
        ``"paper"`` (§4.2, sentinel 0.5 when never reached), ``"robust"`` or ``"exact"``.
    mdad : float or None
        In accuracy units; ``None`` when the threshold is never reached (robust / exact modes).
    ci_low, ci_high : float or None
        Confidence interval (``None`` upper end: not reached in the resamples' upper tail).
    threshold : float
    reached : bool
    max_gap : float
        Largest absolute gap observed in the cell.
    mean_agreement : float
        Mean of ``agree`` over all pooled pairs (§4.3).
    mean_abs_error : float or None
        Mean over runs of the per-run mean |truth - estimate| over targets.
    kendall_tau : float or None
        Mean over runs of Kendall's tau-b between truth and estimates.
    n_runs, n_pairs, n_boot : int
    seed : int or None
        Seed of the bootstrap generator.
    curve : AgreementCurve or None
    """

    method: str
    n: int
    split: str
    mode: str
    mdad: float | None
    ci_low: float | None
    ci_high: float | None
    threshold: float
    reached: bool
    max_gap: float
    mean_agreement: float
    mean_abs_error: float | None = None
    kendall_tau: float | None = None
    n_runs: int = 0
    n_pairs: int = 0
    n_boot: int = 0
    seed: int | None = None
    curve: AgreementCurve | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the CLI's ``cells`` entries)."""
        return {
            "method": self.method,
            "n": int(self.n),
            "split": self.split,
            "mdad": self.mdad,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "mean_agreement": self.mean_agreement,
            "mean_abs_error": self.mean_abs_error,
            "kendall_tau": self.kendall_tau,
        }


@dataclass(frozen=True)
class OrderProbabilities:
    """P(estimated order) for model pairs on a random subset, exactly (hypergeometric).

    Attributes
    ----------
    p_greater, p_equal, p_less : ndarray of float64
        P(X > Y), P(X = Y), P(X < Y) where X / Y count sampled items only A / only B gets right.
    """

    p_greater: np.ndarray
    p_equal: np.ndarray
    p_less: np.ndarray


@dataclass(frozen=True)
class Verdict:
    """Whether a micro-benchmark of ``n`` items reliably orders a named pair.

    Attributes
    ----------
    model_a, model_b : int
        Row positions of the pair (A is the first argument).
    method : str
    n : int
    gap : float
        Full-benchmark accuracy difference ``acc(A) - acc(B)``.
    p_same, p_tie, p_reversed : float
        P(the subset orders the pair as the full benchmark), P(tie), P(reversed order).
    ci_low, ci_high : float
        Interval for ``p_same`` (equal to it for exact computations).
    mdad : float or None
        The method's MDAD at ``n`` on this benchmark (``None``: not reached or unknown).
    threshold : float
    distinguishable : bool
        ``p_same >= threshold``.
    n_needed : int or None
        Smallest ``n`` at which ``p_same >= threshold`` (``None``: not within the benchmark or
        the evaluated sizes).
    basis : str
        ``"exact"``, ``"exact_stratified"`` or ``"robust_curve"``.
    """

    model_a: int
    model_b: int
    method: str
    n: int
    gap: float
    p_same: float
    p_tie: float
    p_reversed: float
    ci_low: float
    ci_high: float
    mdad: float | None
    threshold: float
    distinguishable: bool
    n_needed: int | None
    basis: str


@dataclass(frozen=True)
class Plan:
    """Smallest subset size whose MDAD is at most a target gap.

    Attributes
    ----------
    gap : float
    method : str
    probability : float
        Agreement level defining the MDAD.
    n : int or None
        ``None`` when no evaluated size reaches it.
    sizes : ndarray of int64
        Sizes the curve was evaluated at.
    mdads : ndarray of float64
        MDAD at each size (NaN: not reached).
    basis : str
        ``"exact"`` or ``"robust_curve"``.
    """

    gap: float
    method: str
    probability: float
    n: int | None
    sizes: np.ndarray
    mdads: np.ndarray
    basis: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", _freeze(np.asarray(self.sizes, dtype=np.int64)))
        object.__setattr__(self, "mdads", _freeze(np.asarray(self.mdads, dtype=np.float64)))


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a confidence interval.

    Attributes
    ----------
    value, ci_low, ci_high, se : float
    n : int
        Observations used.
    n_population : int or None
        Population size for finite-population corrections.
    method : str
        How the interval was computed (``"wilson_fpc"``, ``"irt"``...).
    confidence : float
    """

    value: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    n_population: int | None
    method: str
    confidence: float = 0.95


@dataclass(frozen=True)
class PairedComparison:
    """A model known on a subset versus a model with full results, on their shared items.

    Attributes
    ----------
    p_better : float
        P(the new model's full-benchmark accuracy exceeds the baseline's) under the documented
        normal model of the paired mean difference.
    mean_diff, se : float
        Paired mean difference (new - baseline) on the shared items and its FPC standard error.
    n_shared : int
    n_population : int
    n_new_only, n_baseline_only : int
        Discordant items (new right / baseline wrong and the reverse).
    mcnemar_p : float
        Two-sided exact McNemar p-value.
    """

    p_better: float
    mean_diff: float
    se: float
    n_shared: int
    n_population: int
    n_new_only: int
    n_baseline_only: int
    mcnemar_p: float
