"""The selector contract, checked for every registered selector (``SELECTORS``).

New selectors are picked up automatically; fast settings for slow ones go in ``CONTRACT_PARAMS``
(a list of parameter dicts per name; default: the class defaults). Data: a small real slice of
GPQA (40 source models x 60 items, the even positions as the candidate pool), synthetic subtask
labels and a seeded synthetic confidence matrix.

Weights: for mean-type estimators (``mean``, ``weighted_mean``, ``weighted_confidence``) the
weights are >= 0 and sum to 1 (``mean``: all equal). For ``horvitz_thompson`` they are
``1 / (N pi_i)`` with ``0 < pi_i <= 1``: each is >= 1/N and, when the selection stores
``inclusion_probability``, equals ``1 / (N pi)`` exactly; they need not sum to 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors import SELECTORS, make_selector

# Fast settings per selector name; each dict is one contract case.
CONTRACT_PARAMS: dict[str, list[dict]] = {
    "subtask_stratified": [
        {"allocation": "equal"},
        {"allocation": "proportional"},
        {"allocation": "paper_proportional"},
    ],
    "confidence_stratified": [{"inclusion": "paper"}, {"inclusion": "exact"}],
    "dpp": [{"weighting": "mean"}, {"weighting": "sampler"}],
    "anchor_points": [{"estimate_on": "confidence"}, {"estimate_on": "correct"}],
    "tiny_benchmarks": [{"dims": 2}],
}
# Selectors whose subset may differ in size from n: ">=" (overflow) or "<=" (shared anchors).
SIZE_RULE = {"confidence_stratified": ">=", "tiny_benchmarks": "<="}
MEAN_TYPE = {"mean", "weighted_mean", "weighted_confidence"}
SIZES = (1, 5, 12)
N_SOURCES, N_ITEMS = 40, 60


def _params(name: str) -> list[dict]:
    params = CONTRACT_PARAMS.get(name, [{}])
    accepted = []
    for p in params:
        try:
            SELECTORS[name](**p)
        except TypeError:  # the selector's parameters changed: fall back to its defaults
            p = {}
        accepted.append(p)
    return accepted


def _case_id(name: str, params: dict) -> str:
    return f"{name}-{'-'.join(f'{k}={v}' for k, v in params.items()) or 'default'}"


_PAIRS = [(name, p) for name in sorted(SELECTORS) for p in _params(name)]
CASES = [pytest.param(name, p, id=_case_id(name, p)) for name, p in _PAIRS]
FIXTURE_CASES = [pytest.param((name, p), id=_case_id(name, p)) for name, p in _PAIRS]


@pytest.fixture(scope="module")
def data(gpqa) -> dict[str, np.ndarray]:
    correct = gpqa["correct"][:N_SOURCES, :N_ITEMS].astype(np.float64)
    rng = np.random.default_rng(7)
    confidence = np.clip(0.25 + 0.5 * correct + rng.normal(0, 0.15, correct.shape), 0, 1)
    subtasks = np.array(["a"] * 30 + ["b"] * 20 + ["c"] * 10)
    return {
        "correct": correct,
        "confidence": confidence,
        "subtasks": subtasks,
        "candidates": np.arange(0, N_ITEMS, 2),
        "target_correct": gpqa["correct"][N_SOURCES : N_SOURCES + 8, :N_ITEMS].astype(np.float64),
    }


def _fit(name, params, data, *, with_confidence=True):
    return make_selector(name, **params).fit(
        data["correct"],
        confidence=data["confidence"] if with_confidence else None,
        subtasks=data["subtasks"],
        candidates=data["candidates"],
    )


@pytest.fixture(scope="module", params=FIXTURE_CASES)
def fitted(request, data):
    name, params = request.param
    return name, params, _fit(name, params, data)


def _check_size(name, sel, n):
    rule = SIZE_RULE.get(name, "==")
    if rule == "==":
        assert sel.size == n
    elif rule == ">=":
        assert sel.size >= n
    else:
        assert 1 <= sel.size <= n


@pytest.mark.parametrize("n", SIZES)
def test_sizes_uniqueness_range_and_provenance(fitted, data, n):
    name, _, selector = fitted
    sel = selector.select(n, rng=3)
    _check_size(name, sel, n)
    assert sel.indices.dtype == np.int64
    assert np.unique(sel.indices).shape == sel.indices.shape
    assert np.isin(sel.indices, data["candidates"]).all()
    assert sel.weights.shape == sel.indices.shape and np.isfinite(sel.weights).all()
    assert sel.method == name and sel.n_requested == n and sel.seed == 3
    assert sel.n_candidates == data["candidates"].shape[0]
    assert dict(sel.params) == dict(selector.params)
    assert sel.estimator in selector.estimators
    assert not sel.indices.flags.writeable


@pytest.mark.parametrize("n", SIZES)
def test_weights_match_the_estimator(fitted, data, n):
    _, _, selector = fitted
    sel = selector.select(n, rng=11)
    w = sel.weights
    assert (w >= 0).all()
    if sel.estimator in MEAN_TYPE:
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
    if sel.estimator == "mean":
        np.testing.assert_allclose(w, 1.0 / sel.size)
    if sel.estimator == "horvitz_thompson":
        n_pool = sel.n_candidates
        assert (w >= 1.0 / n_pool - 1e-12).all()
        if "inclusion_probability" in sel.fitted:
            pi = sel.fitted["inclusion_probability"]
            assert ((pi > 0) & (pi <= 1)).all()
            np.testing.assert_allclose(w, 1.0 / (n_pool * pi))
    y = data["target_correct"][:, sel.indices]
    p = np.clip(y * 0.8 + 0.1, 0, 1)
    est = selector.estimate(sel, y, p)
    assert est.shape == (y.shape[0],) and np.isfinite(est).all()
    if sel.estimator in MEAN_TYPE:
        assert ((est >= 0) & (est <= 1)).all()


def test_same_seed_same_result(fitted):
    _, _, selector = fitted
    a, b = selector.select(5, rng=123), selector.select(5, rng=123)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.seed == b.seed == 123


def test_different_seeds_different_subsets(fitted):
    _, _, selector = fitted
    subsets = {tuple(np.sort(selector.select(5, rng=s).indices)) for s in range(6)}
    if type(selector).randomized:
        assert len(subsets) > 1
    else:
        assert len(subsets) == 1


@pytest.mark.parametrize(
    "seed_kind", ["int", "np.int64", "generator", "none"], ids=lambda s: f"rng={s}"
)
def test_seed_types(fitted, seed_kind):
    _, _, selector = fitted
    rng = {
        "int": 5,
        "np.int64": np.int64(5),
        "generator": np.random.default_rng(5),
        "none": None,
    }[seed_kind]
    sel = selector.select(5, rng=rng)
    if seed_kind in ("int", "np.int64"):
        assert sel.seed == 5 and type(sel.seed) is int
        ref = selector.select(5, rng=5)
        np.testing.assert_array_equal(sel.indices, ref.indices)
    elif seed_kind == "generator":
        assert sel.seed is None
        again = selector.select(5, rng=np.random.default_rng(5))
        np.testing.assert_array_equal(sel.indices, again.indices)
    else:
        assert isinstance(sel.seed, int)
        replay = selector.select(5, rng=sel.seed)
        np.testing.assert_array_equal(sel.indices, replay.indices)
        np.testing.assert_array_equal(sel.weights, replay.weights)


@pytest.mark.parametrize(("name", "params"), CASES)
def test_inputs_unchanged(name, params, data):
    arrays = {k: np.array(v, copy=True) for k, v in data.items()}
    copies = {k: v.copy() for k, v in arrays.items()}
    selector = make_selector(name, **params).fit(
        arrays["correct"],
        confidence=arrays["confidence"],
        subtasks=arrays["subtasks"],
        candidates=arrays["candidates"],
    )
    sel = selector.select(5, rng=0)
    y = arrays["target_correct"][:, sel.indices]
    y_copy = y.copy()
    selector.estimate(sel, y, np.clip(y, 0.1, 0.9))
    for k in arrays:
        np.testing.assert_array_equal(arrays[k], copies[k])
    np.testing.assert_array_equal(y, y_copy)


@pytest.mark.parametrize(("name", "params"), CASES)
def test_fallback_recorded(name, params, data):
    with_conf = _fit(name, params, data).select(5, rng=0)
    without = _fit(name, params, data, with_confidence=False).select(5, rng=0)
    if SELECTORS[name].uses_sources:
        assert with_conf.signal == "confidence"
        assert without.signal == "correct"
    else:
        assert with_conf.signal == without.signal == "none"


def _bad_fit_inputs(data):
    nan_correct = data["correct"].copy()
    nan_correct[0, 0] = np.nan
    return [
        ("correct", {"correct": nan_correct}),
        ("correct", {"correct": data["correct"][0]}),
        ("confidence", {"confidence": data["confidence"][:, :-1]}),
        ("confidence", {"confidence": data["confidence"] + 1.0}),
        ("subtasks", {"subtasks": data["subtasks"][:-1]}),
        ("candidates", {"candidates": np.array([0, N_ITEMS])}),
    ]


@pytest.mark.parametrize(("name", "params"), CASES)
def test_bad_fit_input_names_the_argument(name, params, data):
    for arg, override in _bad_fit_inputs(data):
        kwargs = {
            "confidence": data["confidence"],
            "subtasks": data["subtasks"],
            "candidates": data["candidates"],
        }
        correct = override.pop("correct", data["correct"])
        kwargs.update(override)
        with pytest.raises(ValueError, match=arg):
            make_selector(name, **params).fit(correct, **kwargs)


@pytest.mark.parametrize("bad_n", [0, -1, 31, 2.5, "3", True, None])
def test_bad_n_names_n(fitted, bad_n):
    _, _, selector = fitted
    with pytest.raises(ValueError, match=r"\bn\b"):
        selector.select(bad_n, rng=0)


def test_bad_estimate_input(fitted, data):
    _, _, selector = fitted
    sel = selector.select(5, rng=0)
    y = data["target_correct"][:, sel.indices]
    with pytest.raises(ValueError, match="estimator"):
        selector.estimate(sel, y, estimator="no_such_estimator")
    with pytest.raises(ValueError, match="correct"):
        selector.estimate(sel, y[:, :-1])
    y_nan = y.copy()
    y_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="correct"):
        selector.estimate(sel, y_nan)


def test_select_before_fit_raises():
    for name in SELECTORS:
        with pytest.raises(RuntimeError, match="fit"):
            make_selector(name, **_params(name)[0]).select(3, rng=0)
