"""Known answers for app.core.scoring: uniform weights reduce to the plain formulas."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.exact import smallest_n
from app.core.scoring import (
    kish_n_eff,
    size_needed_for_gap,
    weighted_estimate,
    weighted_paired_comparison,
)
from app.core.stats import compare_to_baseline, wilson_interval


def test_uniform_weights_equal_wilson_fpc() -> None:
    y = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], dtype=float)
    w = np.full(10, 0.1)
    got = weighted_estimate(y, w, 200)
    ref = wilson_interval(7, 10, n_population=200)
    assert (got.value, got.ci_low, got.ci_high) == pytest.approx(
        (ref.value, ref.ci_low, ref.ci_high)
    )
    assert got.se == pytest.approx(np.sqrt((190 / 199) * y.var(ddof=1) / 10))
    assert kish_n_eff(w) == pytest.approx(10)


def test_unequal_weights_widen_the_interval_and_full_census_collapses() -> None:
    y = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], dtype=float)
    w = np.array([0.3, 0.02, 0.02, 0.3, 0.02, 0.02, 0.02, 0.2, 0.05, 0.05])
    got = weighted_estimate(y, w, 200)
    ref = weighted_estimate(y, np.full(10, 0.1), 200)
    assert kish_n_eff(w) < 10
    assert got.ci_high - got.ci_low > ref.ci_high - ref.ci_low
    census = weighted_estimate(y, np.full(10, 0.1), 10)
    assert census.ci_low == census.ci_high == pytest.approx(0.7)


def test_weighted_paired_equals_compare_to_baseline_for_uniform_weights() -> None:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, 300)
    idx = rng.choice(300, 50, replace=False)
    new = rng.integers(0, 2, 50)
    got = weighted_paired_comparison(new, base, idx, np.full(50, 1 / 50))
    ref = compare_to_baseline(new, base, idx)
    assert got.p_better == pytest.approx(ref.p_better)
    assert got.se == pytest.approx(ref.se)
    assert got.mcnemar_p == ref.mcnemar_p and got.mean_diff == pytest.approx(ref.mean_diff)


def test_size_needed_on_the_full_benchmark_equals_exact_smallest_n() -> None:
    rng = np.random.default_rng(1)
    c = rng.integers(0, 2, (2, 120))
    n10 = int(((c[0] == 1) & (c[1] == 0)).sum())
    n01 = int(((c[0] == 0) & (c[1] == 1)).sum())
    assert size_needed_for_gap(n10, n01, 120, 120, 0.8) == smallest_n(c, 0, 1, 0.8)
    assert size_needed_for_gap(5, 5, 120, 120) is None
    with pytest.raises(ValueError, match="n10"):
        size_needed_for_gap(100, 30, 120, 120)
