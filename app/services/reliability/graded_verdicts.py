"""Verdicts and plans when a model's scores are graded (in [0, 1], not 0/1; issue 35).

The exact hypergeometric answers of :mod:`app.services.reliability.verdicts` need 0/1 results;
with graded scores the same questions are answered by the methods of statistics-next §9,
named in each answer:

* the full-benchmark test is the paired sign-flip permutation test
  (:func:`app.core.estimation.bounded.sign_flip_test`, exact up to 26 differing items, else Monte
  Carlo with a stored seed and its error);
* P(a random subset orders the pair like the benchmark), the benchmark-wide MDAD and the size
  needed are simulated (:mod:`app.core.reliability.graded`, seeded, with Monte Carlo errors);
* the planner's significance answer uses ``Var(d_i)`` of the graded differences.
* for a pair scored with ``K >= 2`` samples per item, the plan's items x samples table splits
  that ``Var(d_i)`` into data and prediction noise (:func:`samples_plan`).

The benchmark-wide simulated MDAD at a size is cached per results stamp, like the exact one.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.estimation.bounded import sign_flip_test
from app.core.reliability.graded import (
    DEFAULT_DRAWS,
    SIMULATION_SEED,
    simulated_agreement,
    simulated_verdict,
)
from app.core.reliability.power import SamplesPlan as CoreSamplesPlan
from app.core.reliability.power import bernoulli_within, paired_sample_size
from app.core.reliability.power import samples_plan as core_samples_plan
from app.core.results import MDADResult
from app.db.repositories.model_results import ModelResultRepository
from app.schemas.quality import SamplesPlanPublic, SamplesPlanRow
from app.schemas.subsets import GradedPairPublic, SignificancePublic, VerdictPublic
from app.services.catalog.matrices import FullMatrix, on_matrix_reload
from app.services.platform.caching import MB, BoundedCache, SingleFlight

SIGN_FLIP_SEED = 35  # seed of the Monte Carlo sign vectors (stored in every answer)

_MDADS: BoundedCache[tuple, MDADResult] = BoundedCache("graded_mdads", 32 * MB)
_FLIGHTS = SingleFlight()


def _forget_stale(version_id: uuid.UUID, stamp: tuple) -> None:
    _MDADS.discard_where(lambda k: k[0] == version_id and k[1] != stamp)


on_matrix_reload(_forget_stale)


def graded_mdad(fm: FullMatrix, n: int, threshold: float) -> MDADResult:
    """Benchmark-wide simulated agreement of random ``n``-subsets over every full-coverage
    model (0/1 and graded), cached per results stamp."""
    assert fm.scores is not None
    key = (fm.version_id, fm.stamp, int(n), float(threshold))
    hit = _MDADS.get(key)
    if hit is not None:
        return hit
    with _FLIGHTS(key):
        hit = _MDADS.get(key)
        if hit is None:
            hit = simulated_agreement(fm.scores, int(n), threshold=threshold)
            _MDADS.put(key, hit)
    return hit


def graded_pair(a: np.ndarray, b: np.ndarray, order_error: float | None) -> GradedPairPublic:
    """The sign-flip test of two full score rows, as the response block (``order_error``
    ``None`` when P(same order) is read from an analysis' curves, not simulated)."""
    d = a.astype(np.float64) - b.astype(np.float64)
    test = sign_flip_test(d, seed=SIGN_FLIP_SEED)
    return GradedPairPublic(
        n_items=int(d.shape[0]),
        mean_difference=float(d.mean()),
        n_nonzero=test.n_nonzero,
        test="sign_flip_exact" if test.method == "exact" else "sign_flip_monte_carlo",
        p_value=test.p_value,
        p_value_mc_error=test.mc_error,
        n_resamples=test.n_resamples,
        seed=test.seed,
        p_same_order_mc_error=order_error,
        draws=None if order_error is None else DEFAULT_DRAWS,
        draws_seed=None if order_error is None else SIMULATION_SEED,
    )


def graded_verdict(
    fm: FullMatrix, a: int, b: int, model_a: str, model_b: str, size: int, threshold: float
) -> VerdictPublic:
    """A random-subset verdict on graded scores (rows of ``fm.scores``), before its story."""
    assert fm.scores is not None
    scores = fm.scores
    mdad = graded_mdad(fm, size, threshold)
    v, order = simulated_verdict(scores, a, b, size, threshold=threshold, mdad=mdad.mdad)
    return VerdictPublic(
        model_a=model_a,
        model_b=model_b,
        full_accuracy_a=float(scores[a].mean(dtype=np.float64)),
        full_accuracy_b=float(scores[b].mean(dtype=np.float64)),
        gap=v.gap,
        method="random",
        size=v.n,
        p_same_order=v.p_same,
        p_tie=v.p_tie,
        p_reversed=v.p_reversed,
        ci=[v.ci_low, v.ci_high],
        mdad_at_size=v.mdad,
        threshold=v.threshold,
        distinguishable=v.distinguishable,
        size_needed=v.n_needed,
        basis="simulated",
        basis_note=(
            f"graded scores: simulated over {order.n_draws:,} random subsets (seed {order.seed}; "
            f"Monte Carlo error ± {order.mc_error:.3f}), MDAD over all {mdad.n_pairs:,} model "
            "pairs; the 0/1 exact (hypergeometric) answer does not apply"
        ),
        graded=graded_pair(scores[a], scores[b], order.mc_error),
    )


def graded_plan(fm: FullMatrix, gap: float, probability: float) -> tuple[int | None, list]:
    """The smallest random-subset size whose simulated MDAD is at most ``gap`` (bisection on
    the sizes, as :func:`app.services.reliability.verdicts.exact_plan_size`)."""
    cell: dict[int, MDADResult] = {}

    def reaches(n: int) -> bool:
        if n not in cell:
            cell[n] = graded_mdad(fm, n, probability)
        return float(cell[n].curve.at(gap)) >= probability  # type: ignore[union-attr]

    big_n = fm.n_items
    if not reaches(big_n):
        return None, [cell[n] for n in sorted(cell)]
    lo, hi = 0, big_n
    while hi - lo > 1:  # first reaching size in (lo, hi]; about log2(N) simulations
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    if lo >= 1:
        reaches(lo)
    return hi, [cell[n] for n in sorted(cell)]


def graded_significance(
    fm: FullMatrix, gap: float, *, alpha: float, power: float, rows: tuple[int, int] | None
) -> SignificancePublic | None:
    """Paired sample size for ``gap`` with ``omega2 = Var(d_i)`` of graded differences (the
    pair's, else the median over all full-coverage pairs: one Gram matrix)."""
    assert fm.scores is not None
    s = fm.scores.astype(np.float64)
    big_n = s.shape[1]
    if rows is not None:
        omega2 = float(np.var(s[rows[0]] - s[rows[1]]))
        source = "pair"
    else:
        if s.shape[0] < 2:
            return None
        centred = s - s.mean(axis=1, keepdims=True)
        cov = centred @ centred.T / big_n
        var = np.diag(cov)
        i, j = np.triu_indices(s.shape[0], 1)
        omega2 = float(np.median(var[i] + var[j] - 2.0 * cov[i, j]))
        source = "benchmark_typical"
    n = int(paired_sample_size(gap, omega2, alpha=alpha, power=power, n_population=big_n))
    return SignificancePublic(
        n=n,
        delta=gap,
        omega2=omega2,
        alpha=alpha,
        power=power,
        source=source,  # type: ignore[arg-type]
    )


def _pair_means(fm: FullMatrix, name: str) -> np.ndarray | None:
    if fm.scores is not None and fm.score_rows is not None and name in fm.score_rows:
        return fm.scores[fm.score_rows[name]].astype(np.float64)
    row = fm.rows.get(name)
    return None if row is None else fm.correct[row].astype(np.float64)


def samples_plan(
    session: Session,
    fm: FullMatrix,
    a: str | None,
    b: str | None,
    gap: float,
    alpha: float,
    power: float,
) -> SamplesPlanPublic | None:
    """Items x samples for the pair's paired test when both were scored with ``K >= 2`` samples
    per item (:func:`app.core.reliability.power.samples_plan`); ``None`` otherwise.

    The within-item variances are the uploaded ones when both models carry them, else
    ``K/(K-1) x(1-x)`` per item (exact for 0/1 samples); items with their own sample counts
    use them. One query for the two rows' sample columns.
    """
    if a is None or b is None:
        return None
    stored = {r[0]: r for r in ModelResultRepository(session).sample_rows(fm.version_id, (a, b))}
    means = [_pair_means(fm, m) for m in (a, b)]
    if len(stored) < 2 or means[0] is None or means[1] is None:
        return None
    ks = [int(stored[m][1] or 1) for m in (a, b)]
    if min(ks) < 2:
        return None
    uploaded = all(stored[m][2] is not None for m in (a, b))
    within = np.zeros(fm.n_items)
    sampling = np.zeros(fm.n_items)
    for m, k, x in zip((a, b), ks, means, strict=True):
        _, _, var, counts = stored[m]
        c = np.full(fm.n_items, float(k))
        if counts is not None:
            c = np.maximum(np.frombuffer(counts, "<i4").astype(np.float64), 1.0)
        if uploaded:
            s2 = np.frombuffer(var, "<f4").astype(np.float64)  # type: ignore[arg-type]
        else:
            s2 = bernoulli_within(x, c)
        within += s2
        sampling += s2 / c
    p = core_samples_plan(
        means[0] - means[1],
        within,
        min(ks),
        gap,
        alpha=alpha,
        power=power,
        n_population=fm.n_items,
        sampling_variance=sampling,
    )
    return SamplesPlanPublic(
        k=p.k,
        observed=p.observed,
        var_between=p.var_between,
        within=p.within,
        within_term=p.within / p.k,
        floored=p.floored,
        limit_k=p.limit_k,
        within_variance_source="uploaded" if uploaded else "bernoulli",
        rows=[
            SamplesPlanRow(k=int(k), n_items=int(n), samples=int(t), omega2=float(w))
            for k, n, t, w in zip(p.ks, p.n, p.total, p.omega2, strict=True)
        ],
        explanation=_samples_sentence(p, gap, alpha, power, fm.n_items),
    )


def _samples_sentence(p: CoreSamplesPlan, gap: float, alpha: float, power: float, n: int) -> str:
    if p.limit_k is None:
        return (
            f"Var(d_i) shows no between-item part beyond the sampling noise (within-item "
            f"{p.within:.4g} / K'): here the samples, not the items, limit the gap a paired test "
            "detects, and omega2 shrinks as 1/K'"
        )
    floor = int(paired_sample_size(gap, p.var_between, alpha=alpha, power=power, n_population=n))
    return (
        f"More samples per item shrink only the within-item part (prediction noise, "
        f"{p.within:.4g} / K'); from K' = {p.limit_k} on it is at most the between-item part "
        f"(data noise, {p.var_between:.4g}), so the items, not the samples, limit the gap a "
        f"paired test detects: no number of samples gets below {floor} items"
    )


def plan_evidence(fm: FullMatrix, cells: list[MDADResult]) -> dict[str, Any]:
    return {
        "n_models": int(fm.scores.shape[0]) if fm.scores is not None else 0,
        "n_items": fm.n_items,
        "sizes": [c.n for c in cells],
        "mdads": [c.mdad for c in cells],
        "graded": True,
        "draws": DEFAULT_DRAWS,
        "seed": SIMULATION_SEED,
        "note": "graded scores: MDADs simulated over random subsets (the 0/1 exact "
        "hypergeometric curves do not apply)",
    }


def clear_caches() -> None:
    _MDADS.clear()
