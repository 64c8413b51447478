"""Two bugs of the model-assisted estimator found by mutation testing (issue 17): the shift's
Newton iteration cycling between its bounds, and the zero-SE fallback ignoring the level."""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats

from app.core.results import Selection
from app.core.scoring.reference import model_assisted, reference_predictions


def _selection(indices) -> Selection:
    idx = np.asarray(indices, dtype=np.int64)
    return Selection(
        method="random",
        indices=idx,
        weights=np.full(idx.size, 1.0 / idx.size),
        estimator="mean",
        estimate_on="correct",
        signal="correct",
        n_requested=idx.size,
        n_candidates=100,
        seed=0,
        fitted={},
    )


def test_the_shift_is_the_root_where_plain_newton_cycles() -> None:
    # 10 references: items 0-2 none right, item 3 all right -> logits -ln 21, -ln 21, -ln 21,
    # +ln 21 (+-3.04); a model with 2 of the 4 right. Newton from 0 clipped to +-8 alternated
    # -8, +8, ... and returned a shift of -8 or +8 depending on the iteration count.
    ref = np.zeros((10, 4))
    ref[:, 3] = 1.0
    y = np.array([[1.0, 0.0, 0.0, 1.0]])
    got = reference_predictions(_selection([0, 1, 2, 3]), y, ref)
    logit = np.log(21.0)
    base = np.array([-logit, -logit, -logit, logit])
    theta = optimize.brentq(
        lambda t: float(np.sum(1.0 / (1.0 + np.exp(-(base + t)))) - 2.0), -8.0, 8.0, xtol=1e-14
    )
    assert abs(theta - 2.358) < 1e-3  # the root, by a bracketing solver
    np.testing.assert_allclose(got[0], 1.0 / (1.0 + np.exp(-(base + theta))), atol=1e-12)
    assert abs(got[0].sum() - 2.0) < 1e-10  # the defining equation


def test_zero_se_fallback_is_clopper_pearson_at_the_requested_level() -> None:
    # a census (the subset is the whole benchmark): no sampling error, se = 0, and the estimator
    # falls back to Clopper-Pearson bounds — at the level asked for, not always 95 %.
    rng = np.random.default_rng(3)
    n_items = 30
    ref = (rng.random((25, n_items)) < 0.6).astype(float)
    row = (rng.random(n_items) < 0.6).astype(float)
    sel = _selection(np.arange(n_items))
    y = row[None, :]
    k, s = n_items, int(row.sum())
    assert 0 < s < k
    for level in (0.8, 0.95):
        batch = model_assisted(sel, y, n_items, ref, level=level)
        assert batch.se[0] == 0.0
        a = 1.0 - level
        want = [stats.beta.ppf(a / 2, s, k - s + 1), stats.beta.ppf(1 - a / 2, s + 1, k - s)]
        np.testing.assert_allclose([batch.ci_low[0], batch.ci_high[0]], want, rtol=1e-10)
