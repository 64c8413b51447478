"""Scoring a model known only on a (possibly weighted) subset: intervals and baseline comparisons.

Complements :mod:`app.core.stats` (plain means on uniform random subsets) with the weighted
analogues used for weighted / Horvitz-Thompson subsets, and the subset size needed to order a
pair at an observed gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from app.core.estimators import estimate as _core_estimate
from app.core.estimators.irt import item_bank
from app.core.exact import order_probabilities
from app.core.intervals import (
    SMALL_N_METHODS,
    ReferenceCalibration,
    calibrate_references,
    difference_estimate,
    proportion_interval,
    reference_calibrated_interval,
)
from app.core.results import Estimate, PairedComparison, Selection
from app.core.stats import fpc, normal_paired_comparison, wilson_bounds


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: expected a level in (0, 1), got {confidence}")
    return float(_st.norm.ppf(0.5 + confidence / 2.0))


def kish_n_eff(weights) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (``n`` for uniform weights)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights: expected non-negative weights with a positive sum")
    return float(w.sum() ** 2 / np.sum(w**2))


def weighted_estimate(values, weights, n_population: int, *, confidence: float = 0.95) -> Estimate:
    """Linear estimate ``sum_i w_i v_i`` of a full-benchmark mean with a Wilson-type interval.

    Parameters
    ----------
    values : array_like, shape (k,)
        Per-item scores in [0, 1] on the subset's items.
    weights : array_like, shape (k,)
        The subset's estimator coefficients (mean-type: sum to 1; Horvitz-Thompson:
        ``1 / (N pi_i)``).
    n_population : int
        ``N``, the benchmark's size.
    confidence : float

    Returns
    -------
    Estimate
        ``value = sum w v`` (clipped to [0, 1] only for the interval); ``method =
        "wilson_kish_fpc"``.

    Notes
    -----
    The weighted analogue of :func:`app.core.stats.wilson_interval`: the Wilson score interval
    for ``p = clip(value, 0, 1)`` at Kish's effective size ``n_w = (sum w)^2 / sum w^2``, deflated
    by the finite-population correction ``f = (N - k) / (N - 1)`` (``n_eff = n_w / f``):

    ``center = (p + z^2 / (2 n_eff)) / (1 + z^2 / n_eff)``,
    ``half = z / (1 + z^2 / n_eff) sqrt(p (1 - p) / n_eff + z^2 / (4 n_eff^2))``.

    With uniform weights ``1/k`` it equals the plain Wilson-FPC interval. ``se`` is
    ``sqrt(f * sum_i w_i^2 (v_i - v_w)^2 * k / (k - 1)) / sum w`` with ``v_w`` the normalised
    weighted mean (the linearised variance of a weighted mean; 0 when ``k = 1`` or ``k = N``).
    It treats the design as a with-equal-probability sample reweighted, which is approximate for
    clustered (Anchor Points, tinyBenchmarks) and stratified (HT) designs.
    """
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if v.ndim != 1 or v.shape != w.shape or v.size == 0:
        raise ValueError("weights: expected one weight per value")
    if not np.all(np.isfinite(v)) or v.min() < 0 or v.max() > 1:
        raise ValueError("values: expected finite scores in [0, 1]")
    k = v.shape[0]
    n_w = kish_n_eff(w)
    f = fpc(k, n_population)
    value = float(w @ v)
    p = min(1.0, max(0.0, value))
    z = _z(confidence)
    vw = float(w @ v / w.sum())
    var = f * float(np.sum(w**2 * (v - vw) ** 2)) * (k / (k - 1) if k > 1 else 0.0) / w.sum() ** 2
    lo, hi = wilson_bounds(p, n_w, f, z)
    return Estimate(
        value=value,
        ci_low=float(lo),
        ci_high=float(hi),
        se=float(np.sqrt(max(var, 0.0))),
        n=k,
        n_population=int(n_population),
        method="wilson_kish_fpc",
        confidence=confidence,
    )


def weighted_paired_comparison(new_values, baseline_full, indices, weights) -> PairedComparison:
    """P(a model known on a weighted subset beats a baseline known on every item).

    Parameters
    ----------
    new_values : array_like of {0, 1}, shape (k,)
        The new model's results on ``indices``.
    baseline_full : array_like of {0, 1}, shape (N,)
    indices : array_like of int, shape (k,)
        Distinct item positions.
    weights : array_like, shape (k,)
        The subset's estimator coefficients.

    Returns
    -------
    PairedComparison
        ``mean_diff`` is the subset's estimate of the full-benchmark difference,
        ``sum_i w_i (y_i - b_i) / sum_i w_i``.

    Notes
    -----
    With ``d_i = y_i - b_i``, ``d_w = sum w d / sum w`` and ``f = (N - k) / (N - 1)``:
    ``SE^2 = f * k / (k - 1) * sum_i w_i^2 (d_i - d_w)^2 / (sum w)^2`` and
    ``P(better) = Phi(d_w / SE)`` (the sign of ``d_w`` when ``SE = 0``). For uniform weights this
    is exactly :func:`app.core.stats.compare_to_baseline`. The exact McNemar test on the shared
    items is unweighted.
    """
    y = np.asarray(new_values, dtype=np.float64)
    base = np.asarray(baseline_full, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    if y.ndim != 1 or idx.shape != y.shape or w.shape != y.shape or y.size == 0:
        raise ValueError("indices: expected one item position and weight per result")
    if base.ndim != 1 or idx.min() < 0 or idx.max() >= base.shape[0]:
        raise ValueError("indices: positions must lie within the baseline's items")
    if np.unique(idx).shape[0] != idx.shape[0]:
        raise ValueError("indices: positions must be distinct")
    kish_n_eff(w)
    k, n_pop = y.shape[0], base.shape[0]
    d = y - base[idx]
    mean = float(w @ d / w.sum())
    ss = float(np.sum(w**2 * (d - mean) ** 2)) / w.sum() ** 2
    se = float(np.sqrt(fpc(k, n_pop) * ss * k / (k - 1))) if k > 1 else 0.0
    return normal_paired_comparison(y, base[idx], mean, se, n_pop)


def size_needed_for_gap(
    n10: int, n01: int, n_shared: int, n_population: int, probability: float = 0.8
) -> int | None:
    """Smallest random-subset size ordering a pair correctly with ``probability``, extrapolated
    from the discordant counts observed on ``n_shared`` items.

    Parameters
    ----------
    n10, n01 : int
        Shared items only the leader / only the other model gets right.
    n_shared : int
        Items both were observed on.
    n_population : int
        ``N``, the benchmark's size.
    probability : float

    Returns
    -------
    int or None
        ``None`` when ``n10 == n01`` (no observed gap to detect). At most ``N`` (the full
        benchmark orders the pair by definition).

    Notes
    -----
    The pair's full-benchmark discordant counts are taken as ``round(N n10 / k)`` and
    ``round(N n01 / k)`` (the observed rates scaled to the benchmark); the exact multivariate
    hypergeometric P(same order) (:func:`app.core.exact.order_probabilities`) is evaluated on a
    geometric grid of sizes, then on every size between the first grid point reaching
    ``probability`` and its predecessor (as :func:`app.core.exact.smallest_n`).
    """
    if n_shared < 1 or n_population < n_shared:
        raise ValueError("n_shared: expected 1 <= n_shared <= n_population")
    if not 0 <= n10 <= n_shared or not 0 <= n01 <= n_shared or n10 + n01 > n_shared:
        raise ValueError("n10: discordant counts must fit in n_shared")
    hi, lo = max(n10, n01), min(n10, n01)
    if hi == lo:
        return None
    scale = n_population / n_shared
    h = min(n_population, round(hi * scale))
    lw = min(n_population - h, round(lo * scale))
    if h <= lw:
        return None
    grid = np.unique(np.geomspace(1, n_population, 48).round().astype(np.int64))
    p = order_probabilities(h, lw, n_population, grid).p_greater
    ok = np.flatnonzero(p >= probability)
    if ok.size == 0:  # pragma: no cover - n = N always orders the pair
        return n_population
    first = int(ok[0])
    low = 1 if first == 0 else int(grid[first - 1]) + 1
    cand = np.arange(low, int(grid[first]) + 1)
    p_c = order_probabilities(h, lw, n_population, cand).p_greater
    return int(cand[np.flatnonzero(p_c >= probability)[0]])


# -- every estimate of a subset, vectorised over scored models (issue 13) -------------------------

BASES = ("design", "model", "model-assisted")
#: Selectors whose subsets are probability samples with known inclusion probabilities.
PROBABILITY_DESIGNS = frozenset({"random", "subtask_stratified", "confidence_stratified"})
#: Default small-sample interval for unweighted 0/1 probability subsets (coverage study, GPQA).
DEFAULT_SMALL_N = "wilson_fpc"
#: Multiplier of the reference-calibrated spread, measured by ``bench/bench_coverage.py``.
CALIBRATION_INFLATION = 1.1
#: Smallest subset offered the model-assisted estimator (its tails undercover at n = 25 on GPQA:
#: 0.921-0.925 in the top 20 %, 20 repeats; >= 0.939 from n = 50).
MIN_MODEL_ASSISTED_N = 50
#: Fewest reference models a calibrated interval is computed from.
MIN_REFERENCE_MODELS = 20
_LINEAR = frozenset({"mean", "weighted_mean", "horvitz_thompson", "irt"})


@dataclass(frozen=True)
class EstimateBatch:
    """One estimator's estimates for ``m`` scored models (arrays of shape ``(m,)``).

    Attributes
    ----------
    estimator : str
        Estimator name (``"mean"``, ``"p_irt"``...).
    value, ci_low, ci_high, se : ndarray of float64
        Point estimate, interval and standard error (NaN when unavailable).
    raw_value : ndarray of float64
        The estimator's own value before a calibration shifted it (equal to ``value`` otherwise).
    interval : str or None
        How the interval was computed (``"wilson_fpc"``, ``"hypergeometric"``,
        ``"stratified_ht"``, ``"reference_calibrated"``...).
    basis : str
        ``"design"`` (probability sample, valid whatever the models), ``"model"`` (relies on a
        model of the items or of the reference population) or ``"model-assisted"``.
    confidence : float
    available : bool
    note : str or None
        Why an estimate is unavailable, or a warning about its interval.
    """

    estimator: str
    value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    se: np.ndarray
    raw_value: np.ndarray
    interval: str | None
    basis: str
    confidence: float = 0.95
    available: bool = True
    note: str | None = None

    def row(self, i: int = 0) -> dict:
        """Model ``i``'s estimate as plain Python values (what a service serialises)."""

        def f(x):
            v = float(x[i])
            return None if not np.isfinite(v) else v

        return {
            "estimator": self.estimator,
            "value": f(self.value),
            "raw_value": f(self.raw_value),
            "ci_low": f(self.ci_low),
            "ci_high": f(self.ci_high),
            "se": f(self.se),
            "interval": self.interval,
            "basis": self.basis,
            "confidence": self.confidence,
            "available": self.available,
            "note": self.note,
        }


