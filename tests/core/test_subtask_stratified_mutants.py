"""Mutation-driven tests for ``app.core.selectors.subtask_stratified``.

Oracles: the documented defaults and allocation rules, worked by hand on tiny pools.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors import make_selector


def _fit(sizes, allocation=None):
    labels = np.repeat(np.array(list("abcdefgh"[: len(sizes)])), sizes)
    correct = np.zeros((2, labels.size))
    correct[0, ::2] = 1.0
    params = {} if allocation is None else {"allocation": allocation}
    return make_selector("subtask_stratified", **params).fit(correct, subtasks=labels), labels


def test_default_allocation_is_equal():
    sel, labels = _fit([3, 3])
    assert sel.params == {"allocation": "equal"}
    s = sel.select(4, rng=0)  # 2 per subtask, plain mean
    assert sorted(labels[s.indices].tolist()) == ["a", "a", "b", "b"]
    assert s.estimator == "mean"


def test_equal_error_names_the_first_short_subtask_exactly():
    sel, _ = _fit([1, 5, 1], "equal")  # n = 6: 2 each; a and c have 1 candidate
    # the label as a plain str (NumPy >= 2 would print np.str_('a') by repr)
    msg = r"^n: 6 items need 2 from subtask 'a', which has only 1 candidates$"
    with pytest.raises(ValueError, match=msg):
        sel.select(6, rng=0)


def test_equal_allows_a_subtask_to_be_exhausted_exactly():
    sel, labels = _fit([2, 3], "equal")
    s = sel.select(4, rng=3)  # 2 each: a has exactly 2
    np.testing.assert_array_equal(np.sort(s.indices), [0, 1, *np.sort(s.indices)[2:]])
    assert (labels[s.indices] == "a").sum() == 2
    np.testing.assert_array_equal(s.weights, 0.25)
