"""Sample-size planning and pair verdicts (the math behind the API's verdict and plan endpoints).

Random subsets are answered exactly (:mod:`app.core.reliability.exact`). Other methods are answered from their
robust agreement curves (:func:`app.core.reliability.mdad.analyze_protocol` with ``mode="robust"``): the curve
value at the pair's gap at each evaluated size, linearly interpolated in ``log n`` between sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.core.reliability.exact import (
    as_binary,
    discordant_counts,
    exact_agreement,
    pair_probability,
    smallest_n,
    stratified_order_probabilities,
)
from app.core.reliability.mdad import DEFAULT_THRESHOLD
from app.core.results import MDADResult, Plan, Verdict


def _sorted_results(results: Sequence[MDADResult], method: str | None = None) -> list[MDADResult]:
    chosen = [r for r in results if method is None or r.method == method]
    if not chosen:
        raise ValueError(f"results: no agreement curves for method {method!r}")
    if any(r.curve is None for r in chosen):
        raise ValueError("results: every result needs its agreement curve")
    sizes = [r.n for r in chosen]
    if len(set(sizes)) != len(sizes):
        raise ValueError("results: expected one curve per size (filter by split first)")
    return sorted(chosen, key=lambda r: r.n)


def _interp_log_n(n: int, sizes: np.ndarray, values: np.ndarray) -> float:
    """Linear interpolation in log n; clamped to the end values outside the evaluated sizes."""
    return float(np.interp(math.log(n), np.log(sizes), values))


def _crossing(sizes: np.ndarray, p: np.ndarray, threshold: float) -> int | None:
    """Smallest n where the log-n interpolation of ``p`` reaches ``threshold``.

    Sizes are scanned for the first one reaching the threshold; between it and its predecessor the
    crossing of the linear (in log n) interpolation is returned, rounded up. If the smallest size
    already reaches it, that size is returned (no extrapolation below the evaluated range).
    """
    ok = np.flatnonzero(p >= threshold)
    if ok.size == 0:
        return None
    i = int(ok[0])
    if i == 0:
        return int(sizes[0])
    l0, l1 = math.log(sizes[i - 1]), math.log(sizes[i])
    frac = (threshold - p[i - 1]) / (p[i] - p[i - 1])
    return int(min(sizes[i], math.ceil(math.exp(l0 + frac * (l1 - l0)) - 1e-9)))


def curve_probability(
    results: Sequence[MDADResult], gap: float, n: int
) -> tuple[float, float, float, float, float]:
    """Agreement-curve probabilities at ``|gap|`` for size ``n``, interpolated in log n.

    Parameters
    ----------
    results : sequence of MDADResult
        One method's robust (or exact) results at several sizes, with curves.
    gap : float
        Full-benchmark accuracy difference.
    n : int

    Returns
    -------
    p_same, p_tie, p_reversed, ci_low, ci_high : float
        ``p_same`` from the monotone fit (raw proportion if the curve has none); ``p_tie`` the
        raw tie proportion; ``p_reversed = 1 - p_same - p_tie`` (clipped at 0); the CI from the
        curve's bootstrap band when present, else ``p_same``.
    """
    rs = _sorted_results(results)
    sizes = np.array([r.n for r in rs], dtype=np.float64)
    same = np.array([float(r.curve.at(gap)) for r in rs])
    tie_raw = []
    lo, hi = [], []
    for r in rs:  # a handful of sizes
        c = r.curve
        idx = int(
            np.clip(np.searchsorted(c.gaps, abs(gap) + 1e-12, side="right") - 1, 0, len(c.gaps) - 1)
        )
        tie_raw.append(float(c.p_tie[idx]))
        lo.append(float(c.band_low[idx]) if c.band_low is not None else float(c.at(gap)))
        hi.append(float(c.band_high[idx]) if c.band_high is not None else float(c.at(gap)))
    p_same = _interp_log_n(n, sizes, same)
    p_tie = _interp_log_n(n, sizes, np.array(tie_raw))
    return (
        p_same,
        p_tie,
        max(0.0, 1.0 - p_same - p_tie),
        _interp_log_n(n, sizes, np.array(lo)),
        _interp_log_n(n, sizes, np.array(hi)),
    )


def _mdad_at(results: Sequence[MDADResult], n: int) -> float | None:
    rs = _sorted_results(results)
    sizes = np.array([r.n for r in rs])
    if n in sizes:
        return rs[int(np.flatnonzero(sizes == n)[0])].mdad
    if n < sizes[0] or n > sizes[-1]:
        return None
    i = int(np.searchsorted(sizes, n))
    a, b = rs[i - 1].mdad, rs[i].mdad
    if a is None or b is None:
        return None
    return _interp_log_n(n, sizes[i - 1 : i + 1].astype(float), np.array([a, b]))


def verdict(
    correct,
    a: int,
    b: int,
    n: int,
    *,
    method: str = "random",
    subtasks=None,
    results: Sequence[MDADResult] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    mdad: float | None = None,
) -> Verdict:
    """Whether an ``n``-item micro-benchmark built by ``method`` orders models A and B reliably.

    Parameters
    ----------
    correct : array_like, shape (n_models, n_items)
        The full benchmark (defines the full-benchmark order and gap): 0/1 for the exact
        methods; scores in [0, 1] (graded, issue 35) are accepted for curve-based methods,
        which use the pair only through its gap (the curves of an analysis run on the same
        graded matrix).
    a, b : int
        Row positions of the two models.
    n : int
        Micro-benchmark size.
    method : str
        ``"random"`` and ``"subtask_stratified"`` are computed exactly (the latter needs
        ``subtasks``); any other method needs ``results``.
    subtasks : array_like of str, optional
    results : sequence of MDADResult, optional
        The method's robust results (one split) at several sizes, with curves. When given for
        ``subtask_stratified`` they supply its MDAD.
    threshold : float
        Probability required to call the pair distinguishable.
    mdad : float, optional
        The method's MDAD at ``n`` if already known (e.g. stored); for ``random`` it is otherwise
        computed exactly over all pairs of the benchmark (:func:`app.core.reliability.exact.exact_agreement`).

    Returns
    -------
    Verdict
        ``distinguishable = p_same >= threshold``; ``n_needed`` the size needed: for random and
        subtask_stratified an exact search (the first size of a geometric grid reaching the
        threshold, then every size after the grid point before it; P(same order) is not exactly
        monotone in n, so a smaller size that reaches the threshold only transiently, between
        two grid points that do not, is not reported); for curve-based methods the log-n
        interpolation of the curve values at the pair's gap, ``None`` if no evaluated size
        reaches it.
    """
    exact = method == "random" or (method == "subtask_stratified" and subtasks is not None)
    c = as_binary(correct) if exact else _as_scores(correct)
    n_models, n_items = c.shape
    for name, v in (("a", a), ("b", b)):
        if not 0 <= int(v) < n_models:
            raise ValueError(f"{name}: model row must lie in [0, {n_models})")
    if a == b:
        raise ValueError("b: must differ from a")
    if not 1 <= int(n) <= n_items:
        raise ValueError(f"n: expected 1 <= n <= {n_items}")
    gap = float(c[a].mean() - c[b].mean())
    if method == "random":
        probs = pair_probability(c, a, b, n)
        p_same, p_tie, p_rev = (float(probs.p_greater), float(probs.p_equal), float(probs.p_less))
        lo = hi = p_same
        if mdad is None:
            mdad = exact_agreement(c, n, threshold=threshold).mdad
        n_needed = smallest_n(c, a, b, threshold)
        basis = "exact"
    elif method == "subtask_stratified" and subtasks is not None:
        probs = pair_probability(c, a, b, n, subtasks=subtasks)
        p_same, p_tie, p_rev = (float(probs.p_greater), float(probs.p_equal), float(probs.p_less))
        lo = hi = p_same
        if mdad is None and results is not None:
            mdad = _mdad_at(results, n)
        n_needed = _smallest_n_stratified(c, a, b, subtasks, threshold)
        basis = "exact_stratified"
    else:
        if results is None:
            raise ValueError(f"results: method {method!r} needs its robust agreement curves")
        rs = _sorted_results(results, method)
        p_same, p_tie, p_rev, lo, hi = curve_probability(rs, gap, n)
        if mdad is None:
            mdad = _mdad_at(rs, n)
        sizes = np.array([r.n for r in rs])
        n_needed = _crossing(sizes, np.array([float(r.curve.at(gap)) for r in rs]), threshold)
        basis = "robust_curve"
    return Verdict(
        model_a=int(a),
        model_b=int(b),
        method=method,
        n=int(n),
        gap=gap,
        p_same=p_same,
        p_tie=p_tie,
        p_reversed=p_rev,
        ci_low=float(lo),
        ci_high=float(hi),
        mdad=mdad,
        threshold=float(threshold),
        distinguishable=bool(p_same >= threshold),
        n_needed=n_needed,
        basis=basis,
    )


def _as_scores(correct) -> np.ndarray:
    """``correct`` as a non-empty 2-d float64 array of scores in [0, 1] (``ValueError`` else)."""
    c = np.asarray(correct, dtype=np.float64)
    if c.ndim != 2 or c.size == 0:
        raise ValueError("correct: expected a non-empty 2-d array (models x items)")
    if not np.isfinite(c).all() or c.min() < 0.0 or c.max() > 1.0:
        raise ValueError("correct: expected scores in [0, 1]")
    return c


def _smallest_n_stratified(c: np.ndarray, a: int, b: int, subtasks, threshold: float) -> int | None:
    n10, n01 = discordant_counts(c, a, b)
    if int(n10) == int(n01):
        return None
    st = np.asarray(subtasks).astype(str)
    _, codes = np.unique(st, return_inverse=True)
    n_max = int(np.bincount(codes).min()) * (int(codes.max()) + 1)  # equal allocation must fit
    flip = int(n10) < int(n01)

    def p_at(n: int) -> float:
        pr = stratified_order_probabilities(c[a], c[b], st, n)
        return float(pr.p_less if flip else pr.p_greater)

    grid = np.unique(np.geomspace(1, n_max, 32).round().astype(np.int64))
    p = np.array([p_at(int(n)) for n in grid])  # one DP per size (sizes, not pairs)
    ok = np.flatnonzero(p >= threshold)
    if ok.size == 0:
        return None
    i = int(ok[0])
    low = 1 if i == 0 else int(grid[i - 1]) + 1
    for n in range(low, int(grid[i]) + 1):
        if p_at(n) >= threshold:
            return n
    return int(grid[i])  # pragma: no cover - grid[i] itself reaches it


def plan(
    gap: float,
    method: str = "random",
    probability: float = DEFAULT_THRESHOLD,
    *,
    results: Sequence[MDADResult] | None = None,
    correct=None,
    sizes: Sequence[int] | None = None,
) -> Plan:
    """Smallest micro-benchmark size whose MDAD (at ``probability``) is at most ``gap``.

    Parameters
    ----------
    gap : float
        Accuracy difference to be detected (accuracy units, e.g. 0.03 for 3 points).
    method : str
    probability : float
        Agreement level defining the MDAD.
    results : sequence of MDADResult, optional
        The method's curves at several sizes (robust, or exact for random). Used when given.
    correct : array_like of {0, 1}, optional
        For ``method="random"`` without ``results``: the benchmark, whose exact curves are computed
        at ``sizes`` (default a geometric grid of 10 sizes from 10 to ``N``) and refined by
        bisection between the two sizes bracketing the answer.
    sizes : sequence of int, optional

    Returns
    -------
    Plan
        ``n`` is the smallest size with ``MDAD(n) <= gap``, i.e. curve value at ``gap`` ``>=
        probability`` (equivalent for monotone curves); ``None`` if no evaluated size reaches it.
        From curves, sizes between evaluated ones come from the log-n interpolation.
    """
    if not gap > 0:
        raise ValueError(f"gap: expected a positive accuracy difference, got {gap}")
    if results is not None:
        rs = _sorted_results(results, method)
        grid = np.array([r.n for r in rs])
        p = np.array([float(r.curve.at(gap)) for r in rs])
        mdads = np.array([np.nan if r.mdad is None else r.mdad for r in rs])
        basis = "exact" if all(r.mode == "exact" for r in rs) else "robust_curve"
        return Plan(gap, method, probability, _crossing(grid, p, probability), grid, mdads, basis)
    if method != "random" or correct is None:
        raise ValueError("results: planning for this method needs its agreement curves")
    c = as_binary(correct)
    n_items = c.shape[1]
    if sizes is None:
        grid = np.unique(np.geomspace(min(10, n_items), n_items, 10).round().astype(np.int64))
    else:
        grid = np.unique(np.asarray(sizes, dtype=np.int64))
    cache: dict[int, MDADResult] = {}

    def at(n: int) -> MDADResult:
        if n not in cache:
            cache[n] = exact_agreement(c, n, threshold=probability)
        return cache[n]

    def reaches(n: int) -> bool:
        return float(at(n).curve.at(gap)) >= probability

    ok = [i for i, n in enumerate(grid) if reaches(int(n))]  # a few sizes, each vectorised
    mdads = np.array([np.nan if at(int(n)).mdad is None else at(int(n)).mdad for n in grid])
    if not ok:
        return Plan(gap, method, probability, None, grid, mdads, "exact")
    i = ok[0]
    lo_n, hi_n = (0 if i == 0 else int(grid[i - 1])), int(grid[i])
    while hi_n - lo_n > 1:  # bisection, assuming MDAD(n) non-increasing between the two sizes
        mid = (lo_n + hi_n) // 2
        if reaches(mid):
            hi_n = mid
        else:
            lo_n = mid
    return Plan(gap, method, probability, hi_n, grid, mdads, "exact")


@dataclass(frozen=True)
class RandomVersusBest:
    """At one size ``n``: the method with the lowest MDAD and whether random sampling's MDAD
    lies within that method's confidence interval (``None`` fields: no method reached the
    threshold at ``n``)."""

    n: int
    best_method: str | None
    best_mdad: float | None
    best_ci_high: float | None
    random_mdad: float | None
    random_within_ci: bool | None


@dataclass(frozen=True)
class Recommendation:
    """The analysis' recommendation (seen split): smallest size per method and random vs best.

    Attributes
    ----------
    gap, threshold : float
    smallest_n : Mapping[str, int or None]
        Per method, the smallest evaluated size whose MDAD is at most ``gap`` (None: none).
    random_vs_best : tuple of RandomVersusBest or None
        One per evaluated size (ascending) when ``"random"`` is among the methods, else None.
    """

    gap: float
    threshold: float
    smallest_n: Mapping[str, int | None]
    random_vs_best: tuple[RandomVersusBest, ...] | None


def recommend(
    cells: Sequence[MDADResult],
    methods: Sequence[str],
    sizes: Sequence[int],
    *,
    gap: float,
    threshold: float,
) -> Recommendation:
    """Smallest size per method whose MDAD reaches ``gap``, and random sampling vs the best method.

    Parameters
    ----------
    cells : sequence of MDADResult
        The analysis' results; only the ``"seen"`` split is used. Every (method, size) must be
        present.
    methods : sequence of str
        Methods in the order that breaks ties (the first of equal MDADs is the best).
    sizes : sequence of int
        Evaluated sizes (any order).
    gap : float
        Accuracy difference the micro-benchmark must resolve.
    threshold : float
        The agreement level the MDADs were computed at (recorded only).

    Returns
    -------
    Recommendation

    Notes
    -----
    A method that does not reach the threshold at ``n`` counts as ``MDAD(n) = inf``. Then
    ``smallest_n[m] = min{n : MDAD_m(n) <= gap}`` (tolerance 1e-12). At each ``n`` the best method
    is ``argmin_m MDAD_m(n)``; random is *within* its CI when ``MDAD_random(n) <= ci_high`` of the
    best (tolerance 1e-12), or, when that CI has no upper end, when random's MDAD is finite.
    """
    index = {(c.method, int(c.n)): c for c in cells if c.split == "seen"}
    methods = list(methods)
    sizes = sorted(int(n) for n in sizes)
    mdad = np.array(
        [
            [
                float(c.mdad) if (c := index[(m, n)]).reached and c.mdad is not None else math.inf
                for n in sizes
            ]
            for m in methods
        ],
        dtype=np.float64,
    ).reshape(len(methods), len(sizes))
    ok = mdad <= gap + 1e-12
    first = ok.argmax(axis=1)
    smallest = {m: (sizes[int(first[i])] if ok[i].any() else None) for i, m in enumerate(methods)}
    versus = None
    if "random" in methods:
        rv = mdad[methods.index("random")]
        best = mdad.argmin(axis=0)  # first method among equal MDADs
        rows = []
        for j, n in enumerate(sizes):  # a handful of sizes
            if not np.isfinite(mdad[:, j]).any():
                rows.append(RandomVersusBest(n, None, None, None, None, None))
                continue
            cb = index[(methods[int(best[j])], n)]
            finite = bool(np.isfinite(rv[j]))
            within = (cb.ci_high is None and finite) or (
                cb.ci_high is not None and bool(rv[j] <= cb.ci_high + 1e-12)
            )
            rows.append(
                RandomVersusBest(
                    n=n,
                    best_method=cb.method,
                    best_mdad=cb.mdad,
                    best_ci_high=cb.ci_high,
                    random_mdad=float(rv[j]) if finite else None,
                    random_within_ci=within,
                )
            )
        versus = tuple(rows)
    return Recommendation(
        gap=float(gap), threshold=float(threshold), smallest_n=smallest, random_vs_best=versus
    )


__all__ = [
    "RandomVersusBest",
    "Recommendation",
    "curve_probability",
    "plan",
    "recommend",
    "verdict",
]