def _batch(name, value, lo, hi, se, interval, basis, confidence, raw=None, note=None):
    v = np.asarray(value, dtype=np.float64)
    return EstimateBatch(
        estimator=name,
        value=v,
        ci_low=np.asarray(lo, dtype=np.float64),
        ci_high=np.asarray(hi, dtype=np.float64),
        se=np.asarray(se, dtype=np.float64),
        raw_value=v if raw is None else np.asarray(raw, dtype=np.float64),
        interval=interval,
        basis=basis,
        confidence=confidence,
        note=note,
    )


def _unavailable(name: str, m: int, note: str, confidence: float, value=None) -> EstimateBatch:
    nan = np.full(m, np.nan)
    v = nan if value is None else np.asarray(value, dtype=np.float64)
    return EstimateBatch(
        estimator=name,
        value=v,
        ci_low=nan,
        ci_high=nan,
        se=nan,
        raw_value=v,
        interval=None,
        basis="model",
        confidence=confidence,
        available=value is not None,
        note=note,
    )


def design_inclusion(selection: Selection, n_population: int) -> tuple[np.ndarray, np.ndarray]:
    """Inclusion probabilities and stratum labels of a probability subset's items.

    Returns
    -------
    pi : ndarray, shape (k,)
        ``fitted["inclusion_probability"]`` when stored, else ``1 / (N w_i)`` (the weights of
        stratified SRS subsets are ``N_h / (N n_h)``; uniform weights give ``n / N``).
    strata : ndarray of int, shape (k,)
        Items grouped by equal ``pi`` (strata with the same sampling fraction are collapsed,
        which can only overstate the variance of a stratified design).
    """
    w = np.asarray(selection.weights, dtype=np.float64)
    if "inclusion_probability" in selection.fitted:
        pi = np.asarray(selection.fitted["inclusion_probability"], dtype=np.float64)
    else:
        pi = np.clip(1.0 / (n_population * w / w.sum()), 0.0, 1.0)
    _, strata = np.unique(np.round(pi, 12), return_inverse=True)
    return pi, strata.ravel()


