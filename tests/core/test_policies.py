"""Session policies deciding with the §7 CS (app.core.sequential.policies) on real GPQA data."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.irt.fit import fit_irt
from app.core.sequential.active import CV_BET, DrawRecord
from app.core.sequential.fluid import ItemBank
from app.core.sequential.policies import (
    IRT_POLICIES,
    POLICIES,
    POLICY_C,
    PolicyState,
    point_estimate,
    policy_draw,
    policy_init,
    policy_interval,
    policy_update,
    replay,
)
from app.core.sequential.simulation import simulate_policy


@pytest.fixture(scope="module")
def split(gpqa):
    """IRT fit on 300 GPQA models; the other 120 are the held-out sessions' models."""
    c = gpqa["correct"].astype(float)
    perm = np.random.default_rng(0).permutation(c.shape[0])
    bank = ItemBank.from_irt(fit_irt(c[perm[:300]], dims=2, rng=0))
    return c, perm[300:], bank


def _run(policy, bank, a, rng, batch=16):
    s, n = a.shape
    st = policy_init(policy, n, bank=bank, sessions=s)
    recs, vals = [], []
    while st.cs.t[0] < n:
        k = min(batch, n - int(st.cs.t[0]))
        rec = policy_draw(st, bank, k, rng.random((s, k)))
        v = np.take_along_axis(a, rec.items, 1)
        policy_update(st, bank, rec, v, inplace=True)
        recs.append(rec)
        vals.append(v)
        yield st, DrawRecord.concatenate(recs), np.concatenate(vals, axis=1)


@pytest.mark.parametrize("policy", POLICIES)
def test_policy_exact_at_exhaustion_replayable_and_persistable(split, policy):
    c, held, bank = split
    a = c[held[:6]]
    n = a.shape[1]
    rng = np.random.default_rng(3)
    for st, recs, vals in _run(policy, bank, a, rng, batch=64):
        t = int(st.cs.t[0])
        np.testing.assert_array_equal(st.seen.sum(1), t)  # no item drawn twice
        if t == 128:  # replay from the stored draws and values gives the same CS
            again = replay(policy_init(policy, n, bank=bank, sessions=6), recs, vals)
            np.testing.assert_array_equal(again.rejected, st.cs.rejected)
            np.testing.assert_allclose(again.log_capital, st.cs.log_capital, atol=1e-12)
            back = PolicyState.from_dict(st.to_dict())
            np.testing.assert_array_equal(back.theta, st.theta)
            np.testing.assert_array_equal(policy_interval(back)[0], policy_interval(st)[0])
            est = point_estimate(st, bank)
            lo, hi = policy_interval(st)
            assert np.all(np.abs(est - a.mean(1)) < 0.2)
            if policy == "random":
                np.testing.assert_allclose(est, st.cs.total / t)
    lo, hi = policy_interval(st)
    np.testing.assert_array_equal(lo, a.mean(1))
    np.testing.assert_array_equal(hi, a.mean(1))
    np.testing.assert_allclose(point_estimate(st, bank), a.mean(1), atol=1e-12)


def test_irt_policies_draw_where_the_design_says(split):
    c, _held, bank = split
    st = policy_init("neyman", c.shape[1], bank=bank, sessions=1)
    rec = policy_draw(st, bank, 5, np.full((1, 5), 0.5))
    assert np.all(rec.prob > 0) and np.all(rec.prob >= 0.5 / rec.remaining - 1e-15)
    st_r = policy_init("random", c.shape[1], sessions=1)
    rec_r = policy_draw(st_r, None, 5, np.full((1, 5), 0.5))
    np.testing.assert_allclose(rec_r.prob * rec_r.remaining, 1.0)
    np.testing.assert_array_equal(rec_r.prediction, 0.0)
    with pytest.raises(ValueError, match="bank"):
        policy_init("fluid", c.shape[1])
    with pytest.raises(ValueError, match="policy"):
        policy_init("oracle", c.shape[1])


@pytest.mark.parametrize("policy", POLICIES)
def test_interval_ever_misses_at_most_alpha_on_real_paths(split, policy):
    # 240 held-out GPQA models, full paths (batch 10, alpha = 0.05): the share of sessions whose
    # interval for Delta excludes the truth at some batch end is <= alpha + 3 SE
    c, held, bank = split
    rng = np.random.default_rng(17)
    a = c[np.concatenate([held, held])]
    base = c[rng.integers(0, c.shape[0], a.shape[0])].mean(1)
    items, lo, hi, ever = simulate_policy(
        policy,
        a,
        base,
        bank=bank if policy in IRT_POLICIES else None,
        alpha=0.05,
        batch_size=10,
        goal="precision",
        precision=1e-9,  # met only once the interval is a single point: (nearly) full paths
        rng=rng,
    )
    s = a.shape[0]
    assert np.median(items) == c.shape[1]
    assert ever.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / s)
    full = items == c.shape[1]
    np.testing.assert_allclose(lo[full], (a.mean(1) - base)[full], atol=1e-12)
    np.testing.assert_array_equal(lo, hi)


def test_assisted_defaults_and_old_assisted_sessions_keep_their_bet(split):
    # new assisted sessions bet with "agrapa-cv" at c = 0.9; a session stored before (aGRAPA,
    # c = 1/2) keeps its bet through to_dict/from_dict and replays with it exactly
    c, held, bank = split
    a = c[held[:3]]
    n = a.shape[1]
    st = policy_init("assisted", n, bank=bank, sessions=3)
    assert (st.cs.bet, st.cs.c) == (CV_BET[0], 0.9)
    assert (policy_init("random", n, sessions=1).cs.bet, POLICY_C["random"]) == ("agrapa", 0.5)
    old = policy_init("assisted", n, bank=bank, sessions=3, bet="agrapa", c=0.5)
    rng = np.random.default_rng(5)
    rec = policy_draw(old, bank, 30, rng.random((3, 30)))
    stored = {k: v for k, v in rec.to_dict().items() if k != "mean_variance"}  # an old record
    v = np.take_along_axis(a, rec.items, 1)
    back = PolicyState.from_dict(old.to_dict())
    policy_update(back, bank, DrawRecord.from_dict(stored), v, inplace=True)
    assert (back.cs.bet, back.cs.c) == ("agrapa", 0.5)
    fresh = policy_init("assisted", n, bank=bank, sessions=3, bet="agrapa", c=0.5)
    again = replay(fresh, rec, v)
    np.testing.assert_allclose(again.log_capital, back.cs.log_capital, atol=1e-12)
    new = replay(policy_init("assisted", n, bank=bank, sessions=3), rec, v)
    assert not np.allclose(new.log_capital, back.cs.log_capital)  # the new bet differs
