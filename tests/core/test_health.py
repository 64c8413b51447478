"""Item health on the real GPQA matrix and against brute-force formulas."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.irt.fit import fit_irt
from app.core.items.health import FLAGS, item_health


def test_gpqa_constant_items_are_flagged(gpqa) -> None:
    c = gpqa["correct"]
    h = item_health(c)
    all_wrong = np.flatnonzero(c.sum(axis=0) == 0)
    all_right = np.flatnonzero(c.sum(axis=0) == c.shape[0])
    assert all_wrong.size == 3 and all_right.size == 2
    assert np.array_equal(np.flatnonzero(h.flags["constant"]), np.sort(np.r_[all_wrong, all_right]))
    assert h.item_flags(int(all_wrong[0])) == ["constant"]
    s = h.summary()
    assert s["counts"]["constant"] == 5 and s["n_items"] == 448
    assert 0 < s["effective_informative"] <= s["n_informative"] <= 443


def test_point_biserial_matches_numpy_corrcoef(gpqa) -> None:
    c = gpqa["correct"][:, :40].astype(float)
    h = item_health(c)
    total = c.sum(axis=1)
    for i in (0, 7, 39):
        if h.flags["constant"][i]:
            continue
        ref = np.corrcoef(c[:, i], total - c[:, i])[0, 1]
        assert h.point_biserial[i] == pytest.approx(ref, abs=1e-12)


def test_flags_on_a_constructed_matrix() -> None:
    rng = np.random.default_rng(0)
    ability = np.sort(rng.normal(size=200))
    p = 1 / (1 + np.exp(-(ability[:, None] - rng.normal(size=30)[None, :])))
    y = (rng.random((200, 30)) < p).astype(float)
    y[:, 0] = 1.0  # constant
    y[:, 1] = 0.0
    y[[60, 120, 199], 1] = 1.0  # 1.5 % right: saturated
    y[:, 2] = (ability < np.median(ability)).astype(float)  # reversed key
    h = item_health(y)
    assert h.item_flags(0) == ["constant"]
    assert h.item_flags(1) == ["saturated"]
    assert "negative_discrimination" in h.item_flags(2)
    assert not h.flags["negative_discrimination"][3:].any()
    with pytest.raises(ValueError, match="flag"):
        h.flagged(["nope"])


def test_irt_fit_statistics() -> None:
    rng = np.random.default_rng(1)
    y = (rng.random((150, 20)) < 0.5).astype(float)
    y[:, :10] = (rng.random((150, 10)) < np.linspace(0.1, 0.9, 150)[:, None]).astype(float)
    irt = fit_irt(y, dims=1, rng=0)
    h = item_health(y, irt=irt)
    p = irt.predict_proba(irt.theta)
    infit = ((y - p) ** 2).sum(0) / (p * (1 - p)).sum(0)
    assert np.allclose(h.infit, infit, rtol=1e-6)
    assert h.discrimination.shape == (20,) and set(h.flags) == set(FLAGS)


def test_negative_discrimination_needs_the_effect_size_floor(gpqa) -> None:
    from scipy import stats as st

    c = gpqa["correct"].astype(float)
    m = c.shape[0]
    rest = c.sum(axis=1, keepdims=True) - c
    r = np.array(
        [np.corrcoef(c[:, i], rest[:, i])[0, 1] if c[:, i].std() > 0 else 0.0 for i in range(448)]
    )
    t = r * np.sqrt((m - 2) / (1 - r**2))
    significant = t < st.t.ppf(0.05, m - 2)
    assert item_health(c, min_effect=0.0).flags["negative_discrimination"].sum() == 132
    h = item_health(c)
    assert np.array_equal(h.flags["negative_discrimination"], significant & (r <= -0.2))
    assert h.summary()["counts"]["negative_discrimination"] == 39
