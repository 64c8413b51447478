"""MDAD: paper mode (§4.2, incl. its quirks) and robust mode."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from app.core.reliability.mdad import (
    analyze_cell,
    analyze_protocol,
    isotonic_increasing,
    isotonic_reaches,
    mdad_paper,
    mdad_robust,
    merge_sparse_bins,
)
from app.core.reliability.protocol import run_protocol


def _counts(spec: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    size = max(spec) + 1
    pairs, agree = np.zeros(size, np.int64), np.zeros(size, np.int64)
    for k, (m, a) in spec.items():
        pairs[k], agree[k] = m, a
    return pairs, agree


def test_paper_known_answer_degenerate_bootstrap() -> None:
    # means 0, 1, 1: bootstrap quantiles are exact (0/1 bins), so the CI is known
    pairs, agree = _counts({0: (100, 0), 1: (50, 50), 2: (80, 80)})
    mdad, lo, hi, reached = mdad_paper(pairs, agree, rng=np.random.default_rng(0))
    assert (mdad, lo, hi, reached) == (0.005, 0.005, 0.005, True)


def test_paper_sentinel_and_symmetric_ci() -> None:
    pairs, agree = _counts({0: (100, 10), 3: (100, 50)})
    mdad, lo, hi, reached = mdad_paper(pairs, agree, rng=np.random.default_rng(0))
    assert (mdad, lo, hi, reached) == (0.5, 0.5, 0.5, False)
    # u reaches 0.8 at bin 1 (a 0.79 bin of 30 pairs), mean only at bin 2: half = max(MDAD-b_u, b_l-MDAD)
    pairs, agree = _counts({0: (500, 100), 1: (30, 24), 2: (4000, 3600), 3: (4000, 4000)})
    mdad, lo, hi, _ = mdad_paper(pairs, agree, rng=np.random.default_rng(1))
    assert mdad == 0.005  # 24/30 = 0.8 reaches the threshold at bin 1
    # b_u = 0.005 (u of bin 1 >= 0.8), b_l = 0.01 (l of bin 1 is ~0.63): half = 0.005
    assert lo == pytest.approx(0.0, abs=1e-15) and hi == pytest.approx(0.01)
    assert math.isclose(mdad - lo, hi - mdad)


def test_paper_refloor_quirk_skips_bin_29() -> None:
    # bin 29 (key 0.145) would qualify on its own data, but it is looked up as bin 28
    pairs, agree = _counts({28: (1000, 500), 29: (1000, 1000), 30: (1000, 900)})
    mdad, *_ = mdad_paper(pairs, agree, rng=np.random.default_rng(0))
    assert mdad == 30 / 200
    pairs, agree = _counts({27: (1000, 500), 28: (1000, 1000), 29: (1000, 0)})
    mdad, *_ = mdad_paper(pairs, agree, rng=np.random.default_rng(0))
    assert mdad == 28 / 200


def test_binomial_bootstrap_matches_index_resampling() -> None:
    """mdad_paper's Binomial(m, a/m)/m bootstrap gives the band that explicit index resampling of
    each bin's 0/1 agree values gives (B = 20,000 each; bins chosen with quantiles far from 0.8)."""
    m, b = 120, 20000
    agree_counts = {0: 84, 1: 91, 2: 99, 3: 106}  # 0.70, 0.76, 0.82, 0.88
    rng = np.random.default_rng(5)
    upper, lower = [], []
    for k in agree_counts.values():
        values = np.r_[np.ones(k), np.zeros(m - k)]
        means = values[rng.integers(0, m, (b, m))].mean(axis=1)
        lo_q, hi_q = np.quantile(means, [0.025, 0.975])
        upper.append(hi_q)
        lower.append(lo_q)
    keys = np.array(list(agree_counts)) / 200
    b_u = keys[np.flatnonzero(np.array(upper) >= 0.8)[0]]
    b_l = keys[np.flatnonzero(np.array(lower) >= 0.8)[0]]
    assert (b_u, b_l) == (0.005, 0.015)  # the reference band: u reaches 0.8 at bin 1, l at bin 3
    pairs, agree = _counts({k: (m, a) for k, a in agree_counts.items()})
    mdad, lo, hi, reached = mdad_paper(pairs, agree, n_boot=b, rng=np.random.default_rng(6))
    assert reached and mdad == 0.01
    half = max(mdad - b_u, b_l - mdad)
    assert (lo, hi) == (pytest.approx(mdad - half), pytest.approx(mdad + half))