def _irt_delta(selection: Selection, y: np.ndarray, name: str, n_population: int) -> np.ndarray:
    """The service's delta-method SEs of p-IRT / gp-IRT (item parameters treated as known)."""
    f = selection.fitted
    bank = item_bank(selection)
    anchors = np.asarray(f["anchor_candidate_positions"], dtype=np.int64)
    ability = bank.score(y, anchors, prior=float(f["ability_prior"]))
    rest = np.setdiff1d(np.arange(bank.n_items), anchors, assume_unique=True)
    lam = anchors.size / bank.n_items
    se_rest = bank.predict_accuracy(ability, rest)[1] if rest.size else np.zeros(y.shape[0])
    p_se = (1.0 - lam) * se_rest
    if name == "p_irt":
        return p_se
    lin = _weighted_se(y, selection.weights, n_population)
    lam_gp = float(f.get("lambda_gp", np.nan))
    return np.hypot(lam_gp * lin, (1.0 - lam_gp) * p_se)


def _weighted_se(y: np.ndarray, w: np.ndarray, n_population: int) -> np.ndarray:
    """Vectorised ``weighted_estimate(...).se`` (linearised SE of a weighted mean, with FPC)."""
    k = w.shape[0]
    if k < 2:
        return np.zeros(y.shape[0])
    vw = y @ w / w.sum()
    ss = ((y - vw[:, None]) ** 2) @ (w**2)
    return np.sqrt(fpc(k, n_population) * ss * k / (k - 1)) / w.sum()


