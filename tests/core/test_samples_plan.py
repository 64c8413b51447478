"""Items x samples from the split of Var(d_i) into data and prediction noise (SYNTHETIC data)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.core.reliability.power import (
    SAMPLE_COUNTS,
    bernoulli_within,
    paired_sample_size,
    samples_plan,
)


def _closed_form(delta: float, omega2: float, big_n: int) -> int:
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    n = z * z * omega2 / delta**2
    return int(np.ceil(min(n / (1 + (n - 1) / big_n), big_n) - 1e-9))


def test_split_and_table_match_the_closed_form() -> None:
    d = np.array([0.5, -0.25, 0.0, 0.25, 0.75, -0.5, 0.25, 0.0])
    within = np.array([0.4, 0.2, 0.3, 0.1, 0.5, 0.3, 0.2, 0.4])
    k, big_n, delta = 4, 5000, 0.05
    p = samples_plan(d, within, k, delta, n_population=big_n)
    observed = np.mean((d - d.mean()) ** 2)
    between = observed - within.mean() / k
    assert p.observed == pytest.approx(observed) and p.var_between == pytest.approx(between)
    assert p.within == pytest.approx(within.mean()) and not p.floored
    assert p.ks.tolist() == sorted(set(SAMPLE_COUNTS) | {k}) == [1, 2, 4, 8, 16]
    for kk, n, total, w2 in zip(p.ks, p.n, p.total, p.omega2, strict=True):
        assert w2 == pytest.approx(between + within.mean() / kk)
        assert n == _closed_form(delta, between + within.mean() / kk, big_n)
        assert total == n * kk
    # at the stored K, omega2 is the observed Var(d_i): the significance answer's item count
    assert p.n[p.ks.tolist().index(k)] == int(
        paired_sample_size(delta, observed, n_population=big_n)
    )
    assert p.limit_k == int(np.ceil(within.mean() / between))
    assert 1 <= p.limit_k and within.mean() / p.limit_k <= between < within.mean() / (p.limit_k - 1)


def test_samples_never_count_as_items() -> None:
    """No prediction noise: K' samples buy nothing, n(K') is the same item count for every K'.
    Only prediction noise: n(K') falls as 1/K' (items, not samples: n(K') K' is constant)."""
    d = np.array([0.3, -0.1, 0.2, 0.0, 0.4, -0.2])
    p = samples_plan(d, np.zeros_like(d), 8, 0.02)
    assert len(set(p.n.tolist())) == 1 and p.total.tolist() == (p.n * p.ks).tolist()
    assert p.n[0] == int(paired_sample_size(0.02, np.var(d)))
    noise = samples_plan(np.array([0.5, -0.5] * 50), np.full(100, 1.0), 1, 0.01)
    assert noise.var_between == 0.0 and noise.floored and noise.limit_k is None
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert noise.n.tolist() == [int(np.ceil(z * z / k / 0.01**2 - 1e-9)) for k in noise.ks]


def test_bernoulli_within_is_the_sample_variance_of_01_samples() -> None:
    rng = np.random.default_rng(35)
    samples = rng.random((200, 5)) < rng.random((200, 1))
    np.testing.assert_allclose(
        bernoulli_within(samples.mean(axis=1), 5), samples.var(axis=1, ddof=1), atol=1e-12
    )
    assert bernoulli_within([0.5, 0.5], [1, 2]).tolist() == [0.0, 0.5]


def test_split_recovers_the_between_item_variance_by_simulation() -> None:
    """20,000 items, K = 4 0/1 samples per model: var_between estimates Var(p_a - p_b)."""
    rng = np.random.default_rng(3503)
    n, k = 20_000, 4
    pa = rng.beta(2, 2, n)
    pb = np.clip(pa - 0.05 + rng.normal(0, 0.15, n), 0, 1)
    xa = rng.binomial(k, pa) / k
    xb = rng.binomial(k, pb) / k
    within = bernoulli_within(xa, k) + bernoulli_within(xb, k)
    p = samples_plan(xa - xb, within, k, 0.02)
    assert p.var_between == pytest.approx(np.var(pa - pb), rel=0.05)
    assert p.within == pytest.approx(np.mean(pa * (1 - pa) + pb * (1 - pb)), rel=0.03)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="within"):
        samples_plan([0.1, 0.2], [0.1], 2, 0.02)
    with pytest.raises(ValueError, match="k"):
        samples_plan([0.1], [0.1], 0, 0.02)
    with pytest.raises(ValueError, match="sampling_variance"):
        samples_plan([0.1], [0.1], 2, 0.02, sampling_variance=[-1.0])
