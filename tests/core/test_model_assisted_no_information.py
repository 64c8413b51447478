"""The model-assisted interval when the subset carries no information (issue 24).

A weak model that gets 0 of its subset's items right (or a strong one that gets all right) has
residuals of almost zero variance: the predictions collapse to the bound and the difference
estimator's interval shrank to about [0, 0.004] while the truth was 0.004-0.06 (covered 17 % of
such cases at n = 50). The interval must then fall back to the design's Wilson interval; these
tests check the closed form and the coverage by simulation.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.core.results import Selection
from app.core.scoring.reference import SPARSE_OUTCOMES, model_assisted
from app.core.scoring.score_models import score_models
from tests.support.selections import random_selection

N_ITEMS, K = 400, 50


def _references(n_models: int = 60, seed: int = 5) -> np.ndarray:
    """A Rasch population with weak and strong models and items of spread difficulty."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(-4.0, 4.0, n_models)
    b = rng.normal(0.0, 1.5, N_ITEMS)
    return (rng.random((n_models, N_ITEMS)) < 1.0 / (1.0 + np.exp(b - theta[:, None]))).astype(
        float
    )


def _wilson_fpc(successes: float, k: int, n_items: int, level: float) -> tuple[float, float]:
    """Wilson's score interval at the FPC-deflated size, written out."""
    z = stats.norm.ppf(0.5 + level / 2.0)
    n_eff = k / ((n_items - k) / (n_items - 1))
    p = successes / k
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_no_item_right_or_all_right_gets_the_wilson_interval(level) -> None:
    sel = random_selection(K, N_ITEMS, seed=1)
    y = np.stack([np.zeros(K), np.ones(K)])
    b = model_assisted(sel, y, N_ITEMS, _references(), level=level)
    z2 = stats.norm.ppf(0.5 + level / 2.0) ** 2
    n_eff = K * (N_ITEMS - 1) / (N_ITEMS - K)
    # closed form at 0 successes: [0, z^2 / (n_eff + z^2)]; at k: its mirror
    assert b.ci_low[0] == 0.0
    assert b.ci_high[0] == pytest.approx(z2 / (n_eff + z2), rel=1e-9)
    assert b.ci_low[1] == pytest.approx(1.0 - z2 / (n_eff + z2), rel=1e-9)
    assert b.ci_high[1] == 1.0


def test_one_item_right_is_widened_to_contain_wilson_but_twenty_are_not() -> None:
    sel = random_selection(K, N_ITEMS, seed=2)
    rng = np.random.default_rng(0)
    rows = np.zeros((3, K))
    rows[0, 7] = 1.0  # 1 right: below SPARSE_OUTCOMES -> the hull with Wilson
    rows[1, rng.choice(K, 20, replace=False)] = 1.0  # 20 right: the model's own interval
    rows[2] = 1.0
    rows[2, 3] = 0.0  # 1 wrong: the mirror of row 0
    b = model_assisted(sel, rows, N_ITEMS, _references())
    assert SPARSE_OUTCOMES == 2
    for i in (0, 2):
        lo, hi = _wilson_fpc(rows[i].sum(), K, N_ITEMS, 0.95)
        assert b.ci_low[i] <= lo + 1e-12 and b.ci_high[i] >= hi - 1e-12
    # 20 right: the difference estimator's own Student interval, untouched
    q = stats.t.ppf(0.975, K - 2)
    assert b.ci_low[1] == pytest.approx(b.value[1] - q * b.se[1], abs=1e-12)
    assert b.ci_high[1] == pytest.approx(b.value[1] + q * b.se[1], abs=1e-12)


@pytest.mark.parametrize("true_right", [2, 8, 16, 392, 398])
def test_weak_and_strong_targets_are_covered_at_the_stated_level(true_right) -> None:
    """Simulated coverage for a target whose accuracy is near 0 or 1: 3,000 targets with
    ``true_right`` correct items at random positions, one random subset of 50 (by symmetry the
    same as one target and random subsets). Before the fallback, 0 subset items right gave
    ~[0, 0.004]: at 8 / 400 right, P(0 in 50) = 0.36 and coverage was about 0.64."""
    rng = np.random.default_rng(true_right)
    sel = random_selection(K, N_ITEMS, seed=3)
    n_targets = 3000
    keys = rng.random((n_targets, N_ITEMS))
    full = (keys < np.sort(keys, axis=1)[:, [true_right - 1]] + 1e-15).astype(float)
    assert np.all(full.sum(axis=1) == true_right)
    y = full[:, sel.indices]
    b = model_assisted(sel, y, N_ITEMS, _references())
    truth = true_right / N_ITEMS
    covered = np.mean((b.ci_low <= truth + 1e-12) & (truth <= b.ci_high + 1e-12))
    se = np.sqrt(0.95 * 0.05 / n_targets)
    assert covered >= 0.95 - 3 * se, covered


def test_too_few_references_offer_no_model_assisted_interval() -> None:
    sel = random_selection(K, N_ITEMS, seed=4)
    y = (np.random.default_rng(1).random((4, K)) < 0.5).astype(float)
    many = score_models(sel, y, N_ITEMS, reference_correct=_references(60))
    few = score_models(sel, y, N_ITEMS, reference_correct=_references(60)[:10])
    assert "model_assisted" in [b.estimator for b in many]
    assert [b.estimator for b in few] == ["mean"]


def test_stratified_ht_with_two_items_wrong_contains_kish_wilson() -> None:
    """A strong model with 2 of 100 stratified items wrong: the t-interval on the stratified
    variance is a Wald interval at the boundary (SYNTHETIC wide family, n = 100: the strongest
    fifth covered 0.80); it must contain Wilson's at Kish's size."""
    idx = np.r_[np.arange(0, 200, 4), np.arange(200, 400, 4)]  # 50 of 200 in each stratum
    w = np.r_[np.full(50, 200 / (400 * 50)), np.full(50, 200 / (400 * 50))]
    w[50:] *= 1.5  # unequal sampling fractions: a weighted (HT) design
    w /= w.sum()
    sel = Selection(
        method="confidence_stratified",
        indices=idx,
        weights=w,
        estimator="horvitz_thompson",
        estimate_on="correct",
        signal="correct",
        n_requested=100,
        n_candidates=N_ITEMS,
        seed=0,
        fitted={"inclusion_probability": np.r_[np.full(50, 0.25), np.full(50, 0.25 / 1.5)]},
    )
    y = np.ones((1, 100))
    y[0, [3, 71]] = 0.0
    (b,) = score_models(sel, y, N_ITEMS, estimators=("horvitz_thompson",))
    assert b.interval == "stratified_ht"
    value = float(y[0] @ w)
    n_w = 1.0 / np.sum(w**2)
    z = stats.norm.ppf(0.975)
    n_eff = n_w / ((N_ITEMS - 100) / (N_ITEMS - 1))
    centre = (value + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * np.sqrt(value * (1 - value) / n_eff + z * z / (4 * n_eff**2))
    assert b.ci_low[0] <= centre - half + 1e-12
    assert b.ci_high[0] >= min(1.0, centre + half) - 1e-12
