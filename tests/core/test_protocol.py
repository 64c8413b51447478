"""The paper protocol (§1.3): splits, seeds, invariances, and a slow per-run reference."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.reliability.protocol import run_protocol, selection_seed, split_run
from app.core.selectors import make_selector


@pytest.fixture(scope="module")
def small(gpqa):
    c = gpqa["correct"]
    sub = np.array(["a"] * 200 + ["b"] * 148 + ["c"] * 100)
    return c, sub


def test_split_run_shapes_and_halves(small) -> None:
    c, sub = small
    codes = np.unique(sub, return_inverse=True)[1]
    targets, sources, seen = split_run(
        c.shape[0], codes, n_targets=50, n_sources=300, seed=3, run=7
    )
    assert len(set(targets.tolist())) == 50 and len(set(sources.tolist())) == 300
    assert not set(targets.tolist()) & set(sources.tolist())
    for label, size in (("a", 200), ("b", 148), ("c", 100)):
        assert seen[sub == label].sum() == size // 2
    again = split_run(c.shape[0], codes, n_targets=50, n_sources=300, seed=3, run=7)
    for x, y in zip((targets, sources, seen), again, strict=True):
        np.testing.assert_array_equal(x, y)
    other = split_run(c.shape[0], codes, n_targets=50, n_sources=300, seed=3, run=8)
    assert not np.array_equal(seen, other[2])


def test_split_is_uniform_within_subtask() -> None:
    codes = np.zeros(6, dtype=np.int64)
    hits = np.zeros(6)
    for run in range(3000):
        hits += split_run(10, codes, n_targets=2, n_sources=2, seed=1, run=run)[2]
    np.testing.assert_allclose(hits / 3000, 0.5, atol=0.04)


@pytest.mark.parametrize("seed", [0, np.int64(5)])
def test_workers_do_not_change_results(small, seed) -> None:
    c, sub = small
    kw = dict(subtasks=sub, runs=5, n_sources=100, n_targets=20, seed=seed)
    one = run_protocol(c, ("random", "subtask_stratified"), (10, 40), workers=1, **kw)
    two = run_protocol(c, ("random", "subtask_stratified"), (10, 40), workers=2, **kw)
    for name in (
        "targets",
        "sources",
        "seen",
        "acc_seen",
        "acc_unseen",
        "acc_full",
        "estimates",
        "subset_sizes",
    ):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))


def test_methods_are_independent_of_each_other(small) -> None:
    c, sub = small
    kw = dict(subtasks=sub, runs=3, n_sources=50, n_targets=10, seed=11)
    both = run_protocol(c, ("subtask_stratified", "random"), (10, 25), **kw)
    alone = run_protocol(c, ("random",), (25,), **kw)
    np.testing.assert_array_equal(both.cell("random", 25), alone.cell("random", 25))
    np.testing.assert_array_equal(both.seen, alone.seen)


def test_random_matches_slow_reference(small) -> None:
    c, sub = small
    res = run_protocol(
        c, ("random",), (10, 50), subtasks=sub, runs=3, n_sources=30, n_targets=12, seed=2
    )
    codes = np.unique(sub, return_inverse=True)[1]
    for run in range(3):
        targets, _, seen = split_run(c.shape[0], codes, n_targets=12, n_sources=30, seed=2, run=run)
        seen_idx = np.flatnonzero(seen)
        rec = res.record("random", 50, run)
        np.testing.assert_array_equal(rec.targets, targets)
        np.testing.assert_array_equal(rec.acc_seen, [np.mean(c[t, seen_idx]) for t in targets])
        np.testing.assert_array_equal(rec.acc_unseen, [np.mean(c[t, ~seen]) for t in targets])
        np.testing.assert_array_equal(rec.acc_full, [np.mean(c[t]) for t in targets])
        sel = (
            make_selector("random")
            .fit(np.zeros((1, seen_idx.size)))
            .select(50, rng=selection_seed(2, run, "random", 50))
        )
        expected = [np.mean(c[t, seen_idx[sel.indices]]) for t in targets]
        np.testing.assert_allclose(rec.estimates, expected, rtol=0, atol=1e-12)


def test_equal_counts_tie_exactly(small) -> None:
    c, sub = small
    res = run_protocol(
        c, ("random",), (25,), subtasks=sub, runs=4, n_sources=20, n_targets=50, seed=0
    )
    est = res.cell("random", 25)
    counts = np.rint(est * 25)
    np.testing.assert_allclose(est * 25, counts, atol=1e-9)
    for row, k in zip(est, counts, strict=True):
        for value in np.unique(k):
            assert np.unique(row[k == value]).size == 1


def test_inputs_not_mutated_and_result_frozen(small) -> None:
    c, sub = small
    before = c.copy()
    res = run_protocol(c, ("random",), (10,), subtasks=sub, runs=2, n_sources=10, n_targets=5)
    np.testing.assert_array_equal(c, before)
    with pytest.raises(ValueError):
        res.estimates[0, 0, 0, 0] = 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(methods=("nope",)), "methods"),
        (dict(sizes=(10, 10)), "sizes"),
        (dict(sizes=(300,)), "sizes"),
        (dict(n_sources=400), "n_sources"),
        (dict(runs=0), "runs"),
        (dict(seed=-1), "seed"),
    ],
)
def test_validation_names_the_argument(small, kwargs, field) -> None:
    c, sub = small
    args = dict(methods=("random",), sizes=(10,), subtasks=sub, runs=1, n_sources=100, n_targets=50)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        run_protocol(c, **args)


def test_refitted_selectors_give_the_results_of_fresh_ones(small) -> None:
    """The protocol refits one instance per method for every run: same records as fresh ones."""
    from app.core._validation import validate_results
    from app.core.reliability.protocol import prepare_state, run_chunk

    c, sub = small
    methods, sizes = ("anchor_points", "tiny_benchmarks", "dpp", "random"), (5, 20)
    state = prepare_state(
        validate_results(c, subtasks=sub),
        methods,
        sizes,
        n_targets=10,
        n_sources=60,
        seed=4,
        selector_params={"tiny_benchmarks": {"max_iter": 30}},
        blas_threads=1,
    )
    kept: dict = {}
    shared = [run_chunk(state, [r], selectors=kept) for r in range(3)]
    assert set(kept) == set(methods)
    for r, part in enumerate(shared):
        fresh = run_chunk(state, [r])
        np.testing.assert_array_equal(part["estimates"], fresh["estimates"])
        np.testing.assert_array_equal(part["subset_sizes"], fresh["subset_sizes"])


def test_fit_data_takes_validated_results_only(small) -> None:
    from app.core._validation import validate_results

    c, sub = small
    data = validate_results(c[:40], subtasks=sub)
    a = make_selector("subtask_stratified").fit_data(data).select(12, rng=3)
    b = make_selector("subtask_stratified").fit(c[:40], subtasks=sub).select(12, rng=3)
    np.testing.assert_array_equal(a.indices, b.indices)
    with pytest.raises(TypeError, match="ResultsData"):
        make_selector("random").fit_data(c[:40])
