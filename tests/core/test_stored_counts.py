"""Stored pair counts (issue 27): a leaderboard from stored counts EQUALS the one from the
matrix (rows, tests, ranks, tiers, pair records), and counts updated row and column after
adds, replaces, deletes and restores equal counts computed from scratch (property test)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.ranking.leaderboard import LeaderboardRows, leaderboard
from app.core.ranking.pair_table import LeaderboardPairs
from app.core.ranking.stored_counts import (
    PairCounts,
    count_dtype,
    leaderboard_from_counts,
    pair_counts,
    update_pair_counts,
)

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def assert_same_counts(a: PairCounts, b: PairCounts) -> None:
    for f in ("n10", "n11", "shared", "n_own", "k_own"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert a.n_items == b.n_items


def assert_same_board(got, want, sample_pairs: int = 400) -> None:
    for f in LeaderboardRows.__dataclass_fields__:
        assert np.array_equal(getattr(got.rows, f), getattr(want.rows, f)), f
    assert got.n_tiers == want.n_tiers and got.method == want.method
    assert got.table.n_significant == want.table.n_significant
    assert np.array_equal(got.unshared_pairs, want.unshared_pairs)
    m = got.rows.model.size
    a, b = np.triu_indices(m, 1)
    pick = np.linspace(0, a.size - 1, min(a.size, sample_pairs)).astype(int)
    pg, pw = got.table.pairs(a[pick], b[pick]), want.table.pairs(a[pick], b[pick])
    for f in LeaderboardPairs.__dataclass_fields__:
        assert np.array_equal(getattr(pg, f), getattr(pw, f), equal_nan=True), f
    for i in (0, m // 2, m - 1):
        assert np.array_equal(got.table.better_row(i), want.table.better_row(i))
        assert np.array_equal(got.table.significant_row(i), want.table.significant_row(i))


def _synthetic(rng: np.random.Generator, m: int, n: int, gaps: bool):
    """SYNTHETIC: abilities spread 0.2-0.9, item difficulties, optional coverage gaps."""
    ability = rng.uniform(0.2, 0.9, m)[:, None]
    ease = rng.uniform(-0.2, 0.2, n)[None, :]
    correct = (rng.random((m, n)) < np.clip(ability + ease, 0, 1)).astype(np.uint8)
    coverage = rng.random((m, n)) > 0.15 if gaps else None
    if coverage is not None:
        coverage[:, 0] = True  # every pair shares an item
    return correct, coverage


@pytest.mark.parametrize("gaps", [False, True])
@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_board_from_counts_equals_board_from_matrix(gaps: bool, correction: str) -> None:
    correct, coverage = _synthetic(np.random.default_rng(27), 120, 90, gaps)
    want = leaderboard(correct, coverage=coverage, correction=correction)
    got = leaderboard_from_counts(pair_counts(correct, coverage), correction=correction)
    assert_same_board(got, want)


def test_board_from_counts_on_gpqa(gpqa) -> None:
    correct = gpqa["correct"]
    counts = pair_counts(correct)
    assert counts.n10.dtype == np.uint16 and counts.n11 is None  # 448 items, no gaps
    assert_same_board(leaderboard_from_counts(counts), leaderboard(correct))


def test_gpqa_counts_after_one_upload_replace_and_delete(gpqa) -> None:
    correct = gpqa["correct"]
    m = correct.shape[0]
    old = pair_counts(correct[:-1])
    got, changed = update_pair_counts(old, np.arange(m - 1), np.arange(m - 1), correct)
    assert changed.tolist() == [m - 1]
    assert_same_counts(got, pair_counts(correct))
    assert_same_board(leaderboard_from_counts(got), leaderboard(correct))
    replaced = correct.copy()
    replaced[5] = 1 - replaced[5]
    keep = np.delete(np.arange(m), 5)
    got, changed = update_pair_counts(got, keep, keep, replaced)
    assert changed.tolist() == [5]
    assert_same_counts(got, pair_counts(replaced))
    gone = np.delete(replaced, 7, axis=0)  # model 7 deleted: rows after it move up
    keep_old = np.delete(np.arange(m), 7)
    got, changed = update_pair_counts(got, keep_old, np.arange(m - 1), gone)
    assert changed.size == 0
    assert_same_counts(got, pair_counts(gone))
    assert_same_board(leaderboard_from_counts(got), leaderboard(gone))


def test_count_dtype_and_mismatch() -> None:
    assert count_dtype(255) == np.uint8 and count_dtype(256) == np.uint16
    correct, _ = _synthetic(np.random.default_rng(1), 10, 20, False)
    with pytest.raises(ValueError, match="compute them all"):
        update_pair_counts(pair_counts(correct), [0], [0], correct[:, :10])


OPS = st.lists(
    st.tuples(st.sampled_from(["add", "replace", "delete", "restore"]), st.integers(0, 10**6)),
    min_size=1,
    max_size=8,
)


@SETTINGS
@given(ops=OPS, seed=st.integers(0, 2**31), gaps=st.booleans())
def test_updates_equal_full_counts_after_any_sequence(ops, seed: int, gaps: bool) -> None:
    """Models live by name; each step changes the population, the update is given only the
    unchanged models (same name, same row), and must equal the counts computed from scratch."""
    rng = np.random.default_rng(seed)
    n = 40
    correct, coverage = _synthetic(rng, 12, n, gaps)
    cov = coverage if coverage is not None else np.ones_like(correct, dtype=bool)
    rows = {f"m{i}": (correct[i], cov[i]) for i in range(correct.shape[0])}
    deleted: dict[str, tuple] = {}
    fresh = iter(range(10**6))

    def matrix(names):
        c = np.array([rows[k][0] for k in names])
        k = np.array([rows[k][1] for k in names])
        return c, (k if gaps else None)

    names = sorted(rows)
    old_c, old_k = matrix(names)
    counts = pair_counts(old_c, old_k)
    for op, pick in ops:
        if op == "add" or (op == "restore" and not deleted):
            c, k = _synthetic(rng, 1, n, gaps)
            rows[f"new{next(fresh)}"] = (c[0], k[0] if gaps else np.ones(n, dtype=bool))
        elif op == "replace":
            name = sorted(rows)[pick % len(rows)]
            c, k = _synthetic(rng, 1, n, gaps)
            rows[name] = (c[0], k[0] if gaps else rows[name][1])
        elif op == "delete" and len(rows) > 3:
            name = sorted(rows)[pick % len(rows)]
            deleted[name] = rows.pop(name)
        elif op == "restore":
            name = sorted(deleted)[pick % len(deleted)]
            rows[name] = deleted.pop(name)
        new_names = sorted(rows)
        correct, coverage = matrix(new_names)
        before = dict(zip(names, range(len(names)), strict=True))
        same = [
            (before[k], j)
            for j, k in enumerate(new_names)
            if k in before
            and np.array_equal(old_c[before[k]], correct[j])
            and (old_k is None or coverage is None or np.array_equal(old_k[before[k]], coverage[j]))
        ]
        keep_old = np.array([a for a, _ in same], dtype=np.int64)
        keep_new = np.array([b for _, b in same], dtype=np.int64)
        want = pair_counts(correct, coverage)
        if want.masked != counts.masked:  # a mask appeared or vanished: computed anew
            counts = want
        else:
            counts, changed = update_pair_counts(counts, keep_old, keep_new, correct, coverage)
            assert changed.size == len(new_names) - len(same)
            assert_same_counts(counts, want)
        names, old_c, old_k = new_names, correct, coverage
    assert_same_board(leaderboard_from_counts(counts), leaderboard(correct, coverage=coverage))
