"""Tests that kill the surviving mutants of ``app/core/reliability/mdad.py`` (issue 17, ``make mutation``).

Each test asserts values against an independent computation: slow Python loops over runs and pairs
(re-stating §4.1/§4.2), :func:`scipy.stats.kendalltau`, :func:`scipy.optimize.isotonic_regression`,
a bootstrap that replays the same random stream with a per-bin loop, or the exact ``ValueError``
message naming the field at fault. Mutants that cannot change any result are listed with a reason
in ``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import math
import re
import zlib

import numpy as np
import pytest
from scipy import stats

from app.core.reliability.mdad import (
    PAPER_SENTINEL,
    analyze_cell,
    analyze_protocol,
    bootstrap_seed_sequence,
    isotonic_increasing,
    isotonic_reaches,
    mdad_paper,
    mdad_robust,
    merge_sparse_bins,
)
from app.core.results import ProtocolResult


def _exact(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for exactly this message."""
    return "^" + re.escape(message) + "$"


def _seed_sequence(seed: int, method: str, n: int, split: str, mode: str) -> np.random.SeedSequence:
    """The documented key: ``SeedSequence(seed, spawn_key=(0x4D444144, crc32(method), n, split, mode))``."""
    split_index = {"seen": 0, "unseen": 1, "full": 2}[split]
    mode_index = {"paper": 0, "robust": 1}[mode]
    return np.random.SeedSequence(
        seed, spawn_key=(0x4D444144, zlib.crc32(method.encode()), n, split_index, mode_index)
    )


# -- seeds -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("seed", "method", "n", "split", "mode"),
    [
        (0, "random", 25, "seen", "paper"),
        (7, "anchor_points", 100, "unseen", "robust"),
        (3, "x", 1, "full", "paper"),
    ],
)
def test_bootstrap_seed_sequence_is_the_documented_key(seed, method, n, split, mode) -> None:
    got = bootstrap_seed_sequence(seed, method, n, split, mode)
    ref = _seed_sequence(seed, method, n, split, mode)
    assert got.entropy == ref.entropy
    assert got.spawn_key == ref.spawn_key
    np.testing.assert_array_equal(got.generate_state(4), ref.generate_state(4))


# -- paper mode: slow reference of a whole cell ----------------------------------------------------
def _cell(seed: int, runs: int = 4, t: int = 9) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 60, (runs, t)) / 60
    est = np.clip(truth + rng.integers(-6, 7, (runs, t)) / 60, 0, 1)
    est[0, :3] = est[0, 0]  # some tied estimates
    return est, truth


def _slow_paper_counts(est: np.ndarray, truth: np.ndarray):
    pairs: dict[int, int] = {}
    agree: dict[int, int] = {}
    ties: dict[int, int] = {}
    for r in range(est.shape[0]):
        for i in range(est.shape[1]):
            for j in range(i + 1, est.shape[1]):
                de = float(est[r, i]) - float(est[r, j])
                dt = float(truth[r, i]) - float(truth[r, j])
                k = math.floor(abs(dt) * 200)
                pairs[k] = pairs.get(k, 0) + 1
                agree[k] = agree.get(k, 0) + int(
                    math.copysign(1, de) == math.copysign(1, dt) and de != 0
                )
                ties[k] = ties.get(k, 0) + int(de == 0)
    top = max(pairs) + 1
    return (
        np.array([pairs.get(k, 0) for k in range(top)]),
        np.array([agree.get(k, 0) for k in range(top)]),
        np.array([ties.get(k, 0) for k in range(top)]),
    )


def _slow_summaries(est: np.ndarray, truth: np.ndarray):
    runs, t = est.shape
    flags, gaps = [], []
    for r in range(runs):
        for i in range(t):
            for j in range(i + 1, t):
                de = float(est[r, i]) - float(est[r, j])
                dt = float(truth[r, i]) - float(truth[r, j])
                flags.append(math.copysign(1, de) == math.copysign(1, dt) and de != 0)
                gaps.append(abs(dt))
    per_run = [
        sum(abs(float(a) - float(b)) for a, b in zip(tr, es, strict=True)) / t
        for tr, es in zip(truth, est, strict=True)
    ]
    mae = sum(per_run) / runs
    taus = [stats.kendalltau(tr, es).statistic for tr, es in zip(truth, est, strict=True)]
    finite = [x for x in taus if not math.isnan(x)]
    tau = sum(finite) / len(finite) if finite else None
    return sum(flags) / len(flags), max(gaps), mae, tau, len(flags)