def _kish_wilson(values: np.ndarray, w: np.ndarray, n_population: int, z: float):
    """Vectorised :func:`weighted_estimate` bounds (Wilson at Kish's n with the FPC)."""
    k = w.shape[0]
    n_w = kish_n_eff(w)
    f = fpc(k, n_population)
    p = np.clip(values, 0.0, 1.0)
    if f == 0.0:
        return p, p
    n_eff = n_w / f
    denom = 1.0 + z * z / n_eff
    center = (p + z * z / (2.0 * n_eff)) / denom
    half = z / denom * np.sqrt(p * (1.0 - p) / n_eff + z * z / (4.0 * n_eff * n_eff))
    return np.maximum(0.0, center - half), np.minimum(1.0, center + half)


def score_models(
    selection: Selection,
    correct,
    n_population: int,
    *,
    confidence_values=None,
    reference_correct=None,
    reference_confidence=None,
    level: float = 0.95,
    small_n: str = DEFAULT_SMALL_N,
    calibrate: bool = True,
    inflation: float = CALIBRATION_INFLATION,
    estimators: tuple[str, ...] | None = None,
    reference_values: dict[str, np.ndarray] | None = None,
    calibrations: dict[str, ReferenceCalibration] | None = None,
) -> list[EstimateBatch]:
    """Every estimate a subset offers for models known only on its items, with honest intervals.

    Parameters
    ----------
    selection : Selection
        The stored subset.
    correct : array_like, shape (m, k) or (k,)
        The scored models' per-item scores in [0, 1], in ``selection.indices`` order.
    n_population : int
        ``N``, the benchmark's size.
    confidence_values : array_like, shape (m, k), optional
        Gold-option probabilities (for ``weighted_confidence``).
    reference_correct : array_like, shape (r, N), optional
        Full results of reference models (the subset's source models): needed to calibrate the
        intervals of non-probability subsets (DPP, Anchor Points, tinyBenchmarks).
    reference_confidence : array_like, shape (r, N), optional
        Their gold-option probabilities (calibrates ``weighted_confidence``).
    level : float
        Confidence level of the intervals.
    small_n : {"wilson_fpc", "clopper_pearson", "jeffreys", "hypergeometric"}
        Interval for unweighted 0/1 probability subsets.
    calibrate : bool
        ``False`` keeps the uncalibrated (pre-issue-13) intervals of non-probability subsets.
    inflation : float
        Spread multiplier of the reference-calibrated interval (:data:`CALIBRATION_INFLATION`).
    estimators : tuple of str, optional
        Which estimators (default: every one the selector offers).
    reference_values : dict of str to ndarray, optional
        Precomputed estimator values on the reference models (:func:`reference_estimates` of
        the same ``reference_correct``): the calibration then skips re-running the estimators
        on them (a service caches these per subset and results).
    calibrations : dict of str to ReferenceCalibration, optional
        Precomputed error laws (:func:`reference_calibrations` of the same references): used
        for an estimator when computed at this ``level`` and ``inflation``; then neither the
        estimator nor the kernel smoothing is re-run on the references.

    Returns
    -------
    list of EstimateBatch
        One per estimator, in the selector's order.

    Notes
    -----
    * Probability subsets (:data:`PROBABILITY_DESIGNS`), basis ``design``: unweighted 0/1 results
      get the ``small_n`` interval; weighted (stratified, Horvitz-Thompson) subsets get the
      stratified HT variance ``sum_h N_h^2 (1 - n_h/N_h) s_h^2 / n_h / N^2`` and a Student
      ``t_{n-H}`` interval
      (:func:`app.core.intervals.difference_estimate` with zero predictions), falling back to
      Wilson at Kish's size when the residual variance is 0 (never a zero-width interval).
    * Probability subsets of 0/1 results with reference models and ``k >= MIN_MODEL_ASSISTED_N``
      also get ``model_assisted`` (:func:`model_assisted`, basis ``model-assisted``), appended
      after the selector's estimators.
    * Non-probability subsets, basis ``model``: with ``>= MIN_REFERENCE_MODELS`` reference models,
      the estimator is applied to them and its error law is inverted
      (:func:`app.core.intervals.reference_calibrated_interval`): the value is bias-corrected and
      ``raw_value`` keeps the estimator's own number. Without references the pre-issue-13
      interval is returned with a warning ``note`` (it is not calibrated: measured coverage on
      GPQA 0.63-0.99).
    """
    y = np.asarray(correct, dtype=np.float64)
    if y.ndim == 1:
        y = y[None, :]
    k = selection.size
    if y.ndim != 2 or y.shape[1] != k:
        raise ValueError(f"correct: expected shape (n_models, {k}), got {np.shape(correct)}")
    if small_n not in SMALL_N_METHODS:
        raise ValueError(f"small_n: expected one of {SMALL_N_METHODS}, got {small_n!r}")
    conf = None if confidence_values is None else np.atleast_2d(np.asarray(confidence_values))
    ref = None if reference_correct is None else np.asarray(reference_correct, dtype=np.float64)
    if ref is not None and (ref.ndim != 2 or ref.shape[1] != n_population):
        raise ValueError(f"reference_correct: expected shape (n_models, {n_population})")
    z = _z(level)
    m = y.shape[0]
    w = np.asarray(selection.weights, dtype=np.float64)
    binary = bool(np.all((y == 0) | (y == 1)))
    uniform = bool(np.allclose(w, 1.0 / k))
    design = selection.method in PROBABILITY_DESIGNS
    names = estimators
    if names is None:
        from app.core.selectors import SELECTORS  # selectors import estimators: avoid a cycle

        cls = SELECTORS.get(selection.method)
        names = tuple(cls.estimators) if cls is not None else (selection.estimator,)
    out = []
    pending: list[EstimateBatch] = []
    for name in names:  # a handful of estimators
        signal = y
        if name == "weighted_confidence":
            if conf is None:
                out.append(
                    _unavailable(
                        name,
                        m,
                        "needs confidences (probability on the gold answer) in the upload",
                        level,
                    )
                )
                continue
            signal = conf
        try:
            value = _core_estimate(
                selection, signal, None if conf is None else conf, estimator=name
            )
        except ValueError as exc:
            out.append(_unavailable(name, m, str(exc), level))
            continue
        if (
            design
            and name in _LINEAR
            and name == names[0]
            and ref is not None
            and binary
            and k >= MIN_MODEL_ASSISTED_N
        ):
            extra = model_assisted(selection, y, n_population, ref, level=level)
        else:
            extra = None
        if design and name in _LINEAR:
            if extra is not None:
                pending.append(extra)
            out.append(
                _design_batch(
                    name,
                    value,
                    signal,
                    selection,
                    n_population,
                    binary and uniform,
                    small_n,
                    level,
                    z,
                )
            )
            continue
        ref_signal = ref
        if name == "weighted_confidence":
            ref_signal = None if reference_confidence is None else np.asarray(reference_confidence)
        cal = None if calibrations is None else calibrations.get(name)
        if cal is not None and calibrate and cal.confidence == level and cal.inflation == inflation:
            val, lo, hi, se = cal.apply(value)
            out.append(
                _batch(name, val, lo, hi, se, "reference_calibrated", "model", level, raw=value)
            )
            continue
        if calibrate and ref_signal is not None and ref_signal.shape[0] >= MIN_REFERENCE_MODELS:
            if reference_values is not None and name in reference_values:
                r_val = np.asarray(reference_values[name], dtype=np.float64)
            else:
                r_val = _core_estimate(
                    selection,
                    ref_signal[:, selection.indices],
                    None
                    if reference_confidence is None
                    else np.asarray(reference_confidence)[:, selection.indices],
                    estimator=name,
                )
            truth = ref_signal.mean(axis=1)
            val, lo, hi, se = reference_calibrated_interval(
                value, r_val, truth, confidence=level, inflation=inflation
            )
            out.append(
                _batch(name, val, lo, hi, se, "reference_calibrated", "model", level, raw=value)
            )
            continue
        note = (
            "not a probability sample: interval not calibrated (give reference models)"
            if not design
            else None
        )
        if name in ("p_irt", "gp_irt"):
            try:
                se = _irt_delta(selection, y, name, n_population)
            except ValueError as exc:
                out.append(_unavailable(name, m, str(exc), level, value))
                continue
            lo, hi = np.maximum(0.0, value - z * se), np.minimum(1.0, value + z * se)
            out.append(
                _batch(
                    name, value, lo, hi, se, "irt_ability_delta_method", "model", level, note=note
                )
            )
            continue
        lo, hi = _kish_wilson(value, w, n_population, z)
        se = _weighted_se(signal, w, n_population)
        if uniform and binary and name != "weighted_confidence":
            lo, hi = proportion_interval(
                signal.sum(axis=1).round(),
                k,
                method="wilson_fpc",
                n_population=n_population,
                confidence=level,
            )
        out.append(_batch(name, value, lo, hi, se, "wilson_kish_fpc", "model", level, note=note))
    return out + pending


