"""The item-population (generalized) confidence sequence of app.core.sequential.population."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.sequential.confidence_sequences import confidence_sequence
from app.core.sequential.population import (
    estimand_sentence,
    population_confidence_sequence,
    population_cs_init,
    population_cs_interval,
    population_cs_update,
)


def test_covers_an_iid_mean_at_every_time() -> None:
    """400 i.i.d. Bernoulli(0.3) paths of 200 draws: the share whose CS ever misses 0.3 is at
    most alpha plus 3 binomial SEs (this can fail: a CS centred at the wrong mean misses)."""
    rng = np.random.default_rng(38)
    x = (rng.random((400, 200)) < 0.3).astype(float)
    lo, hi = population_confidence_sequence(x, alpha=0.05, grid_size=501)
    ever_missed = ((lo > 0.3) | (hi < 0.3)).any(axis=1).mean()
    assert ever_missed <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    # and it learns: after 200 draws the interval is well inside [0, 1]
    assert np.median(hi[:, -1] - lo[:, -1]) < 0.3


def test_never_exact_where_the_benchmark_cs_is() -> None:
    """At t = N the finite-population CS is the exact mean; the generalized one is not."""
    rng = np.random.default_rng(1)
    x = (rng.random(60) < 0.5).astype(float)
    bench = confidence_sequence(x, n_items=60)
    assert bench.lower[0, -1] == bench.upper[0, -1] == x.mean()
    lo, hi = population_confidence_sequence(x)
    assert hi[0, -1] - lo[0, -1] > 0.2
    assert lo[0, -1] < x.mean() < hi[0, -1]


def test_one_item_of_sixty_does_not_decide() -> None:
    """The issue's case: a candidate one item worse than its baseline on 60 items. Paired values
    x = (d + 1) / 2: one 0, 59 halves; the generalized difference's interval contains 0 while the
    benchmark CS (exact at N) says worse."""
    pair = np.full(60, 0.5)
    pair[17] = 0.0
    lo, hi = population_confidence_sequence(pair)
    assert 2 * lo[0, -1] - 1 < 0 < 2 * hi[0, -1] - 1
    bench = confidence_sequence(pair, n_items=60, paired=True)
    assert 2 * bench.upper[0, -1] - 1 < 0


def test_batches_equal_one_path_and_the_input_is_checked() -> None:
    rng = np.random.default_rng(2)
    x = rng.random(30)
    lo, hi = population_confidence_sequence(x, grid_size=301)
    st = population_cs_init(30, grid_size=301)
    st = population_cs_update(st, x[None, :10])
    st = population_cs_update(st, x[None, 10:])
    blo, bhi = population_cs_interval(st)
    assert (blo[0], bhi[0]) == (lo[0, -1], hi[0, -1])
    with pytest.raises(ValueError, match="more values"):
        population_cs_update(st, x[None, :1])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        population_cs_update(population_cs_init(3), np.array([[1.5]]))
    assert population_cs_interval(population_cs_init(5)) == (0.0, 1.0)


def test_sentences_name_n() -> None:
    assert "these 60 items" in estimand_sentence("benchmark", 60)
    assert "items like these" in estimand_sentence("generalized", 60)
    with pytest.raises(ValueError, match="estimand"):
        estimand_sentence("population", 60)
