"""Graded scores (issue 35): coverage of the default intervals, wrong-decision rates, and the graded
leaderboard's cost against the 0/1 one. SYNTHETIC graded families (labelled), and one REAL graded
matrix (``--part real``: AlpacaEval's judge preferences, bench/data/alpaca_eval_weighted.npz).

Families (``N`` items, ``M`` models; a model's strength ``θ`` and an item's difficulty ``b``):

* ``mass01``: mass at 0 and 1 plus a continuum: ``P(0) = sigmoid(b - θ) / 2``, ``P(1) = sigmoid(θ - b) / 2``,
  otherwise ``Beta`` around ``sigmoid(θ - b)`` (partial credit);
* ``judge``: skewed like judge preferences, most scores near 0: 0 with probability
  ``0.6 + 0.3 sigmoid(b - θ)``, otherwise ``Beta(0.7, 4)`` shifted by the strength;
* ``ksample``: per-item pass rates over ``K = 8`` samples, ``Binomial(8, sigmoid(θ - b)) / 8``.

Measured:

1. coverage of the service's default interval of a uniform random subset
   (:func:`app.core.scoring.score_models.score_models`: ``betting_fpc`` for graded rows) at
   n = 25, 50, 100, overall and in the lowest and highest fifths of models by true mean; and of
   the stratified design's interval (``subtask_stratified``: ``stratified_ht``);
2. wrong-decision rates at alpha = 0.05: the verdict's full-benchmark sign-flip test under a
   true null (two models with the same item-score distribution), the graded leaderboard's
   family-wise rate of any wrong ordering (paired t-tests + Holm, ten models, half of them tied),
   and the evaluation sessions' paired confidence sequence (time-uniform miss of the true
   full-benchmark difference) on graded paired values;
3. the graded leaderboard of 5,000 models x 250 items against the 0/1 leaderboard of the same
   shape: time (best of 3, interleaved) and peak traced memory (tracemalloc).

Run: ``nice -n 10 .venv/bin/python -m bench.bench_graded [--quick]``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path

import numpy as np

from app.core.estimation.bounded import sign_flip_test
from app.core.ranking.graded import graded_leaderboard
from app.core.ranking.leaderboard import leaderboard
from app.core.results import Selection
from app.core.scoring.score_models import score_models
from app.core.sequential.confidence_sequences import (
    confidence_sequence,
    difference_interval,
    paired_values,
)

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("mass01", "judge", "ksample")
SIZES = (25, 50, 100)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def family(name: str, theta: np.ndarray, b: np.ndarray, rng) -> np.ndarray:
    """Scores (len(theta), len(b)) in [0, 1] of a SYNTHETIC graded family."""
    p = _sigmoid(theta[:, None] - b[None, :])
    shape = p.shape
    if name == "mass01":
        u = rng.random(shape)
        cont = rng.beta(4 * p + 0.5, 4 * (1 - p) + 0.5)
        return np.where(u < (1 - p) / 2, 0.0, np.where(u > 1 - p / 2, 1.0, cont))
    if name == "judge":
        zero = rng.random(shape) < 0.6 + 0.3 * (1 - p)
        return np.where(zero, 0.0, np.clip(rng.beta(0.7, 4.0, shape) + 0.3 * p, 0, 1))
    if name == "ksample":
        return rng.binomial(8, p) / 8.0
    raise ValueError(name)


def _selection(method: str, idx: np.ndarray, weights: np.ndarray) -> Selection:
    return Selection(
        method=method,
        indices=idx,
        weights=weights,
        estimator="mean",
        estimate_on="correct",
        signal="correct",
        n_requested=idx.size,
        n_candidates=idx.size,
        seed=0,
    )


def coverage(name: str, rng, *, n_items: int, n_models: int, reps: int) -> list[dict]:
    """Coverage of the default intervals on one SYNTHETIC family (random and stratified)."""
    theta = np.linspace(-2.0, 2.0, n_models)
    b = rng.normal(0, 1.2, n_items)
    y = family(name, theta, b, rng)
    # four subtasks of 40/30/20/10 % of the items, n/4 items drawn from each (unequal
    # weights N_h / (N n_h): the stratified design's own interval, not the uniform one)
    strata = np.repeat(
        np.arange(4), np.diff(np.round(np.r_[0, 0.4, 0.7, 0.9, 1.0] * n_items).astype(int))
    )
    return coverage_of(name, y, strata, rng, reps=reps)


def coverage_of(name: str, y: np.ndarray, strata: np.ndarray, rng, *, reps: int) -> list[dict]:
    """Coverage of the default intervals of random and stratified subsets of the rows ``y``
    (models x items), the truth each row's mean over every item; ``strata``: each item's
    subtask (the stratified design draws ``n / H`` items from each of the ``H``)."""
    n_models, n_items = y.shape
    truth = y.mean(axis=1)
    order = np.argsort(truth)
    fifth = max(1, n_models // 5)
    low, high = order[:fifth], order[-fifth:]
    n_strata = int(strata.max()) + 1
    out = []
    for n in SIZES:
        for design in ("random", "subtask_stratified"):
            hit = np.zeros((reps, n_models), dtype=bool)
            width = np.zeros((reps, n_models))
            label = None
            for r in range(reps):  # one subset per repetition, every model scored on it at once
                if design == "random":
                    idx = np.sort(rng.choice(n_items, n, replace=False))
                    w = np.full(n, 1.0 / n)
                else:
                    per = n // n_strata
                    parts = [
                        rng.choice(np.flatnonzero(strata == h), per, replace=False)
                        for h in range(n_strata)
                    ]
                    idx = np.concatenate(parts)
                    size_h = np.bincount(strata, minlength=n_strata)[strata[idx]]
                    w = size_h / (n_items * per)
                sel = _selection(design, idx, w)
                (batch,) = score_models(sel, y[:, idx], n_items, estimators=("mean",))
                label = batch.interval
                hit[r] = (batch.ci_low <= truth) & (truth <= batch.ci_high)
                width[r] = batch.ci_high - batch.ci_low
            out.append(
                {
                    "family": name,
                    "design": design,
                    "n": int(idx.size),
                    "interval": label,
                    "overall": float(hit.mean()),
                    "low_fifth": float(hit[:, low].mean()),
                    "high_fifth": float(hit[:, high].mean()),
                    "width": float(width.mean()),
                }
            )
            print(out[-1], flush=True)
    return out


def verdict_null(name: str, rng, *, n_items: int, reps: int) -> float:
    """P(the sign-flip test rejects at 0.05) for two models with one score distribution."""
    rejections = 0
    for _ in range(reps):  # one benchmark per repetition
        b = rng.normal(0, 1.2, n_items)
        y = family(name, np.zeros(2), b, rng)
        rejections += sign_flip_test(y[0] - y[1], n_resamples=2000, seed=1).p_value <= 0.05
    return rejections / reps


def leaderboard_fwer(name: str, rng, *, n_items: int, reps: int) -> float:
    """P(any wrong ordering) of the graded leaderboard (Holm): ten models, five tied at the top
    strength and five spread below; an ordering is wrong when the tied are ordered or the
    declared direction is against the true item-population means."""
    theta = np.r_[np.zeros(5), np.linspace(-1.5, -0.3, 5)]
    # the item population's true means, from a large draw
    big_b = rng.normal(0, 1.2, 20_000)
    true = family(name, theta, big_b, rng).mean(axis=1)
    true[:5] = true[:5].mean()
    wrong = 0
    for _ in range(reps):
        b = rng.normal(0, 1.2, n_items)
        y = family(name, theta, b, rng)
        pairs = graded_leaderboard(y).pairs
        sig = pairs.significant
        d_true = true[pairs.a] - true[pairs.b]
        bad = sig & ((np.abs(d_true) < 1e-12) | (np.sign(pairs.difference) != np.sign(d_true)))
        wrong += bool(bad.any())
    return wrong / reps


def session_miss(name: str, rng, *, n_items: int, reps: int) -> float:
    """P(the paired CS ever excludes the true full-benchmark difference), graded values."""
    b = rng.normal(0, 1.2, n_items)
    y = family(name, np.array([0.2, 0.0]), b, rng)
    x = paired_values(y[0], y[1])
    true = float((y[0] - y[1]).mean())
    orders = np.argsort(rng.random((reps, n_items)), axis=1)
    path = confidence_sequence(x[orders], n_items=n_items, paired=True)
    lo, hi = difference_interval(path.lower, path.upper)
    return float(np.mean(np.any((lo > true + 1e-9) | (hi < true - 1e-9), axis=1)))


def alpaca() -> tuple[np.ndarray, np.ndarray]:
    """REAL graded matrix (bench/data/alpaca_eval_weighted.npz: 54 models x 805 AlpacaEval
    instructions, the judge's weighted preference in [0, 1]) and each item's subtask index."""
    with np.load(ROOT / "bench" / "data" / "alpaca_eval_weighted.npz", allow_pickle=False) as d:
        y, subsets = d["scores"].astype(np.float64), d["subsets"]
    return y, np.unique(subsets, return_inverse=True)[1]


def real_decisions(y: np.ndarray, rng, *, n: int, reps: int) -> dict:
    """Wrong-decision rates on a REAL matrix, the truth its full-benchmark means.

    * verdict: two models drawn at random, ``n`` items at random; the sign-flip test at 0.05 on
      the subset's item differences; wrong when it rejects in the direction against the full
      benchmark (also counted among pairs less than 2 points apart);
    * leaderboard: every model on one random ``n``-item subset (Holm over all pairs); wrong
      when any significant ordering is against the full benchmark;
    * session: the paired confidence sequence over every item in a random order; a miss when
      it ever excludes the full-benchmark difference (pairs drawn among the closest fifth).
    """
    m, n_items = y.shape
    truth = y.mean(axis=1)
    wrong = close = close_wrong = 0
    for _ in range(reps * 25):
        i, j = rng.choice(m, 2, replace=False)
        idx = rng.choice(n_items, n, replace=False)
        d = y[i, idx] - y[j, idx]
        res = sign_flip_test(d, n_resamples=2000, seed=int(rng.integers(2**31)))
        bad = res.p_value <= 0.05 and np.sign(d.mean()) != np.sign(truth[i] - truth[j])
        wrong += bad
        if abs(truth[i] - truth[j]) < 0.02:
            close += 1
            close_wrong += bad
    board_wrong = 0
    for _ in range(reps * 4):
        idx = rng.choice(n_items, n, replace=False)
        pairs = graded_leaderboard(y[:, idx]).pairs
        d_true = truth[pairs.a] - truth[pairs.b]
        board_wrong += bool(
            (pairs.significant & (np.sign(pairs.difference) != np.sign(d_true))).any()
        )
    gaps = np.abs(truth[:, None] - truth[None, :])
    iu = np.triu_indices(m, 1)
    closest = np.argsort(gaps[iu])[: max(1, iu[0].size // 5)]
    misses = trials = 0
    for q in rng.choice(closest, min(closest.size, reps), replace=False):
        i, j = iu[0][q], iu[1][q]
        x = paired_values(y[i], y[j])
        true = float((y[i] - y[j]).mean())
        orders = np.argsort(rng.random((40, n_items)), axis=1)
        path = confidence_sequence(x[orders], n_items=n_items, paired=True)
        lo, hi = difference_interval(path.lower, path.upper)
        misses += int(np.any((lo > true + 1e-9) | (hi < true - 1e-9), axis=1).sum())
        trials += orders.shape[0]
    row = {
        "family": "alpaca (REAL)",
        "n": n,
        "verdict_wrong": wrong / (reps * 25),
        "verdict_tests": reps * 25,
        "verdict_wrong_close": close_wrong / max(close, 1),
        "verdict_close_tests": close,
        "leaderboard_fwer": board_wrong / (reps * 4),
        "session_miss": misses / max(trials, 1),
        "session_runs": trials,
    }
    print(row, flush=True)
    return row


def leaderboard_cost(m: int = 5000, n: int = 250, repeats: int = 3) -> dict:
    """Graded vs 0/1 leaderboard of the same shape: best time and peak traced memory."""
    rng = np.random.default_rng(35)
    theta = rng.normal(0, 1, m)
    b = rng.normal(0, 1, n)
    scores = family("mass01", theta, b, rng).astype(np.float32)
    binary = (rng.random((m, n)) < _sigmoid(theta[:, None] - b[None, :])).astype(np.uint8)
    times = {"graded": [], "binary": []}
    peaks = {}
    for _ in range(repeats):  # interleaved: the shared machine's load hits both alike
        for label, run in (
            ("graded", lambda: graded_leaderboard(scores)),
            ("binary", lambda: leaderboard(binary)),
        ):
            tracemalloc.start()
            t0 = time.perf_counter()
            board = run()
            times[label].append(time.perf_counter() - t0)
            peaks[label] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            del board
    out = {
        "m": m,
        "n": n,
        "graded_s": min(times["graded"]),
        "binary_s": min(times["binary"]),
        "graded_peak_mib": peaks["graded"],
        "binary_peak_mib": peaks["binary"],
    }
    out["time_ratio"] = out["graded_s"] / out["binary_s"]
    out["memory_ratio"] = out["graded_peak_mib"] / out["binary_peak_mib"]
    print(out, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--part", choices=["all", "coverage", "decisions", "cost", "real"], default="all"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(20261204)
    reps = 10 if args.quick else 40
    if args.part in ("all", "coverage"):
        for name in FAMILIES:
            coverage(name, rng, n_items=400, n_models=30, reps=reps)
    if args.part in ("all", "decisions"):
        for name in FAMILIES:
            for n in SIZES:
                row = {
                    "family": name,
                    "n": n,
                    "verdict_null_rejection": verdict_null(name, rng, n_items=n, reps=25 * reps),
                    "leaderboard_fwer": leaderboard_fwer(name, rng, n_items=n, reps=4 * reps),
                    "session_miss": session_miss(name, rng, n_items=n, reps=4 * reps),
                }
                print(row, flush=True)
    if args.part in ("all", "real"):
        y, strata = alpaca()
        coverage_of("alpaca (REAL)", y, strata, rng, reps=reps)
        for n in SIZES:
            real_decisions(y, rng, n=n, reps=reps)
    if args.part in ("all", "cost"):
        leaderboard_cost()


if __name__ == "__main__":
    main()
