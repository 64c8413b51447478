"""Tests that kill the surviving mutants of ``app/core/mdad.py`` (issue 17, ``make mutation``).

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

from app.core.mdad import (
    PAPER_SENTINEL,
    analyze_cell,
    analyze_protocol,
    bootstrap_seed_sequence,
    mdad_paper,
    mdad_robust,
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
