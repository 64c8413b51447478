"""Edge cases of the exact random-subset search found by mutation testing (issue 17)."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from app.core.reliability.exact import smallest_n


def _p_same_bruteforce(a: np.ndarray, b: np.ndarray, n: int) -> float:
    """P(a random n-subset orders a above b), counting every subset."""
    subsets = list(combinations(range(a.size), n))
    wins = sum(1 for s in subsets if a[list(s)].sum() > b[list(s)].sum())
    return wins / len(subsets)


def test_smallest_n_at_probability_one_is_the_first_size_that_is_certain() -> None:
    # A leads by 2 (4 items only A gets right, 2 only B): every 7-subset of the 8 items keeps A
    # ahead, so P = 1 first at n = 7. Round-off once made the second pass of the search miss it
    # (0.9999999999999999 < 1.0) and raise IndexError.
    correct = np.array([[1, 1, 1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 1, 1, 0]])
    a, b = correct
    brute = [_p_same_bruteforce(a, b, n) for n in range(1, 9)]
    want = next(n for n, p in zip(range(1, 9), brute, strict=True) if p >= 1.0)
    assert smallest_n(correct, 0, 1, 1.0) == want
    for threshold in (0.5, 0.8, 0.95):
        want = next(n for n, p in zip(range(1, 9), brute, strict=True) if p >= threshold)
        assert smallest_n(correct, 0, 1, threshold) == want
