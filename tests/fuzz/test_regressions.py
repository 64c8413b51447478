"""Regressions found by the schemathesis pass, pinned where they live (no service needed)."""

from __future__ import annotations

import numpy as np

from app.api.middleware import json_depth
from app.core import smallest_n


def test_smallest_n_at_a_threshold_a_hair_under_one_is_the_full_size() -> None:
    # P(same order) is exactly 1 at n = N; round-off once made it 0.9999999999999998 < target
    # and the search indexed an empty array (a 500 on GET .../verdict?threshold=0.9999999999999999).
    rng = np.random.default_rng(0)
    correct = (rng.random((2, 40)) < [[0.7], [0.4]]).astype(np.uint8)
    n = smallest_n(correct, 0, 1, 0.9999999999999999)
    assert n is not None and 1 <= n <= 40
    assert smallest_n(correct, 0, 1, 0.8) <= n


def test_json_depth_ignores_brackets_inside_strings() -> None:
    assert json_depth(b"1") == 0
    assert json_depth(b"[]") == 1
    assert json_depth(b'{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert json_depth(b'["\\"[[[", [[]]]') == 3
    assert json_depth(b"[" * 5000 + b"]" * 5000) == 5000