def _reference_paper_mean_mdad(est: np.ndarray, truth: np.ndarray, threshold: float = 0.8):
    """Slow re-statement of the reference (loops over runs and pairs, dict of bins)."""
    bins: dict[float, list[int]] = {}
    flags = []
    for r in range(est.shape[0]):
        for i in range(est.shape[1]):
            for j in range(i + 1, est.shape[1]):
                de, dt = est[r, i] - est[r, j], truth[r, i] - truth[r, j]
                agree = int(math.copysign(1, de) == math.copysign(1, dt) and de != 0)
                key = np.floor(abs(dt) * 200) / 200
                bins.setdefault(float(key), []).append(agree)
                flags.append(agree)
    mdad = 0.5
    for key in sorted(bins):
        lookup = float(np.floor(key * 200) / 200)
        values = bins.get(lookup, [])
        if values and np.mean(values) >= threshold:
            mdad = lookup
            break
    return mdad, float(np.mean(flags))


@pytest.fixture(scope="module")
def protocol_result(gpqa):
    return run_protocol(
        gpqa["correct"],
        ("random", "subtask_stratified"),
        (25, 100),
        runs=6,
        n_sources=100,
        n_targets=30,
        seed=4,
    )


def test_paper_cell_matches_slow_reference(protocol_result) -> None:
    for split in ("seen", "unseen"):
        est, truth = protocol_result.cell("random", 25), protocol_result.truth(split)
        cell = analyze_cell(est, truth, method="random", n=25, split=split, seed=4)
        mdad, mean_agree = _reference_paper_mean_mdad(est, truth)
        assert cell.mdad == mdad
        assert cell.mean_agreement == pytest.approx(mean_agree, abs=1e-12)
        assert cell.ci_low <= cell.mdad <= cell.ci_high


def test_analyze_protocol_table_and_determinism(protocol_result) -> None:
    for mode in ("paper", "robust"):
        a = analyze_protocol(protocol_result, mode=mode)
        b = analyze_protocol(protocol_result, mode=mode)
        assert [(c.method, c.n, c.split) for c in a] == [
            (m, n, s)
            for m in ("random", "subtask_stratified")
            for n in (25, 100)
            for s in ("seen", "unseen")
        ]
        assert [c.as_dict() for c in a] == [c.as_dict() for c in b]
        for c in a:
            assert c.mode == mode and c.n_runs == 6 and c.n_pairs == 6 * 435
            assert 0.0 <= c.mean_agreement <= 1.0 and c.mean_abs_error >= 0
    seeded = analyze_protocol(protocol_result, mode="paper", seed=123)
    assert [c.mdad for c in seeded] == [
        c.mdad for c in analyze_protocol(protocol_result, mode="paper")
    ]


def test_isotonic_matches_scipy_and_is_batch_invariant() -> None:
    rng = np.random.default_rng(6)
    w = rng.integers(1, 50, (30, 17)).astype(float)
    y = np.clip(np.linspace(0.3, 0.9, 17) + rng.normal(0, 0.15, (30, 17)), 0, 1)
    ours = isotonic_increasing(y * w, w)
    ref = np.array([isotonic_regression(yy, weights=ww).x for yy, ww in zip(y, w, strict=True)])
    np.testing.assert_allclose(ours, ref, atol=1e-12)
    np.testing.assert_allclose(isotonic_increasing(y * w, w, chunk=17 * 17), ours, atol=0)
    for t in (0.5, 0.7, 0.8):
        np.testing.assert_array_equal(
            isotonic_reaches(np.round(y * w), w, t),
            isotonic_increasing(np.round(y * w), w) >= t - 1e-12,
        )


def test_merge_sparse_bins() -> None:
    pairs = np.array([5, 0, 120, 30, 30, 50, 10, 3])
    starts = merge_sparse_bins(pairs, 100)
    sums = np.add.reduceat(pairs, starts)
    assert starts[0] == 0 and (sums >= 100).all()
    assert starts.tolist() == [0, 3]


def test_robust_not_reached_and_ci() -> None:
    rng = np.random.default_rng(0)
    runs, bins = 40, 30
    pairs = rng.integers(20, 60, (runs, bins))
    p = np.linspace(0.5, 0.95, bins)
    same = rng.binomial(pairs, p)
    tie = np.zeros_like(pairs)
    mdad, lo, hi, curve = mdad_robust(pairs, same, tie, rng=np.random.default_rng(1))
    assert mdad is not None and lo is not None and hi is not None and lo <= mdad <= hi
    assert np.all(np.diff(curve.fitted) >= -1e-12)
    assert np.all(curve.band_low <= curve.fitted + 1e-12) and np.all(
        curve.fitted <= curve.band_high + 1e-12
    )
    none, lo2, hi2, curve2 = mdad_robust(
        pairs, same // 3, tie, rng=np.random.default_rng(1), max_gap=0.2
    )
    assert none is None and hi2 is None and curve2.max_gap == 0.2
    assert lo2 is None or lo2 >= 0
    np.testing.assert_allclose(curve.p_same + curve.p_tie + curve.p_reversed, 1.0)