@pytest.mark.parametrize(("threshold", "n_boot", "seed"), [(0.8, None, 4), (0.7, 300, 11)])
def test_analyze_cell_paper_matches_slow_reference(threshold, n_boot, seed) -> None:
    est, truth = _cell(seed)
    cell = analyze_cell(
        est,
        truth,
        method="random",
        n=25,
        split="unseen",
        threshold=threshold,
        n_boot=n_boot,
        seed=seed,
    )
    pairs, agree, ties = _slow_paper_counts(est, truth)
    b = 1000 if n_boot is None else n_boot
    rng = np.random.default_rng(_seed_sequence(seed, "random", 25, "unseen", "paper"))
    mdad, lo, hi, reached = mdad_paper(pairs, agree, threshold=threshold, n_boot=b, rng=rng)
    mean_agree, max_gap, mae, tau, n_pairs = _slow_summaries(est, truth)
    assert (cell.method, cell.n, cell.split, cell.mode) == ("random", 25, "unseen", "paper")
    assert (cell.mdad, cell.ci_low, cell.ci_high, cell.reached) == (mdad, lo, hi, reached)
    assert cell.threshold == threshold and cell.n_boot == b and cell.seed == seed
    assert cell.n_runs == est.shape[0] and cell.n_pairs == n_pairs
    assert cell.mean_agreement == pytest.approx(mean_agree, abs=1e-15)
    assert cell.max_gap == pytest.approx(max_gap, abs=1e-15)
    assert cell.mean_abs_error == pytest.approx(mae, rel=1e-12)
    assert cell.kendall_tau == pytest.approx(tau, rel=1e-12)
    c = cell.curve
    present = np.flatnonzero(pairs)
    assert (c.method, c.n, c.split, c.kind) == ("random", 25, "unseen", "paper")
    np.testing.assert_allclose(c.gaps, present / 200, rtol=1e-15)
    np.testing.assert_allclose(c.gap_upper, (present + 1) / 200, rtol=1e-15)
    np.testing.assert_array_equal(c.n_pairs, pairs[present])
    np.testing.assert_allclose(c.p_same, agree[present] / pairs[present], rtol=1e-15)
    np.testing.assert_allclose(c.p_tie, ties[present] / pairs[present], rtol=1e-15)
    np.testing.assert_allclose(
        c.p_reversed, 1 - (agree[present] + ties[present]) / pairs[present], atol=1e-15
    )
    assert c.fitted is None and c.max_gap == pytest.approx(max_gap, abs=1e-15)
    assert ties.sum() > 0


def _slow_run_counts(est: np.ndarray, truth: np.ndarray):
    runs, t = est.shape
    keys = [
        math.floor(abs(float(truth[r, i]) - float(truth[r, j])) * 200 + 1e-9)
        for r in range(runs)
        for i in range(t)
        for j in range(i + 1, t)
        if truth[r, i] != truth[r, j]
    ]
    out = np.zeros((3, runs, max(keys) + 1))
    for r in range(runs):
        for i in range(t):
            for j in range(i + 1, t):
                dt = float(truth[r, i]) - float(truth[r, j])
                de = float(est[r, i]) - float(est[r, j])
                if dt == 0:
                    continue
                k = math.floor(abs(dt) * 200 + 1e-9)
                out[0, r, k] += 1
                out[1, r, k] += (de > 0) == (dt > 0) and de != 0
                out[2, r, k] += de == 0
    return out


@pytest.mark.parametrize(
    ("threshold", "n_boot", "min_pairs", "seed"), [(0.8, None, 100, 4), (0.65, 200, 7, 12)]
)
def test_analyze_cell_robust_matches_slow_reference(threshold, n_boot, min_pairs, seed) -> None:
    est, truth = _cell(seed, runs=5, t=10)
    cell = analyze_cell(
        est,
        truth,
        method="anchor_points",
        n=50,
        split="full",
        mode="robust",
        threshold=threshold,
        n_boot=n_boot,
        min_pairs=min_pairs,
        seed=seed,
    )
    counts = _slow_run_counts(est, truth)
    b = 1000 if n_boot is None else n_boot
    rng = np.random.default_rng(_seed_sequence(seed, "anchor_points", 50, "full", "robust"))
    mean_agree, max_gap, mae, tau, n_pairs = _slow_summaries(est, truth)
    mdad, lo, hi, curve = mdad_robust(
        *counts, threshold=threshold, min_pairs=min_pairs, n_boot=b, rng=rng, max_gap=max_gap
    )
    assert (cell.method, cell.n, cell.split, cell.mode) == ("anchor_points", 50, "full", "robust")
    assert (cell.mdad, cell.ci_low, cell.ci_high) == (mdad, lo, hi)
    assert cell.reached == (mdad is not None)
    assert cell.threshold == threshold and cell.n_boot == b and cell.seed == seed
    assert cell.n_runs == 5 and cell.n_pairs == n_pairs
    assert cell.mean_agreement == pytest.approx(mean_agree, abs=1e-15)
    assert cell.mean_abs_error == pytest.approx(mae, rel=1e-12)
    assert cell.kendall_tau == pytest.approx(tau, rel=1e-12)
    c = cell.curve
    assert (c.method, c.n, c.split, c.kind) == ("anchor_points", 50, "full", "robust")
    assert c.max_gap == pytest.approx(max_gap, abs=1e-15)
    for name in ("gaps", "gap_upper", "n_pairs", "p_same", "p_tie", "p_reversed", "fitted"):
        np.testing.assert_array_equal(getattr(c, name), getattr(curve, name))
    np.testing.assert_array_equal(c.band_low, curve.band_low)
    np.testing.assert_array_equal(c.band_high, curve.band_high)