def reference_estimates(
    selection: Selection,
    reference_correct,
    *,
    reference_confidence=None,
    estimators: tuple[str, ...] | None = None,
) -> dict[str, np.ndarray]:
    """Each model-based estimator's values on the reference models, as :func:`score_models`
    calibrates them (pass the result as its ``reference_values``).

    Only estimators :func:`score_models` calibrates are computed (those of non-probability
    subsets, and ``irt``-type ones of any subset outside :data:`PROBABILITY_DESIGNS`);
    ``weighted_confidence`` only with ``reference_confidence``. Estimators that fail on the
    references are left out (:func:`score_models` then reports them as it would anyway).

    Returns
    -------
    dict of str to ndarray, shape (r,)
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    conf = None if reference_confidence is None else np.asarray(reference_confidence)
    names = estimators
    if names is None:
        from app.core.selectors import SELECTORS

        cls = SELECTORS.get(selection.method)
        names = tuple(cls.estimators) if cls is not None else (selection.estimator,)
    design = selection.method in PROBABILITY_DESIGNS
    out: dict[str, np.ndarray] = {}
    c_sub = None if conf is None else conf[:, selection.indices]
    for name in names:  # a handful of estimators
        if design and name in _LINEAR:
            continue
        signal = ref
        if name == "weighted_confidence":
            if conf is None:
                continue
            signal = conf
        try:
            out[name] = _core_estimate(
                selection, signal[:, selection.indices], c_sub, estimator=name
            )
        except ValueError:
            continue
    return out


def reference_calibrations(
    selection: Selection,
    reference_correct,
    *,
    level: float = 0.95,
    inflation: float = CALIBRATION_INFLATION,
    values: dict[str, np.ndarray] | None = None,
) -> dict[str, ReferenceCalibration]:
    """The error law :func:`score_models` inverts for each calibrated estimator, computed once
    from the reference models (pass the result as its ``calibrations``).

    Empty with fewer than :data:`MIN_REFERENCE_MODELS` references (``score_models`` then does
    not calibrate either). ``values``: :func:`reference_estimates` when already computed.
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    if ref.ndim != 2 or ref.shape[0] < MIN_REFERENCE_MODELS:
        return {}
    vals = reference_estimates(selection, ref) if values is None else values
    truth = ref.mean(axis=1)
    return {
        name: calibrate_references(v, truth, confidence=level, inflation=inflation)
        for name, v in vals.items()  # a handful of estimators
        if name != "weighted_confidence"  # calibrated on confidences, not on correctness
    }


