"""Kills a mutant of the int64 triple keys in ``app.core.reliability.exact.order_probabilities`` (issue 17).

The keys are ``(n10 * (N + 1) + n01) * (N + 1) + n``, which fit in int64 up to
``N = 2**21 - 1``; a wider base (``N + 2``) overflows there for ``n10 = N``. Oracle: for a
one-item subset (``n = 1``) the item is A-only, B-only or neither with probabilities
``n10 / N``, ``n01 / N`` and ``1 - (n10 + n01) / N``.
"""

from __future__ import annotations

import pytest

from app.core.reliability.exact import order_probabilities


def test_keys_at_the_largest_int64_safe_benchmark():
    n_items = 2**21 - 1
    p = order_probabilities([n_items, 3], [0, 5], n_items, 1)
    assert p.p_greater.tolist() == pytest.approx([1.0, 3 / n_items], rel=1e-9, abs=1e-15)
    assert p.p_less.tolist() == pytest.approx([0.0, 5 / n_items], rel=1e-9, abs=1e-15)
    assert p.p_equal.tolist() == pytest.approx([0.0, 1 - 8 / n_items], rel=1e-9, abs=1e-15)
