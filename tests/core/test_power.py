"""Paired power against a closed form and a simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.core.reliability.power import (
    benchmark_power,
    discordance_variance,
    pair_power,
    paired_sample_size,
    typical_discordance,
)


def test_closed_form() -> None:
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    w2 = float(discordance_variance(0.2, 0.1))
    assert w2 == pytest.approx(0.3 - 0.01)
    assert int(paired_sample_size(0.1, w2)) == int(np.ceil(z * z * w2 / 0.01))


def test_power_is_achieved_by_simulation() -> None:
    """5,000 simulated paired samples of the computed size: rejection rate ~0.80 (+-0.03)."""
    p10, p01 = 0.18, 0.10
    n = int(paired_sample_size(p10 - p01, discordance_variance(p10, p01)))
    rng = np.random.default_rng(0)
    cells = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=5000)
    d = (cells[:, 0] - cells[:, 1]) / n
    var = (cells[:, 0] + cells[:, 1]) / n - d**2
    zstat = d / np.sqrt(var / n)
    assert np.mean(np.abs(zstat) > stats.norm.ppf(0.975)) == pytest.approx(0.8, abs=0.03)


def test_pair_and_benchmark_answers(gpqa) -> None:
    c = gpqa["correct"]
    a = pair_power(c[0], c[1], delta=0.05)
    assert a.kind == "paired_significance" and a.source == "pair" and a.n >= 1
    w2 = typical_discordance(c[:50])
    y = c[:50].astype(float)
    n10 = y @ (1 - y).T / y.shape[1]
    iu = np.triu_indices(50, 1)
    ref = np.median(n10[iu] + n10.T[iu] - (n10[iu] - n10.T[iu]) ** 2)
    assert w2 == pytest.approx(ref, rel=1e-5)
    b = benchmark_power(c[:50], 0.05)
    assert b.source == "benchmark_typical" and 1 <= b.n <= 448
    with pytest.raises(ValueError, match="delta"):
        paired_sample_size(0.0, 0.2)
