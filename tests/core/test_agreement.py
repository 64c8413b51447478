"""Pairwise agreement (§4.1) against slow Python references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from app.core.reliability.agreement import (
    kendall_tau_b,
    pair_differences,
    paper_agree,
    paper_bin_ids,
    refloor_bin_ids,
    robust_run_counts,
)


def test_pair_differences_order() -> None:
    v = np.array([[0.1, 0.5, 0.2, 0.9]])
    expected = [v[0, i] - v[0, j] for i in range(4) for j in range(i + 1, 4)]
    np.testing.assert_array_equal(pair_differences(v)[0], expected)


def test_paper_agree_copysign_semantics() -> None:
    d_est = np.array([0.1, -0.1, 0.0, 0.1, -0.1, 0.2, -0.0])
    d_true = np.array([0.2, -0.3, 0.1, 0.0, 0.0, -0.0, -0.1])
    # zero true difference counts as positive (+0.0), a tied estimate is never agreement
    expected = [
        math.copysign(1, e) == math.copysign(1, t) and e != 0
        for e, t in zip(d_est, d_true, strict=True)
    ]
    np.testing.assert_array_equal(paper_agree(d_est, d_true), expected)
    assert expected == [True, True, False, True, False, False, False]


def test_bins_match_reference_floats() -> None:
    rng = np.random.default_rng(0)
    d = (rng.integers(0, 225, 5000) - rng.integers(0, 225, 5000)) / 224
    ref = [math.floor(abs(x) * 200) for x in d]
    np.testing.assert_array_equal(paper_bin_ids(d), ref)
    k = np.arange(201)
    refloored = refloor_bin_ids(k)
    assert k[refloored != k].tolist() == [29, 57, 58, 113, 114, 115, 116]
    assert set((k - refloored).tolist()) == {0, 1}


def test_kendall_tau_b_matches_scipy_with_ties() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(0, 6, (20, 30)) / 6
    y = rng.integers(0, 4, (20, 30)) / 4
    ours = kendall_tau_b(x, y)
    ref = [stats.kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    assert np.isnan(kendall_tau_b(np.ones((1, 5)), np.arange(5.0)[None])[0])


def test_robust_run_counts_against_loops() -> None:
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 50, (3, 12)) / 50
    est = rng.integers(0, 10, (3, 12)) / 10
    n_pairs, n_same, n_tie, n_zero = robust_run_counts(est, truth)
    ref_pairs = np.zeros_like(n_pairs)
    ref_same = np.zeros_like(n_same)
    ref_tie = np.zeros_like(n_tie)
    zero = 0
    for r in range(3):
        for i in range(12):
            for j in range(i + 1, 12):
                dt, de = truth[r, i] - truth[r, j], est[r, i] - est[r, j]
                if dt == 0:
                    zero += 1
                    continue
                k = math.floor(abs(dt) * 200 + 1e-9)
                ref_pairs[r, k] += 1
                ref_same[r, k] += np.sign(de) == np.sign(dt)
                ref_tie[r, k] += de == 0
    np.testing.assert_array_equal(n_pairs, ref_pairs)
    np.testing.assert_array_equal(n_same, ref_same)
    np.testing.assert_array_equal(n_tie, ref_tie)
    assert n_zero == zero


@pytest.mark.parametrize("shape", [(4,), (2, 3, 5)])
def test_pair_differences_batch_invariance(shape) -> None:
    v = np.random.default_rng(3).random(shape)
    flat = pair_differences(v.reshape(-1, shape[-1]))
    np.testing.assert_array_equal(pair_differences(v).reshape(flat.shape), flat)
