"""Release gates on graded scores in [0, 1] (issue 35): the one-sided confidence sequences take
bounded paired differences, so both error bounds hold; measured here on a small SYNTHETIC suite
(bench/bench_gates_graded.py runs 1,000 gates per case)."""

from __future__ import annotations

import numpy as np

from app.core.sequential.gating.gates import G_FAIL, G_PASS, run_gates


def _graded(n: int, gates: int, rng) -> np.ndarray:
    """Mass at 0 and 1 plus a Beta continuum (the ``mass01`` family of bench_graded)."""
    theta = 0.3 * rng.standard_normal((gates, 1))
    p = 1.0 / (1.0 + np.exp(-(theta - rng.standard_normal(n))))
    u = rng.random((gates, n))
    cont = rng.beta(4 * p + 0.5, 4 * (1 - p) + 0.5)
    return np.where(u < (1 - p) / 2, 0.0, np.where(u > 1 - p / 2, 1.0, cont))


def _sibling(base: np.ndarray, gap: float, agree: float, rng) -> np.ndarray:
    """Scores of ``1 - agree`` of the items permuted among themselves (Delta = 0 exactly), then
    scaled to the exact gap."""
    s, n = base.shape
    moved = np.argsort(rng.random((s, n)), axis=1)[:, : round((1 - agree) * n)]
    perm = np.take_along_axis(moved, np.argsort(rng.random(moved.shape), axis=1), axis=1)
    out = base.copy()
    rows = np.arange(s)[:, None]
    out[rows, moved] = base[rows, perm]
    return out * (1.0 + gap * n / out.sum(axis=1))[:, None]


def test_graded_gates_keep_both_error_bounds() -> None:
    rng = np.random.default_rng(35)
    sizes, margin, gates = (300, 600, 900), 0.03, 300
    bases = [_graded(n, gates, rng) for n in sizes]
    assert all(np.mean((b > 0) & (b < 1)) > 0.3 for b in bases)  # graded, not 0/1
    fine = [_sibling(b, 0.0, 0.88, rng) for b in bases]
    np.testing.assert_allclose(
        [(f - b).mean() for f, b in zip(fine, bases, strict=True)], 0, atol=1e-12
    )
    run = run_gates(fine, bases, [margin] * 3, seed=1)
    at_margin = [_sibling(bases[0], -margin, 0.88, rng), *fine[1:]]
    np.testing.assert_allclose((at_margin[0] - bases[0]).mean(axis=1), -margin, atol=1e-12)
    run2 = run_gates(at_margin, bases, [margin] * 3, seed=2)
    assert (run.outcome == G_FAIL).mean() <= 0.05  # a FAIL of non-inferior siblings is wrong
    assert (run2.outcome == G_PASS).mean() <= 0.05  # a PASS with one benchmark at the margin
    assert (run.outcome == G_PASS).mean() > 0.9  # and the fine siblings do pass
    assert np.median(run.items.sum(1)) < sum(sizes)
