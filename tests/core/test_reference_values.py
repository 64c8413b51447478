"""score_models with precomputed reference values equals the call that computes them."""

from __future__ import annotations

import numpy as np

from app.core.scoring.score_models import reference_calibrations, reference_estimates, score_models
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
        cals = reference_calibrations(sel, ref, values=values)
        assert set(cals) == set(values) - {"weighted_confidence"}
        c = score_models(sel, y, 120, reference_correct=ref, calibrations=cals)
        for x, z in [*zip(a, b, strict=True), *zip(a, c, strict=True)]:
            assert x.interval == z.interval and x.basis == z.basis
            for f in ("value", "ci_low", "ci_high", "se", "raw_value"):
                np.testing.assert_array_equal(getattr(x, f), getattr(z, f))
        # the references' values are the estimator applied to the references' subset results
        raw = score_models(sel, ref[:, sel.indices], 120, calibrate=False)
        for batch in raw:
            if batch.estimator in values:
                np.testing.assert_allclose(values[batch.estimator], batch.raw_value)


def test_calibration_for_another_level_is_not_reused() -> None:
    rng = np.random.default_rng(1)
    correct = (rng.random((50, 80)) < np.linspace(0.2, 0.8, 50)[:, None]).astype(float)
    sel = make_selector("dpp").fit(correct[:30]).select(15, rng=0)
    ref, y = correct[:30], correct[30:, sel.indices]
    cals = reference_calibrations(sel, ref, level=0.9)
    a = score_models(sel, y, 80, reference_correct=ref)  # 0.95
    b = score_models(sel, y, 80, reference_correct=ref, calibrations=cals)
    for x, z in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.ci_low, z.ci_low)
    assert reference_calibrations(sel, ref[:5]) == {}  # too few references