def test_analyze_cell_kendall_tau_none_when_every_run_is_constant() -> None:
    truth = np.array([[0.2, 0.5, 0.7], [0.1, 0.4, 0.9]])
    est = np.full((2, 3), 0.5)
    cell = analyze_cell(est, truth, method="random", n=5, split="seen", n_boot=20)
    assert cell.kendall_tau is None
    assert cell.mean_agreement == 0.0 and cell.mdad == PAPER_SENTINEL and not cell.reached
    assert cell.mean_abs_error == pytest.approx((0.3 + 0 + 0.2 + 0.4 + 0.1 + 0.4) / 6, rel=1e-12)
    # one run constant, one not: the mean skips the NaN run
    est[1] = [0.1, 0.3, 0.2]
    cell = analyze_cell(est, truth, method="random", n=5, split="seen", n_boot=20)
    assert cell.kendall_tau == pytest.approx(stats.kendalltau(truth[1], est[1]).statistic)


@pytest.mark.parametrize("mode", ["Paper", "", "exact"])
def test_analyze_cell_refuses_an_unknown_mode(mode) -> None:
    est, truth = _cell(0)
    with pytest.raises(
        ValueError, match=_exact(f"mode: expected 'paper' or 'robust', got {mode!r}")
    ):
        analyze_cell(est, truth, method="random", n=5, split="seen", mode=mode)


@pytest.mark.parametrize(
    ("est_shape", "truth_shape"), [((3, 5), (3, 6)), ((5,), (5,)), ((2, 3, 4), (2, 3, 4))]
)
def test_analyze_cell_refuses_mismatched_shapes(est_shape, truth_shape) -> None:
    message = "estimates: expected the shape (runs, n_targets) of truth"
    with pytest.raises(ValueError, match=_exact(message)):
        analyze_cell(np.zeros(est_shape), np.zeros(truth_shape), method="random", n=5, split="seen")


# -- analyze_protocol ------------------------------------------------------------------------------
def _protocol(seed: int = 9) -> ProtocolResult:
    rng = np.random.default_rng(seed)
    runs, t = 4, 8
    acc = {s: rng.integers(0, 50, (runs, t)) / 50 for s in ("seen", "unseen", "full")}
    estimates = np.clip(
        acc["seen"][None, None] + rng.integers(-5, 6, (2, 2, runs, t)) / 50, 0.0, 1.0
    )
    return ProtocolResult(
        methods=("random", "anchor_points"),
        sizes=(10, 30),
        runs=runs,
        n_sources=20,
        n_targets=t,
        seed=seed,
        targets=np.tile(np.arange(t), (runs, 1)),
        sources=np.tile(np.arange(20), (runs, 1)),
        seen=np.zeros((runs, 40), dtype=bool),
        acc_seen=acc["seen"],
        acc_unseen=acc["unseen"],
        acc_full=acc["full"],
        estimates=estimates,
        subset_sizes=np.zeros((2, 2, runs), dtype=np.int64),
    )


@pytest.mark.parametrize(
    ("kwargs", "cell_kwargs"),
    [
        ({}, {"mode": "paper", "seed": 9}),
        (
            {
                "mode": "robust",
                "splits": ("full", "seen"),
                "threshold": 0.7,
                "n_boot": 150,
                "min_pairs": 5,
                "seed": 33,
            },
            {"mode": "robust", "threshold": 0.7, "n_boot": 150, "min_pairs": 5, "seed": 33},
        ),
    ],
)
def test_analyze_protocol_is_analyze_cell_per_method_size_split(kwargs, cell_kwargs) -> None:
    result = _protocol()
    table = analyze_protocol(result, **kwargs)
    splits = kwargs.get("splits", ("seen", "unseen"))
    expected = [
        analyze_cell(
            result.cell(m, n), result.truth(s), method=m, n=n, split=s, **cell_kwargs
        ).as_dict()
        for m in result.methods
        for n in result.sizes
        for s in splits
    ]
    assert [c.as_dict() for c in table] == expected


