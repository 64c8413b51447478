"""Issue 38: extrapolation splits of the coverage study and the signs of unsupported targets."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.scoring.coverage import coverage_study, extrapolation_split
from app.core.scoring.support import score_outside


def _matrix(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, 60)
    b = rng.normal(0, 1, 80)
    p = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(np.uint8)


@pytest.mark.parametrize("split", ["weak_to_strong", "strong_to_weak"])
def test_every_target_lies_beyond_every_source(split: str) -> None:
    c = _matrix()
    src, tgt = extrapolation_split(c, split)
    acc = c.mean(axis=1)
    assert np.intersect1d(src, tgt).size == 0 and src.size == 48
    if split == "weak_to_strong":
        assert acc[tgt].min() > acc[src].max()
    else:
        assert acc[tgt].max() < acc[src].min()
    assert tgt.size >= 5
    with pytest.raises(ValueError, match="split"):
        extrapolation_split(c, "random")


def test_a_fixed_split_study_scores_only_the_strong_targets() -> None:
    c = _matrix(1)
    table = coverage_study(c, ["random"], [20], repeats=4, seed=3, split="weak_to_strong")
    assert table.params["split"] == "weak_to_strong"
    _, tgt = extrapolation_split(c, "weak_to_strong")
    row = next(r for r in table.rows if r.estimator == "mean")
    assert row.cases == 4 * tgt.size  # the same targets every repeat
    # the design-based interval of a random subset needs no source: it covers beyond them
    assert row.coverage >= 0.8


def test_score_outside_the_sources_range() -> None:
    out, lo, hi = score_outside([0.1, 0.5, 0.95], [0.3, 0.6, 0.9])
    assert out.tolist() == [True, False, True] and (lo, hi) == (0.3, 0.9)
    none, _, _ = score_outside([0.5], [])
    assert none.tolist() == [False]