def reference_predictions(selection: Selection, y: np.ndarray, reference_correct) -> np.ndarray:
    """Per-item predictions for each scored model from reference models' item accuracies.

    ``yhat_ij = sigmoid(logit(pbar_j) + theta_i)`` with ``pbar_j`` item ``j``'s accuracy among
    the references (shrunk: ``(s_j + 1/2) / (r + 1)``) and ``theta_i`` solving
    ``sum_{j in S} yhat_ij = sum_{j in S} y_ij`` (a one-parameter Rasch-type shift, batched
    Newton over models; ``|theta| <= 8``).

    Returns
    -------
    ndarray, shape (m, N)
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    pbar = (ref.sum(axis=0) + 0.5) / (ref.shape[0] + 1.0)
    base = np.log(pbar / (1.0 - pbar))
    bs = base[selection.indices]
    target = y.sum(axis=1)
    theta = np.zeros(y.shape[0])
    for _ in range(30):  # Newton iterations (vectorised over models)
        p = 1.0 / (1.0 + np.exp(-(bs[None, :] + theta[:, None])))
        g = p.sum(axis=1) - target
        h = np.maximum((p * (1.0 - p)).sum(axis=1), 1e-9)
        theta = np.clip(theta - g / h, -8.0, 8.0)
    return 1.0 / (1.0 + np.exp(-(base[None, :] + theta[:, None])))


def model_assisted(
    selection: Selection, y, n_population: int, reference_correct, *, level: float = 0.95
) -> EstimateBatch:
    """Model-assisted difference estimator on a probability subset (estimator ``model_assisted``).

    Predictions from :func:`reference_predictions`; value and variance from
    :func:`app.core.intervals.difference_estimate` with the design's inclusion probabilities and
    strata (:func:`design_inclusion`). The residual variance is inflated by ``n / (n - 2)`` for
    the fitted shift, floored at the SE the predictions themselves imply for 0/1 results,
    ``sqrt(f mean_S yhat (1 - yhat) / n)`` (small subsets estimate the residual variance poorly;
    the floor only widens), and the interval uses Student's ``t_{n-2}``. Design-consistent whatever
    the predictions (basis ``model-assisted``); falls back to Clopper-Pearson bounds when all
    residuals vanish (never a zero-width interval).
    """
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    k = selection.size
    yhat = reference_predictions(selection, y, reference_correct)
    pi, strata = design_inclusion(selection, n_population)
    resid = y - yhat[:, selection.indices]
    value, se = difference_estimate(resid, yhat.mean(axis=1), pi, n_population, strata=strata)
    se = se * np.sqrt(k / max(k - 2, 1))
    ys = yhat[:, selection.indices]
    se_bernoulli = np.sqrt(fpc(k, n_population) * np.mean(ys * (1.0 - ys), axis=1) / k)
    se = np.maximum(se, se_bernoulli)  # small-n floor: only ever widens
    q = float(_st.t.ppf(0.5 + level / 2.0, max(k - 2, 1)))
    lo, hi = np.clip(value - q * se, 0.0, 1.0), np.clip(value + q * se, 0.0, 1.0)
    zero = se <= 0
    if zero.any():
        clo, chi = proportion_interval(np.round(y.sum(axis=1)), k, method="clopper_pearson")
        lo, hi = np.where(zero, clo, lo), np.where(zero, chi, hi)
    return _batch("model_assisted", value, lo, hi, se, "difference_fpc", "model-assisted", level)


def _design_batch(name, value, y, selection, n_population, unweighted01, small_n, level, z):
    k = selection.size
    if unweighted01:
        succ = np.round(y.sum(axis=1))
        lo, hi = proportion_interval(
            succ, k, method=small_n, n_population=n_population, confidence=level
        )
        p = succ / k
        se = np.sqrt(fpc(k, n_population) * p * (1.0 - p) / k)
        return _batch(name, value, lo, hi, se, small_n, "design", level)
    pi, strata = design_inclusion(selection, n_population)
    _, se = difference_estimate(y, np.zeros(y.shape[0]), pi, n_population, strata=strata)
    df = max(k - int(strata.max()) - 1, 1)  # n - H degrees of freedom of the stratified variance
    q = float(_st.t.ppf(0.5 + level / 2.0, df))
    lo, hi = np.maximum(0.0, value - q * se), np.minimum(1.0, value + q * se)
    zero = se <= 0
    if zero.any():  # all residuals equal: never a zero-width interval
        klo, khi = _kish_wilson(value, selection.weights, n_population, z)
        lo, hi = np.where(zero, klo, lo), np.where(zero, khi, hi)
    return _batch(name, value, lo, hi, se, "stratified_ht", "design", level)


__all__ = [
    "BASES",
    "CALIBRATION_INFLATION",
    "DEFAULT_SMALL_N",
    "MIN_MODEL_ASSISTED_N",
    "MIN_REFERENCE_MODELS",
    "PROBABILITY_DESIGNS",
    "EstimateBatch",
    "design_inclusion",
    "kish_n_eff",
    "model_assisted",
    "reference_calibrations",
    "reference_estimates",
    "reference_predictions",
    "score_models",
    "size_needed_for_gap",
    "weighted_estimate",
    "weighted_paired_comparison",
]
