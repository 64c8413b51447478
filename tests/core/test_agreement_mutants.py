"""Tests that kill the surviving mutants of ``app/core/reliability/agreement.py`` (issue 17, ``make mutation``).

Each test asserts values against an independent computation: slow Python loops over pairs that
re-state the reference (``math.copysign``, ``math.floor`` on Python floats), or
:func:`scipy.stats.kendalltau`. Mutants that cannot change any result are listed with a reason in
``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from app.core.reliability.agreement import (
    kendall_tau_b,
    pair_differences,
    paper_cell_counts,
    refloor_bin_ids,
    robust_run_counts,
)


# -- pair differences and bin ids: float64 arithmetic whatever the input dtype ----------------------
def test_pair_differences_of_uint8_results_are_signed_floats() -> None:
    """0/1 results stored as uint8 (as the GPQA matrix is) must not wrap: 0 - 1 is -1, not 255."""
    v = np.array([[0, 1, 1, 0], [1, 0, 0, 1]], dtype=np.uint8)
    expected = [
        [int(row[i]) - int(row[j]) for i in range(4) for j in range(i + 1, 4)] for row in v.tolist()
    ]
    got = pair_differences(v)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)


def test_kendall_tau_b_of_uint8_results_matches_scipy() -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2, (5, 9)).astype(np.uint8)
    y = rng.integers(0, 4, (5, 9)).astype(np.uint8)
    ref = [
        stats.kendalltau(a.astype(int), b.astype(int)).statistic for a, b in zip(x, y, strict=True)
    ]
    np.testing.assert_allclose(kendall_tau_b(x, y), ref, rtol=1e-12)


def test_refloor_uses_float64_arithmetic_for_float32_ids() -> None:
    """The reference re-floors ``floor(k / 200 * 200)`` in float64; in float32 no id would move."""
    k = np.arange(201)
    moved = [29, 57, 58, 113, 114, 115, 116]
    expected = [i - 1 if i in moved else i for i in k.tolist()]
    np.testing.assert_array_equal(refloor_bin_ids(k.astype(np.float32)), expected)
    np.testing.assert_array_equal(
        refloor_bin_ids(k.astype(np.float32)),
        [math.floor((i / 200) * 200) for i in k.tolist()],
    )


# -- paper cell counts (§4.2 pooling) ---------------------------------------------------------------
def _reference_cell(est: np.ndarray, truth: np.ndarray) -> tuple[dict[int, list[int]], list[int]]:
    """Slow re-statement: per run and pair, key ``floor(|dt| * 200)`` and the copysign agree flag."""
    bins: dict[int, list[int]] = {}
    flags: list[int] = []
    for r in range(est.shape[0]):
        for i in range(est.shape[1]):
            for j in range(i + 1, est.shape[1]):
                de = float(est[r, i]) - float(est[r, j])
                dt = float(truth[r, i]) - float(truth[r, j])
                agree = int(math.copysign(1, de) == math.copysign(1, dt) and de != 0)
                bins.setdefault(math.floor(abs(dt) * 200), []).append(agree)
                flags.append(agree)
    return bins, flags


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paper_cell_counts_match_slow_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs, t = 4, 9
    truth = rng.integers(0, 40, (runs, t)) / 40  # ties in truth (zero gaps) and exact bin edges
    est = rng.integers(0, 8, (runs, t)) / 8  # ties in the estimates
    n_pairs, n_agree, mean = paper_cell_counts(est, truth)
    bins, flags = _reference_cell(est, truth)
    top = max(bins)
    assert n_pairs.shape == (top + 1,) and n_agree.shape == (top + 1,)
    assert n_pairs.dtype == np.int64 and n_agree.dtype == np.int64
    np.testing.assert_array_equal(n_pairs, [len(bins.get(k, [])) for k in range(top + 1)])
    np.testing.assert_array_equal(n_agree, [sum(bins.get(k, [])) for k in range(top + 1)])
    assert isinstance(mean, float)
    assert mean == pytest.approx(sum(flags) / len(flags), abs=1e-15)
    assert int(n_pairs.sum()) == runs * t * (t - 1) // 2


def test_paper_cell_counts_known_answer() -> None:
    """Two runs of three targets; every number counted by hand."""
    truth = np.array([[0.50, 0.40, 0.40], [0.10, 0.20, 0.30]])
    est = np.array([[0.60, 0.30, 0.30], [0.20, 0.20, 0.10]])
    # run 0: pairs (0,1) dt=.10 de=.30 agree; (0,2) dt=.10 de=.30 agree; (1,2) dt=0 de=0 tie -> 0
    # run 1: (0,1) dt=-.10 de=0 -> 0; (0,2) dt=-.20 de=.10 -> 0; (1,2) dt=-.10 de=.10 -> 0
    n_pairs, n_agree, mean = paper_cell_counts(est, truth)
    k10 = math.floor(abs(0.5 - 0.4) * 200)
    k20 = math.floor(abs(0.1 - 0.3) * 200)
    expected_pairs = np.zeros(k20 + 1, dtype=np.int64)
    expected_agree = np.zeros(k20 + 1, dtype=np.int64)
    expected_pairs[0] += 1
    for k in (k10, k10, math.floor(abs(0.1 - 0.2) * 200), math.floor(abs(0.2 - 0.3) * 200)):
        expected_pairs[k] += 1
    expected_pairs[k20] += 1
    expected_agree[k10] += 2
    np.testing.assert_array_equal(n_pairs, expected_pairs)
    np.testing.assert_array_equal(n_agree, expected_agree)
    assert mean == pytest.approx(2 / 6, abs=1e-15)


# -- robust run counts -----------------------------------------------------------------------------
def _reference_run_counts(est: np.ndarray, truth: np.ndarray, bins_per_unit: int):
    runs, t = truth.shape
    keys = [
        math.floor(abs(float(truth[r, i]) - float(truth[r, j])) * bins_per_unit + 1e-9)
        for r in range(runs)
        for i in range(t)
        for j in range(i + 1, t)
        if truth[r, i] != truth[r, j]
    ]
    n_bins = max(keys) + 1 if keys else 1
    pairs = np.zeros((runs, n_bins), dtype=np.int64)
    same = np.zeros((runs, n_bins), dtype=np.int64)
    tie = np.zeros((runs, n_bins), dtype=np.int64)
    zero = 0
    for r in range(runs):
        for i in range(t):
            for j in range(i + 1, t):
                dt = float(truth[r, i]) - float(truth[r, j])
                de = float(est[r, i]) - float(est[r, j])
                if dt == 0:
                    zero += 1
                    continue
                k = math.floor(abs(dt) * bins_per_unit + 1e-9)
                pairs[r, k] += 1
                same[r, k] += (de > 0) == (dt > 0) and de != 0
                tie[r, k] += de == 0
    return pairs, same, tie, zero


@pytest.mark.parametrize("bins_per_unit", [200, 100, 20])
def test_robust_run_counts_shape_dtype_and_values(bins_per_unit: int) -> None:
    rng = np.random.default_rng(bins_per_unit)
    truth = rng.integers(0, 30, (3, 10)) / 30
    est = rng.integers(0, 6, (3, 10)) / 6
    got = robust_run_counts(est, truth, bins_per_unit=bins_per_unit)
    ref = _reference_run_counts(est, truth, bins_per_unit)
    for g, r in zip(got[:3], ref[:3], strict=True):
        assert g.dtype == np.int64
        assert g.shape == r.shape  # exactly max bin + 1 columns
        np.testing.assert_array_equal(g, r)
    assert got[3] == ref[3]


def test_robust_run_counts_with_no_true_order() -> None:
    """Every true gap zero: one empty bin per run, every pair counted as a zero gap."""
    truth = np.full((2, 4), 0.25)
    est = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 0.5, 0.5]])
    n_pairs, n_same, n_tie, n_zero = robust_run_counts(est, truth)
    for a in (n_pairs, n_same, n_tie):
        assert a.shape == (2, 1) and a.dtype == np.int64
        np.testing.assert_array_equal(a, [[0], [0]])
    assert n_zero == 2 * 6


# -- Kendall tau-b: any leading shape, the smallest non-degenerate denominator -----------------------
def test_kendall_tau_b_on_one_curve_and_on_a_3d_batch() -> None:
    rng = np.random.default_rng(12)
    x = rng.integers(0, 5, (2, 3, 8)) / 5
    y = rng.integers(0, 3, (2, 3, 8)) / 3
    ref = np.array(
        [[stats.kendalltau(x[a, b], y[a, b]).statistic for b in range(3)] for a in range(2)]
    )
    got = kendall_tau_b(x, y)
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    one = kendall_tau_b(x[0, 0], y[0, 0])
    assert one.shape == ()
    assert float(one) == pytest.approx(ref[0, 0], rel=1e-12)


def test_kendall_tau_b_with_a_single_untied_pair() -> None:
    """Two targets: one pair, untied in both, so the denominator is exactly 1 and tau = +-1."""
    x = np.array([[0.1, 0.2], [0.1, 0.2], [0.3, 0.3]])
    y = np.array([[0.5, 0.9], [0.9, 0.5], [0.5, 0.9]])
    got = kendall_tau_b(x, y)
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2])
    assert stats.kendalltau([0.1, 0.2], [0.5, 0.9]).statistic == pytest.approx(1.0)