@pytest.mark.parametrize("split", ["test", "Seen"])
def test_analyze_protocol_refuses_an_unknown_split(split) -> None:
    message = f"splits: unknown split {split!r}; choose from ('seen', 'unseen', 'full')"
    with pytest.raises(ValueError, match=_exact(message)):
        analyze_protocol(_protocol(), splits=("seen", split))


# -- paper mode: no pairs at all -------------------------------------------------------------------
def test_mdad_paper_without_pairs_is_the_sentinel() -> None:
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    for pairs in (np.zeros(0, np.int64), np.zeros(5, np.int64)):
        got = mdad_paper(pairs, np.zeros_like(pairs), rng=rng)
        assert got == (0.5, 0.5, 0.5, False)
        assert all(type(v) is float for v in got[:3]) and got[3] is False
    assert rng.bit_generator.state == state  # nothing drawn


# -- paper mode: the band's >= at the threshold, single and one-pair bins --------------------------
def test_mdad_paper_band_edges_reach_the_threshold_with_equality() -> None:
    """Bin 0: Binomial(10, 0.6) / 10 has 97.5 % quantile exactly 0.9 (P(X <= 8) = 0.954 and
    P(X <= 9) = 0.994), so u = 0.9 >= 0.9 puts b_u at bin 0; bin 1 (950/1000) reaches the mean.
    CI = [0.005 - 0.005, 0.005 + 0.005]; a strict u > t would give [0.005, 0.005]."""
    assert stats.binom.cdf(8, 10, 0.6) < 0.975 < stats.binom.cdf(9, 10, 0.6)
    mdad, lo, hi, reached = mdad_paper(
        np.array([10, 1000]), np.array([6, 950]), threshold=0.9, rng=np.random.default_rng(3)
    )
    assert (mdad, reached) == (0.005, True)
    assert (lo, hi) == (pytest.approx(0.0, abs=1e-15), pytest.approx(0.01))
    # Binomial(100, 0.99) / 100 has 2.5 % quantile exactly 0.97: l = 0.97 >= 0.97 puts b_l at bin 0
    assert stats.binom.cdf(96, 100, 0.99) < 0.025 < stats.binom.cdf(97, 100, 0.99)
    got = mdad_paper(np.array([100]), np.array([99]), threshold=0.97, rng=np.random.default_rng(4))
    assert got == (0.0, 0.0, 0.0, True)


def test_mdad_paper_single_bin_and_one_pair_bins() -> None:
    assert mdad_paper(np.array([10]), np.array([10]), rng=np.random.default_rng(0)) == (
        0.0,
        0.0,
        0.0,
        True,
    )
    # bin 0 holds one agreeing pair (mean 1), bin 2 one disagreeing pair
    got = mdad_paper(np.array([1, 0, 1]), np.array([1, 0, 0]), rng=np.random.default_rng(0))
    assert got == (0.0, 0.0, 0.0, True)


def _replay_paper(pairs, agree, threshold, n_boot, seed):
    """Per-bin loop over the same binomial stream (one draw call over the present bins)."""
    entries = [k for k in range(len(pairs)) if pairs[k] > 0]
    looked = [math.floor((k / 200) * 200) for k in entries]
    m = np.array([pairs[j] for j in looked])
    a = np.array([agree[j] for j in looked])
    rng = np.random.default_rng(seed)
    draws = rng.binomial(m, np.where(m > 0, a / np.maximum(m, 1), 0.0), size=(n_boot, len(m)))
    mdad = b_u = b_l = 0.5
    for col in range(len(entries)):
        if m[col] == 0:
            continue
        key = looked[col] / 200
        means = draws[:, col] / m[col]
        lo_q, hi_q = np.quantile(means, [0.025, 0.975])
        if mdad == 0.5 and a[col] / m[col] >= threshold:
            mdad = key
        if b_u == 0.5 and hi_q >= threshold:
            b_u = key
        if b_l == 0.5 and lo_q >= threshold:
            b_l = key
    half = max(mdad - b_u, b_l - mdad)
    return mdad, mdad - half, mdad + half


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mdad_paper_matches_a_per_bin_replay_with_empty_bins(seed) -> None:
    """Bins with gaps between them (empty bins draw nothing) and bin 29 looked up as empty bin 28."""
    pairs = np.zeros(40, np.int64)
    agree = np.zeros(40, np.int64)
    for k, (mm, aa) in {
        0: (40, 20),
        3: (30, 22),
        7: (25, 21),
        12: (60, 50),
        29: (50, 50),
        33: (80, 72),
    }.items():
        pairs[k], agree[k] = mm, aa
    mdad, lo, hi, _ = mdad_paper(pairs, agree, n_boot=400, rng=np.random.default_rng(seed))
    ref = _replay_paper(pairs, agree, 0.8, 400, seed)
    assert (mdad, lo, hi) == pytest.approx(ref, abs=1e-15)


