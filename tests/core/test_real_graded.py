"""The REAL graded matrix (bench/data/alpaca_eval_weighted.npz: AlpacaEval judge preferences,
54 models x 805 instructions, with each model's output words): what it holds, and the paired
session CS on its closest pairs (can fail: a miss rate above what level 0.05 allows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import binom

from app.core.sequential.confidence_sequences import (
    confidence_sequence,
    difference_interval,
    paired_values,
)

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "alpaca_eval_weighted.npz"


def _load():
    with np.load(DATA, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


def test_the_matrix_is_graded_real_and_aligned():
    d = _load()
    y, words = d["scores"], d["words"]
    assert y.shape == words.shape == (d["models"].size, d["instructions"].size) == (54, 805)
    assert np.all(np.isfinite(y)) and y.min() >= 0 and y.max() <= 1
    assert 0.5 < np.mean(y < 0.05) < 0.95  # skewed like judge preferences: most near 0
    assert np.mean((y > 0.05) & (y < 0.95)) > 0.05  # and graded, not 0/1
    assert words.min() >= 0 and np.percentile(words, 95) / max(np.percentile(words, 5), 1) > 10
    assert len(set(d["subsets"].tolist())) == 5


def test_paired_session_cs_covers_on_the_closest_real_pairs():
    y = _load()["scores"].astype(np.float64)
    truth = y.mean(axis=1)
    iu = np.triu_indices(y.shape[0], 1)
    closest = np.argsort(np.abs(truth[iu[0]] - truth[iu[1]]))[:4]
    rng = np.random.default_rng(35)
    misses = runs = 0
    for q in closest:
        i, j = iu[0][q], iu[1][q]
        orders = np.argsort(rng.random((25, y.shape[1])), axis=1)
        path = confidence_sequence(paired_values(y[i], y[j])[orders], n_items=y.shape[1],
                                   paired=True)  # fmt: skip
        lo, hi = difference_interval(path.lower, path.upper)
        true = float((y[i] - y[j]).mean())
        misses += int(np.any((lo > true + 1e-9) | (hi < true - 1e-9), axis=1).sum())
        runs += orders.shape[0]
        assert lo[:, -1].max() <= true + 1e-9 <= hi[:, -1].min() + 2e-9  # exact at exhaustion
    assert binom.sf(misses - 1, runs, 0.05) >= 1e-3, f"{misses} of {runs} runs missed"
