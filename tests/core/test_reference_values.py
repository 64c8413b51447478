"""score_models with precomputed reference values equals the call that computes them."""

from __future__ import annotations

import numpy as np

from app.core.scoring import reference_estimates, score_models
from app.core.selectors import make_selector


def test_reference_values_change_nothing() -> None:
    rng = np.random.default_rng(0)
    ability = rng.normal(size=60)
    difficulty = rng.normal(size=120)
    p = 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    correct = (rng.random(p.shape) < p).astype(float)
    for method in ("dpp", "anchor_points"):
        sel = make_selector(method).fit(correct[:40]).select(20, rng=3)
        y = correct[40:, sel.indices]
        ref = correct[:40]
        values = reference_estimates(sel, ref)
        assert values and all(v.shape == (40,) for v in values.values())
        a = score_models(sel, y, 120, reference_correct=ref)
        b = score_models(sel, y, 120, reference_correct=ref, reference_values=values)
        for x, z in zip(a, b, strict=True):
            assert x.interval == z.interval and x.basis == z.basis
            for f in ("value", "ci_low", "ci_high", "se", "raw_value"):
                np.testing.assert_array_equal(getattr(x, f), getattr(z, f))
        # the references' values are the estimator applied to the references' subset results
        c = score_models(sel, ref[:, sel.indices], 120, calibrate=False)
        for batch in c:
            if batch.estimator in values:
                np.testing.assert_allclose(values[batch.estimator], batch.raw_value)