def test_analyze_cell_passes_threshold_and_n_boot() -> None:
    """Seed 4's cell: threshold 0.6 and 5 resamples give an answer that 0.8 or 1000 would not."""
    est, truth = _cell(4)
    cell = analyze_cell(
        est, truth, method="random", n=25, split="unseen", threshold=0.6, n_boot=5, seed=4
    )
    pairs, agree, _ = _slow_paper_counts(est, truth)
    rng = np.random.default_rng(_seed_sequence(4, "random", 25, "unseen", "paper"))
    ref = mdad_paper(pairs, agree, threshold=0.6, n_boot=5, rng=rng)
    assert (cell.mdad, cell.ci_low, cell.ci_high, cell.reached) == ref
    assert ref[:3] == pytest.approx((0.03, 0.0, 0.06))


# -- merging sparse bins ---------------------------------------------------------------------------
def _brute_merge(pairs: list[int], min_pairs: int) -> list[int]:
    groups: list[list[int]] = []
    current: list[int] = []
    for k in range(len(pairs)):
        current.append(k)
        if sum(pairs[i] for i in current) >= min_pairs and k + 1 < len(pairs):
            groups.append(current)
            current = []
    if sum(pairs[i] for i in current) >= min_pairs or not groups:
        groups.append(current)
    else:
        groups[-1].extend(current)
    return [g[0] for g in groups]


def test_merge_sparse_bins_matches_brute_force() -> None:
    rng = np.random.default_rng(40)
    for _ in range(300):
        size = int(rng.integers(1, 9))
        min_pairs = int(rng.integers(1, 6))
        pairs = rng.integers(0, 4, size).tolist()
        assert merge_sparse_bins(np.array(pairs), min_pairs).tolist() == _brute_merge(
            pairs, min_pairs
        )
    cases = {
        (99, 1, 100): [0, 2],
        (100, 100): [0, 1],
        (100, 99): [0],
        (100, 30): [0],
        (5, 3): [0],
        (30, 100): [0],
    }
    for pairs, expected in cases.items():
        assert merge_sparse_bins(np.array(pairs), 100).tolist() == expected
    # min_pairs = 0: every bin is its own group
    assert merge_sparse_bins(np.array([0, 2, 0, 1]), 0).tolist() == [0, 1, 2, 3]


# -- isotonic_reaches: any leading shape, per-curve tolerance, equality ------------------------------
def test_isotonic_reaches_one_curve_and_3d_batch() -> None:
    rng = np.random.default_rng(41)
    w = rng.integers(1, 20, (2, 3, 6)).astype(float)
    s = rng.binomial(w.astype(int), np.linspace(0.5, 0.95, 6)).astype(float)
    from scipy.optimize import isotonic_regression

    for t in (0.6, 0.75, 0.9):
        ref = np.array(
            [
                [
                    isotonic_regression(s[a, b] / w[a, b], weights=w[a, b]).x >= t - 1e-12
                    for b in range(3)
                ]
                for a in range(2)
            ]
        )
        np.testing.assert_array_equal(isotonic_reaches(s, w, t), ref)
        np.testing.assert_array_equal(isotonic_reaches(s[1, 2], w[1, 2], t), ref[1, 2])


def test_isotonic_reaches_tolerance_is_per_curve() -> None:
    """799,999 of 1e6 is below 0.8 by 1 pair: a tolerance of 1e-9 * (1 + 1e6) does not absorb it, even
    when another curve in the batch carries 2e9 pairs."""
    sums = np.array([[799_999.0], [2e9]])
    weights = np.array([[1e6], [2e9]])
    np.testing.assert_array_equal(isotonic_reaches(sums, weights, 0.8), [[False], [True]])


