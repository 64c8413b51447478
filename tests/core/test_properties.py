"""Property-based tests (hypothesis) of the engine's invariants.

Probabilities are probabilities, swapping two models mirrors the answer, more random items never
make the (tie-split) chance of the right order worse, intervals contain their estimate and shrink
with n, results do not depend on the order of the items, and seeds reproduce.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.estimation.stats import wilson_interval
from app.core.reliability.exact import exact_agreement, order_probabilities, pair_probability
from app.core.selectors import make_selector

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


@st.composite
def discordance(draw, max_items: int = 120):
    n_items = draw(st.integers(2, max_items))
    n10 = draw(st.integers(0, n_items))
    n01 = draw(st.integers(0, n_items - n10))
    n = draw(st.integers(1, n_items))
    return n10, n01, n_items, n


@st.composite
def small_matrix(draw, max_models: int = 6, max_items: int = 30):
    m = draw(st.integers(2, max_models))
    n_items = draw(st.integers(4, max_items))
    bits = draw(st.lists(st.integers(0, 1), min_size=m * n_items, max_size=m * n_items))
    return np.array(bits, dtype=np.uint8).reshape(m, n_items)


@SETTINGS
@given(discordance())
def test_order_probabilities_are_a_distribution(case) -> None:
    n10, n01, n_items, n = case
    o = order_probabilities(n10, n01, n_items, n)
    probs = np.array([o.p_greater, o.p_equal, o.p_less], dtype=float)
    assert ((probs >= -1e-15) & (probs <= 1 + 1e-12)).all()
    assert probs.sum() == np.float64(1.0) or abs(probs.sum() - 1.0) < 1e-10


@SETTINGS
@given(discordance())
def test_swapping_the_models_mirrors_the_probabilities(case) -> None:
    n10, n01, n_items, n = case
    ab = order_probabilities(n10, n01, n_items, n)
    ba = order_probabilities(n01, n10, n_items, n)
    np.testing.assert_allclose(
        [ab.p_greater, ab.p_equal, ab.p_less], [ba.p_less, ba.p_equal, ba.p_greater], atol=1e-12
    )


@SETTINGS
@given(discordance())
def test_more_random_items_never_lower_the_tie_split_chance_of_the_right_order(case) -> None:
    """P(same) itself is not monotone in n (parity of ties), but P(same) + P(tie)/2 is: the chance a
    random subset orders the pair right when a tie is broken by a coin."""
    n10, n01, n_items, _ = case
    if n10 <= n01:
        n10, n01 = n01, n10
    if n10 == n01:
        return
    o = order_probabilities(n10, n01, n_items, np.arange(1, n_items + 1))
    q = o.p_greater + o.p_equal / 2
    assert (np.diff(q) >= -1e-10).all()
    assert q[-1] == 1.0 or abs(q[-1] - 1.0) < 1e-12  # the whole benchmark orders the pair


@SETTINGS
@given(small_matrix(), st.integers(0, 2**32 - 1))
def test_results_do_not_depend_on_the_order_of_the_items(c, seed) -> None:
    perm = np.random.default_rng(seed).permutation(c.shape[1])
    n = max(1, c.shape[1] // 3)
    a = exact_agreement(c, n)
    b = exact_agreement(c[:, perm], n)
    assert a.mdad == b.mdad
    assert abs(a.mean_agreement - b.mean_agreement) < 1e-12
    pa = pair_probability(c, 0, 1, n)
    pb = pair_probability(c[:, perm], 0, 1, n)
    assert abs(float(pa.p_greater) - float(pb.p_greater)) < 1e-12


@SETTINGS
@given(st.integers(1, 400), st.floats(0.0, 1.0), st.integers(0, 2000))
def test_wilson_interval_contains_its_estimate_and_shrinks_with_n(n, p, extra) -> None:
    k = round(p * n)
    small = wilson_interval(k, n)
    assert small.ci_low <= small.value <= small.ci_high
    assert small.ci_high > small.ci_low  # never zero width, also at 0 % and 100 %
    big = wilson_interval(k * 4, n * 4)  # same proportion, four times the items
    assert big.ci_high - big.ci_low < small.ci_high - small.ci_low
    pop = wilson_interval(k, n, n_population=n + extra)
    assert pop.ci_low <= pop.value <= pop.ci_high
    assert pop.ci_high - pop.ci_low <= small.ci_high - small.ci_low + 1e-12  # FPC only narrows


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    st.sampled_from(["random", "subtask_stratified", "confidence_stratified"]),
    st.integers(0, 10**6),
)
def test_seeds_reproduce_and_differ(method, seed) -> None:
    rng = np.random.default_rng(11)
    correct = (rng.random((40, 60)) < rng.random((40, 1))).astype(np.uint8)
    subtasks = np.repeat(["a", "b", "c"], 20)
    selector = make_selector(method).fit(correct, subtasks=subtasks)
    first = selector.select(12, rng=seed)
    again = selector.select(12, rng=seed)
    np.testing.assert_array_equal(first.indices, again.indices)
    other = selector.select(12, rng=seed + 1)
    assert first.seed != other.seed or not np.array_equal(first.indices, other.indices)