def test_isotonic_reaches_tolerance_boundary() -> None:
    """Weight 1: tolerance 2e-9. A shortfall of exactly 2e-9 reaches; 2.5e-9 does not; a group mean
    equal to the threshold (0.8 = 4 / 5) reaches."""
    assert isotonic_reaches(np.array([[2e-9]]), np.array([[1.0]]), 4e-9)[0, 0]
    assert not isotonic_reaches(np.array([[0.5]]), np.array([[1.0]]), 0.5 + 2.5e-9)[0, 0]
    assert isotonic_reaches(np.array([[0.5]]), np.array([[1.0]]), 0.5 + 1.5e-9)[0, 0]
    assert isotonic_reaches(np.array([[4.0]]), np.array([[5.0]]), 0.8)[0, 0]


# -- robust mode: the curve's fields, a fit equal to the threshold, resamples that never reach -------
def test_mdad_robust_curve_fields_known_answer() -> None:
    """Three groups of bins (min_pairs 10): [0, 2), [2, 3), [3, 5)."""
    pairs = np.array([[4, 6, 10, 3, 8], [0, 0, 0, 0, 0]])
    same = np.array([[2, 4, 8, 3, 7], [0, 0, 0, 0, 0]])
    tie = np.array([[1, 1, 1, 0, 1], [0, 0, 0, 0, 0]])
    mdad, _, _, c = mdad_robust(
        pairs, same, tie, min_pairs=10, n_boot=20, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(c.gaps, [0.0, 0.01, 0.015])
    np.testing.assert_allclose(c.gap_upper, [0.01, 0.015, 0.025])
    np.testing.assert_array_equal(c.n_pairs, [10, 10, 11])
    np.testing.assert_allclose(c.p_same, [0.6, 0.8, 10 / 11])
    np.testing.assert_allclose(c.p_tie, [0.2, 0.1, 1 / 11])
    np.testing.assert_allclose(c.p_reversed, [0.2, 0.1, 0.0], atol=1e-15)
    assert c.max_gap == pytest.approx(0.025) and c.kind == "robust"
    assert mdad == pytest.approx(0.01)  # fitted 0.8 at group 1 reaches 0.8 with equality
    np.testing.assert_allclose(c.fitted, [0.6, 0.8, 10 / 11])


def test_mdad_robust_resamples_that_never_reach_give_no_upper_end() -> None:
    """10 runs of 20 pairs in one bin, 2 runs all agreeing and 8 at half: pooled 0.6 reaches 0.6;
    a resample reaches iff it draws the good runs at least twice (P = 0.62), so the 97.5 %
    quantile is "not reached"."""
    pairs = np.full((10, 1), 20)
    same = np.array([[20], [20]] + [[10]] * 8)
    mdad, lo, hi, _ = mdad_robust(
        pairs,
        same,
        np.zeros_like(pairs),
        threshold=0.6,
        min_pairs=1,
        n_boot=2000,
        rng=np.random.default_rng(5),
    )
    assert (mdad, lo, hi) == (0.0, 0.0, None)
    assert stats.binom.sf(1, 10, 0.2) == pytest.approx(0.624, abs=1e-3)


def test_isotonic_increasing_many_rows_in_small_chunks() -> None:
    """50 curves of 3 points with a 9-element chunk (one row per chunk): every row is computed."""
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(42)
    w = rng.integers(1, 30, (50, 3)).astype(float)
    y = rng.random((50, 3))
    got = isotonic_increasing(y * w, w, chunk=9)
    ref = np.array([isotonic_regression(yy, weights=ww).x for yy, ww in zip(y, w, strict=True)])
    np.testing.assert_allclose(got, ref, atol=1e-12)


# -- robust mode: a slow replay of the runs bootstrap ----------------------------------------------
def _replay_robust(pairs, same, threshold, min_pairs, n_boot, n_band, seed):
    """Group the bins (brute-force merge), draw the same run indices, then per resample: pooled
    counts, scipy's isotonic fit, first group reaching the threshold; inverted-CDF quantiles."""
    from scipy.optimize import isotonic_regression

    runs, n_bins = pairs.shape
    starts = _brute_merge(pairs.sum(axis=0).tolist(), min_pairs)
    edges = [*starts, n_bins]
    gp = np.array(
        [[pairs[r, edges[g] : edges[g + 1]].sum() for g in range(len(starts))] for r in range(runs)]
    )
    gs = np.array(
        [[same[r, edges[g] : edges[g + 1]].sum() for g in range(len(starts))] for r in range(runs)]
    )
    gaps = np.array(starts) / 200
    draws = np.random.default_rng(seed).integers(0, runs, size=(n_boot, runs))
    values, fits = [], []
    for b in range(n_boot):
        tp = sum(gp[r] for r in draws[b]).astype(float)
        ts = sum(gs[r] for r in draws[b]).astype(float)
        keep = tp > 0
        fit = np.full(len(starts), np.nan)
        if keep.any():
            fit[keep] = isotonic_regression(ts[keep] / tp[keep], weights=tp[keep]).x
            # a zero-weight group takes the fit of the range around it (its left neighbour's level)
            for g in range(len(starts)):
                if not keep[g]:
                    left = [fit[h] for h in range(g) if keep[h]]
                    right = [fit[h] for h in range(g + 1, len(starts)) if keep[h]]
                    fit[g] = max(left[-1] if left else -np.inf, min(right) if right else -np.inf)
                    fit[g] = fit[g] if np.isfinite(fit[g]) else np.nan
        ok = np.flatnonzero(fit[keep] >= threshold - 1e-12)
        values.append(float(gaps[keep][ok[0]]) if ok.size else np.inf)
        fits.append(fit)
    srt = sorted(values)
    q_lo, q_hi = (srt[math.ceil(q * n_boot) - 1] for q in (0.025, 0.975))
    band = np.array(fits[:n_band])
    quant = np.nanquantile if np.isnan(band).any() else np.quantile
    lo_band, hi_band = quant(band, [0.025, 0.975], axis=0)
    fin = lambda v: v if np.isfinite(v) else None  # noqa: E731
    return fin(q_lo), fin(q_hi), gaps, lo_band, hi_band


@pytest.mark.parametrize(
    ("threshold", "min_pairs", "n_boot", "n_band", "seed"),
    [(0.8, 10, 40, 15, 1), (0.7, 25, 33, 200, 2), (0.75, 5, 57, 9, 3)],
)
def test_mdad_robust_matches_a_slow_replay(threshold, min_pairs, n_boot, n_band, seed) -> None:
    rng = np.random.default_rng(60 + seed)
    runs, bins = 8, 7
    pairs = rng.integers(0, 6, (runs, bins))
    pairs[rng.random((runs, bins)) < 0.3] = 0  # runs without pairs in some bins
    same = rng.binomial(pairs, np.linspace(0.45, 0.95, bins))
    tie = np.zeros_like(pairs)
    _, lo, hi, curve = mdad_robust(
        pairs,
        same,
        tie,
        threshold=threshold,
        min_pairs=min_pairs,
        n_boot=n_boot,
        n_band=n_band,
        rng=np.random.default_rng(seed),
    )
    q_lo, q_hi, gaps, band_lo, band_hi = _replay_robust(
        pairs, same, threshold, min_pairs, n_boot, n_band, seed
    )
    np.testing.assert_allclose(curve.gaps, gaps)
    assert (lo, hi) == (q_lo, q_hi)
    np.testing.assert_allclose(curve.band_low, band_lo, atol=1e-12)
    np.testing.assert_allclose(curve.band_high, band_hi, atol=1e-12)


def test_mdad_robust_band_skips_resamples_without_pairs() -> None:
    """Only run 0 has pairs: a resample missing it (P = (3/4)^4 = 0.32) has no fit, and the band
    is the quantile of the others (NaN-aware)."""
    pairs = np.zeros((4, 2), np.int64)
    same = np.zeros((4, 2), np.int64)
    pairs[0], same[0] = [10, 10], [6, 9]
    _, _, _, curve = mdad_robust(
        pairs,
        same,
        np.zeros_like(pairs),
        min_pairs=1,
        n_boot=50,
        n_band=50,
        rng=np.random.default_rng(8),
    )
    _, _, _, band_lo, band_hi = _replay_robust(pairs, same, 0.8, 1, 50, 50, 8)
    assert np.isfinite(curve.band_low).all()
    np.testing.assert_allclose(curve.band_low, band_lo, atol=1e-12)
    np.testing.assert_allclose(curve.band_high, band_hi, atol=1e-12)


def test_mdad_robust_defaults_and_small_count_dtypes() -> None:
    """Pooled bins of exactly 100 pairs (bins 0 and 4): the default min_pairs = 100 makes two groups.
    uint8 counts whose sums exceed 255 give the int64 answer (no wrap-around)."""
    runs = 4
    pairs = np.zeros((runs, 5), np.int64)
    pairs[:, 0], pairs[:, 4] = 25, 25
    same = np.zeros_like(pairs)
    same[:, 0] = [20, 25, 10, 24]
    same[:, 4] = 25
    tie = np.zeros_like(pairs)
    tie[:, 0] = 1
    got = mdad_robust(pairs, same, tie, rng=np.random.default_rng(9))
    ref = mdad_robust(
        pairs, same, tie, min_pairs=100, n_boot=1000, n_band=200, rng=np.random.default_rng(9)
    )
    np.testing.assert_allclose(got[3].gaps, [0.0, 0.005])
    np.testing.assert_allclose(got[3].gap_upper, [0.005, 0.025])
    assert got[:3] == ref[:3]
    np.testing.assert_array_equal(got[3].band_low, ref[3].band_low)
    np.testing.assert_array_equal(got[3].band_high, ref[3].band_high)
    big = mdad_robust(
        pairs * 10, same * 10, tie * 10, min_pairs=10, n_boot=30, rng=np.random.default_rng(2)
    )
    small = mdad_robust(
        (pairs * 10).astype(np.uint8),
        (same * 10).astype(np.uint8),
        (tie * 10).astype(np.uint8),
        min_pairs=10,
        n_boot=30,
        rng=np.random.default_rng(2),
    )
    assert big[:3] == small[:3]
    for name in ("n_pairs", "p_same", "p_tie", "fitted"):
        np.testing.assert_array_equal(getattr(small[3], name), getattr(big[3], name))
    assert small[3].n_pairs.dtype == np.float64


def test_mdad_robust_default_n_boot_and_n_band() -> None:
    """On this curve 1001 resamples move the interval and a 201-resample band moves the band, so
    the defaults (1000, 200) are pinned by equality with the explicit call."""
    r = np.random.default_rng(1113)
    pairs = r.integers(0, 8, (12, 4))
    same = r.binomial(pairs, [0.6, 0.7, 0.8, 0.9])
    tie = np.zeros_like(pairs)

    def run(**kw):
        return mdad_robust(pairs, same, tie, min_pairs=5, rng=np.random.default_rng(113), **kw)

    got, ref = run(), run(n_boot=1000, n_band=200)
    assert got[:3] == ref[:3]
    np.testing.assert_array_equal(got[3].band_low, ref[3].band_low)
    np.testing.assert_array_equal(got[3].band_high, ref[3].band_high)
    assert run(n_boot=1001)[:3] != ref[:3]
    assert not np.array_equal(run(n_band=201)[3].band_low, ref[3].band_low)


def _robust_cell() -> tuple[np.ndarray, np.ndarray]:
    """200 runs of 2 targets: 100 runs with a gap in bin 0, 100 with a gap in bin 4 (pooled 100 each)."""
    rng = np.random.default_rng(70)
    truth = np.zeros((200, 2))
    truth[:, 0] = 0.5
    truth[:100, 1] = 0.5 + 0.001
    truth[100:, 1] = 0.5 + 0.021
    est = np.round(truth + rng.normal(0, 0.01, truth.shape), 3)
    return est, truth


def test_analyze_cell_robust_defaults() -> None:
    est, truth = _robust_cell()
    cell = analyze_cell(est, truth, method="random", n=5, split="seen", mode="robust")
    counts = _slow_run_counts(est, truth)
    rng = np.random.default_rng(_seed_sequence(0, "random", 5, "seen", "robust"))
    ref = mdad_robust(
        *counts,
        min_pairs=100,
        n_boot=1000,
        rng=rng,
        max_gap=float(np.abs(truth[:, 0] - truth[:, 1]).max()),
    )
    assert (cell.mdad, cell.ci_low, cell.ci_high) == ref[:3]
    assert cell.seed == 0 and cell.n_boot == 1000
    np.testing.assert_allclose(cell.curve.gaps, [0.0, 0.005])
    np.testing.assert_array_equal(cell.curve.band_low, ref[3].band_low)
    short = analyze_cell(
        est, truth, method="random", n=5, split="seen", mode="robust", n_boot=37, seed=3
    )
    rng = np.random.default_rng(_seed_sequence(3, "random", 5, "seen", "robust"))
    ref = mdad_robust(*counts, min_pairs=100, n_boot=37, rng=rng, max_gap=cell.max_gap)
    assert (short.mdad, short.ci_low, short.ci_high) == ref[:3]
    np.testing.assert_array_equal(short.curve.band_low, ref[3].band_low)


def test_analyze_protocol_robust_default_min_pairs() -> None:
    est, truth = _robust_cell()
    result = ProtocolResult(
        methods=("random",),
        sizes=(5,),
        runs=200,
        n_sources=2,
        n_targets=2,
        seed=0,
        targets=np.tile(np.arange(2), (200, 1)),
        sources=np.tile(np.arange(2), (200, 1)),
        seen=np.zeros((200, 4), dtype=bool),
        acc_seen=truth,
        acc_unseen=truth,
        acc_full=truth,
        estimates=est[None, None],
        subset_sizes=np.zeros((1, 1, 200), dtype=np.int64),
    )
    (cell,) = analyze_protocol(result, mode="robust", splits=("seen",), n_boot=20)
    np.testing.assert_allclose(cell.curve.gaps, [0.0, 0.005])
